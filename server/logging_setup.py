"""The process's log lines: `LOG_FORMAT=text` (the default: `time level logger: message`) or `json`, one
JSON object per line — `time` (ISO 8601, UTC), `level`, `logger`, `message`, and `request_id` when the
line was written while a request was handled — through the standard `logging` module (`JsonFormatter`).
The message is redacted as every line is (`server.redaction.redact`); an exception's traceback is the
`exception` field, redacted too.
"""

from __future__ import annotations

import contextvars
import json
import logging
from datetime import UTC, datetime

from server.redaction import redact

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("tollway_request_id", default=None)
"""The id of the request being handled (set by the guard's `identify`), for the log lines it writes."""


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        rid = request_id.get()
        if rid is not None:
            line["request_id"] = rid
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(line, ensure_ascii=False)


def configure(level: str, log_format: str) -> None:
    """Set up the root logger (and Sanic's, which keeps handlers of its own) for this process."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if log_format == "json":
        for name in ("sanic.root", "sanic.error", "sanic.access", "sanic.server", "sanic.websockets"):
            logger = logging.getLogger(name)
            logger.handlers[:] = []
            logger.propagate = True
