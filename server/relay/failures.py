"""The error log of a failed model call (type 5, docs/api/logs.md#logs): what `Relay.call` hands the worker's
error-log buffer when a call ends with an error.

Only a known caller gets one: a call whose API key passed authentication (the key exists, is enabled, not
expired or used up, its owner enabled, the client IP and the group allowed). A refusal before that — an
invalid key above all — writes nothing, so an anonymous flood writes nothing. One row per call, whatever
the route, for a refusal (model not allowed, no price, rate limited, insufficient quota, a bad body, …) or
a failure (every channel failed, a timeout, an upstream answer passed through); none for a call already
charged (it has its consume log) or one its client abandoned. `ErrorLogEnabled` turns them off.

The row (a `LogEntry`, core/log_entry.py, handed over as its `row()`) is the consume log's, with `content`
the message the caller got (an upstream's already redacted of the channel's keys; never the caller's key)
and `other` {status_code, error_code, channels_tried, request_path, route}; the channel is the last one
tried (0: none). The bounds — per key, buffer size, message length — are the buffer's
(server/logs/error_logs.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, Protocol

from core.enums import LogType
from core.log_entry import LogEntry
from core.settings import Settings
from server.relay.call import Call
from server.relay.errors import code_of
from server.web.errors import to_tollway_error

log = logging.getLogger("tollway.relay")


class ErrorLogSink(Protocol):
    def add(self, row: Mapping[str, Any]) -> bool:
        """Keep a log row for the next write, unless a bound refuses it; whether it was kept."""


def error_row(call: Call, ended: BaseException, now: int) -> LogEntry | None:
    """The error log of a call that ended with `ended`, or None when it gets none."""
    caller = call.caller
    if caller is None or call.settled or not isinstance(ended, Exception):  # a cancellation is no error
        return None
    err = to_tollway_error(ended)  # what the caller was answered
    asked, op, last = call.asked, call.op, call.last
    model = asked.model if asked is not None else ""
    if not model and op is not None:  # the body was not read: the model its path names, if any (Gemini)
        model = op.model or ""
    tried = list(call.tried)
    return LogEntry(
        type=LogType.ERROR, created_at=now, user_id=caller.user.id, username=caller.user.username,
        token_id=caller.key.id, token_name=caller.key.name, model_name=model,
        channel=last.id if last is not None else 0, content=err.message,
        request_id=call.incoming.request_id, is_stream=asked is not None and asked.stream,
        group=call.group or caller.group,
        use_time=int(time.monotonic() - call.started) if call.started else 0,
        ip=call.incoming.client_ip if caller.user.record_ip_log else "",
        other={"status_code": err.status, "error_code": code_of(err), "channels_tried": tried,
               "request_path": call.incoming.path, "route": call.route.name,
               "admin_info": {"use_channel": tried}},
    )


def record(sink: ErrorLogSink, settings: Settings, call: Call, ended: BaseException, now: int) -> None:
    """Hand the call's error log to `sink` when `ErrorLogEnabled` is on; never raises (the caller's answer
    is the error, whatever happens here)."""
    if not settings.error_log_enabled:
        return
    try:
        entry = error_row(call, ended, now)
        if entry is not None:
            sink.add(entry.row())
    except Exception:
        log.exception("could not build the error log of request %s", call.incoming.request_id)
