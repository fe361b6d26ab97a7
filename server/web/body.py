"""JSON request bodies: the one parse of a body before its schema validates it (server/web/routing.py).

A body that is not a JSON object is a 400; so is any string, anywhere in the body, that is not storable
text (a lone surrogate, NUL: see `server.web.text`), named by its field, so no handler ever sees one. The
fields themselves are checked by the route's schema (server/web/schema.py).
"""

from __future__ import annotations

import json
from typing import Any

from sanic import Request

from server.errors import BadRequest
from server.web.text import first_bad_text


def json_object(request: Request) -> dict[str, Any]:
    raw = request.body
    if not raw:
        raise BadRequest("request body must be a JSON object")
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("request body is not valid JSON") from None
    except RecursionError:
        raise BadRequest("request body is nested too deeply") from None
    if not isinstance(value, dict):
        raise BadRequest("request body must be a JSON object")
    bad = first_bad_text(value)
    if bad is not None:
        raise BadRequest(f"{bad[0]}: {bad[1]}")
    return value


def has_control_chars(value: str) -> bool:
    return any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in value)
