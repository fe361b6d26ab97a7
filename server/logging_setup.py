"""The process's log lines: `LOG_FORMAT=text` (the default: `time level logger: message`) or `json`, one
JSON object per line, through the standard `logging` module (`JsonFormatter`).

A JSON line always has `time` (ISO 8601, UTC), `level`, `logger`, `message` and `request_id` (null outside
a request), and `user_id` once the request's caller is known (a login's user, an API key's owner). The
access log (`ACCESS_LOG=true`: one line per request answered, `access_line`, logger `tollway.access`) adds
`method`, `route` (the route's template, never the raw path, whose query may hold a key), `status`,
`duration_ms` and `client_ip`. An exception's traceback is the `exception` field.

Both formats write what they are given through the same two filters, because a message may quote what a
client or an upstream said (a provider's error text in an auto-disable reason, a transport's words):

- redaction (`server.redaction.redact`) of the message and of a traceback: a key quoted there is
  `[redacted]` in either format;
- one record, one line: in a text line every control character and line separator of the message is
  escaped (`\\n`, `\\r`, `\\x1b`, `\\u2028`), and a traceback follows on lines indented by two spaces,
  so a line that starts at the first column is always the start of a record and no text can forge one
  (or drive the terminal); a JSON line escapes the same characters inside its strings — also the ones
  JSON allows raw (U+0085, U+2028, U+2029), which line readers such as Python's `splitlines` take for
  line breaks.

Sanic's own lines are formatted the same way: with JSON they go through the root's handler (stderr); in
text, Sanic's handlers keep their streams (its news, `Worker ready`, on stdout) and take `TextFormatter`.

The request's fields live in context variables: a request runs in its connection's task, so they are set
where the request learns them (`Guard.identify`, `Guard.check_access`, the relay's `authenticate`) and
reset when the next request on the connection begins (`begin_request`, server/web/connections.py).
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from server.redaction import redact

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
ACCESS_LOGGER = "tollway.access"
SANIC_LOGGERS = ("sanic.root", "sanic.error", "sanic.access", "sanic.server", "sanic.websockets")
TRACEBACK_INDENT = "  "
"""What each line of a traceback starts with in a text record: only a record's first line starts at the
first column."""

# control characters (C0, DEL, C1 — U+0085 among them) and the two Unicode line separators
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# what `json.dumps` leaves raw of those: inside a JSON string they may be escaped as \uXXXX
_JSON_UNSAFE = re.compile(r"[\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

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


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def one_line(text: str) -> str:
    """`text` with every control character and line separator escaped (`\\n`, `\\x1b`, `\\u2028`)."""
    return _UNSAFE.sub(_escape, text)


class TextFormatter(logging.Formatter):
    """`time level logger: message`, the message redacted and on one line; a traceback (or stack) redacted
    and indented under it."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        record.message = one_line(redact(record.getMessage()))
        record.asctime = self.formatTime(record, self.datefmt)
        line = self.formatMessage(record)
        blocks: list[str] = []
        if record.exc_info:
            blocks.append(self.formatException(record.exc_info))
        elif record.exc_text:
            blocks.append(record.exc_text)
        if record.stack_info:
            blocks.append(self.formatStack(record.stack_info))
        for block in blocks:
            line += "".join(f"\n{TRACEBACK_INDENT}{one_line(part)}" for part in redact(block).splitlines())
        return line


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
        return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", json.dumps(line, ensure_ascii=False))


def announce(log_format: str, message: str, *, error: bool = False) -> None:
    """A line for the operator outside `logging`: start-up news on stdout (`listening on …`), or with
    `error` the one line that ends a failed start on stderr — as a plain line or as a JSON log line, either
    way redacted and escaped as a log record is."""
    if log_format == "json":
        record = logging.LogRecord("tollway", logging.ERROR if error else logging.INFO, __file__, 0, message,
                                   None, None)
        message = JsonFormatter().format(record)
    else:
        message = one_line(redact(message))
    print(message, file=sys.stderr if error else sys.stdout, flush=True)


def configure(level: str, log_format: str) -> None:
    """Set up the root logger (and Sanic's, which keeps handlers of its own) for this process."""
    formatter = JsonFormatter() if log_format == "json" else TextFormatter()
    handler = logging.StreamHandler()
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    access.setLevel(logging.INFO)  # the access log is asked for by ACCESS_LOG, whatever LOG_LEVEL says
    for name in SANIC_LOGGERS:  # redacted and escaped as every line is
        logger = logging.getLogger(name)
        if log_format == "json":
            logger.handlers[:] = []
            logger.propagate = True
        else:
            for own in logger.handlers:
                own.setFormatter(formatter)
