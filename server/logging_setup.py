"""The process's log lines: `LOG_FORMAT=text` (the default: `time level logger: message`) or `json`, one
JSON object per line, through the standard `logging` module (`JsonFormatter`).

A JSON line always has `time` (ISO 8601, UTC), `level`, `logger`, `message` and `request_id` (null outside
a request), and `user_id` once the request's caller is known (a login's user, an API key's owner). The
access log (`ACCESS_LOG=true`: one line per request answered, `access_line`, logger `tollway.access`) adds
`method`, `route` (the route's template, never the raw path, whose query may hold a key), `status`,
`duration_ms` and `client_ip`. The message is redacted as every line is (`server.redaction.redact`); an
exception's traceback is the `exception` field, redacted too.

The request's fields live in context variables: a request runs in its connection's task, so they are set
where the request learns them (`Guard.identify`, `Guard.check_access`, the relay's `authenticate`) and
reset when the next request on the connection begins (`begin_request`, server/web/connections.py).
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from server.redaction import redact

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
ACCESS_LOGGER = "tollway.access"

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("tollway_request_id", default=None)
"""The id of the request being handled (set by the guard's `identify`), for the lines it writes."""

user_id: contextvars.ContextVar[int | None] = contextvars.ContextVar("tollway_user_id", default=None)
"""The id of the user the request acts for, once known (a session or token's user, an API key's owner)."""

access = logging.getLogger(ACCESS_LOGGER)


def begin_request() -> None:
    """A request begins on this connection: forget the previous request's id and user."""
    request_id.set(None)
    user_id.set(None)


@dataclass(frozen=True, slots=True)
class AccessFields:
    """What an access line says about one request answered."""

    method: str
    route: str
    status: int
    duration_ms: float
    client_ip: str | None


def access_line(fields: AccessFields) -> None:
    """Write the access line of one request (call it only with `ACCESS_LOG` on)."""
    user = user_id.get()
    access.info("%s %s %s %d %.1f ms%s", fields.client_ip or "-", fields.method, fields.route, fields.status,
                fields.duration_ms, "" if user is None else f" user {user}", extra={"tollway_access": fields})


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
            "request_id": request_id.get(),
        }
        user = user_id.get()
        if user is not None:
            line["user_id"] = user
        fields: AccessFields | None = getattr(record, "tollway_access", None)
        if fields is not None:
            line.update(asdict(fields))
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(line, ensure_ascii=False)


def announce(log_format: str, message: str, *, error: bool = False) -> None:
    """A line for the operator outside `logging`: start-up news on stdout (`listening on …`), or with
    `error` the one line that ends a failed start on stderr — as it is, or as a JSON log line."""
    if log_format == "json":
        record = logging.LogRecord("tollway", logging.ERROR if error else logging.INFO, __file__, 0, message,
                                   None, None)
        message = JsonFormatter().format(record)
    print(message, file=sys.stderr if error else sys.stdout, flush=True)


def configure(level: str, log_format: str) -> None:
    """Set up the root logger (and Sanic's, which keeps handlers of its own) for this process."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    access.setLevel(logging.INFO)  # the access log is asked for by ACCESS_LOG, whatever LOG_LEVEL says
    if log_format == "json":
        for name in ("sanic.root", "sanic.error", "sanic.access", "sanic.server", "sanic.websockets"):
            logger = logging.getLogger(name)
            logger.handlers[:] = []
            logger.propagate = True
