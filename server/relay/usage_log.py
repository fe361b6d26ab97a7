"""What a settled model call is charged on and the consume log it writes (type 2, docs/api/logs.md#logs).

`Relay._settle` (server/relay/pipeline.py) charges the usage — the upstream's, else Tollway's count marked
estimated (`streamed_usage` for a stream) — and hands the quota engine the consume log built here as a
`LogEntry` (core/log_entry.py), which the settlement carries to the quota sync with the counters. Its
`other` records the price's ratios, the token counts by kind, the channels tried, the route and path, the
model mapping and conversion, whether the usage is estimated or the stream was cut, and the time to the
first byte of a stream.
"""

from __future__ import annotations

import time
from typing import Any

from core.enums import LogType
from core.log_entry import LogEntry
from server.components.pricing import Price
from server.relay.call import Call
from server.relay.caller import Caller
from server.upstream.estimate import count_all
from server.upstream.formats.base import StreamMapper
from server.upstream.providers.base import Usage


def streamed_usage(mapper: StreamMapper, prompt_estimate: int, interrupted: bool) -> Usage:
    """What a stream is charged on (docs/CHAT.md#missing-usage-and-cut-streams): the upstream's last
    cumulative usage; where a count is missing, the prompt estimate and Tollway's count of the content
    delivered (`estimated`). A cut stream that delivered no content is charged only the input the
    upstream reported (0 if none)."""
    reported = mapper.usage
    if reported is not None and (reported.output or not interrupted):
        return reported
    output = count_all(["".join(mapper.delivered())])  # the pieces of one text, counted as one
    if interrupted and not output:
        return Usage(reported.input, 0, reported.cache_read, reported.cache_write_5m,
                     reported.cache_write_1h) if reported is not None else Usage(0, 0)
    if reported is not None:  # the input reported, the output counted
        return Usage(reported.input, output, reported.cache_read, reported.cache_write_5m,
                     reported.cache_write_1h, estimated=True)
    return Usage(prompt_estimate, output, estimated=True)


def consume_other(call: Call, price: Price, usage: Usage, *, interrupted: bool,
                  first_byte_ms: int | None) -> dict[str, Any]:
    """The consume log's `other`: the price's ratios and what the call was, beyond the columns."""
    tried = call.tried
    other: dict[str, Any] = {
        **price.other(), "channels_tried": list(tried),
        "audio_output_tokens": usage.audio_output, "text_output_tokens": usage.text_output,
        "cache_read_tokens": usage.cache_read, "cache_write_tokens": usage.cache_write,
        "cache_tokens": usage.cache_read, "cache_creation_tokens": usage.cache_write,
        "usage_estimated": usage.estimated, "route": call.route.name,
        "stream_interrupted": interrupted, "is_model_mapped": call.upstream_model != call.model,
        "upstream_model_name": call.upstream_model, "request_path": call.incoming.path,
        "admin_info": {"use_channel": list(tried)},
    }
    if usage.cache_write_1h:
        other["cache_write_1h_tokens"] = usage.cache_write_1h
    conversion = call.exchange.conversion if call.exchange is not None else None
    if conversion is not None:
        other["converted_from"], other["converted_to"] = conversion
    if first_byte_ms is not None:
        other["frt"] = first_byte_ms
    return other


def consume_log(call: Call, caller: Caller, price: Price, usage: Usage, cost: int, now: int, *, stream: bool,
                interrupted: bool, first_byte_ms: int | None) -> LogEntry:
    """The consume log of a call charged `cost` for `usage` at `now` (unix seconds)."""
    model = call.model
    return LogEntry(
        type=LogType.CONSUME, created_at=now, username=caller.user.username, token_name=caller.key.name,
        model_name=model, prompt_tokens=usage.prompt, completion_tokens=usage.output,
        use_time=int(time.monotonic() - call.started), is_stream=stream, group=call.group,
        request_id=call.incoming.request_id, quota=cost,
        other=consume_other(call, price, usage, interrupted=interrupted, first_byte_ms=first_byte_ms),
        ip=call.incoming.client_ip if caller.user.record_ip_log else "",
        content=f"{model}: {usage.prompt} prompt + {usage.output} completion tokens",
    )
