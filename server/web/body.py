"""JSON request bodies and typed field reading.

A body that is not a JSON object, or a field of the wrong type, is a 400 naming the field; so is any
string, anywhere in the body, that is not storable text (a lone surrogate, NUL: see `server.web.text`), so
no handler ever sees one. Unknown fields are ignored. Booleans are never accepted as integers. Text is
trimmed only where the caller asks (names, e-mails, keywords) — never passwords, codes, keys or tokens.
"""

from __future__ import annotations

import json
from typing import Any

from sanic import Request

from server.errors import BadRequest
from server.web.text import first_bad_text, text_problem

_MISSING: Any = object()
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


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


class Fields:
    """Typed access to a JSON object; each reader raises `BadRequest` naming the field."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    @classmethod
    def of(cls, request: Request) -> Fields:
        return cls(json_object(request))

    def present(self, name: str) -> bool:
        return name in self.data and self.data[name] is not None

    def string(self, name: str, *, required: bool = False, default: Any = None, trim: bool = False,
            min_len: int = 0, max_len: int | None = None, label: str | None = None) -> Any:
        label = label or name
        value = self.data.get(name, _MISSING)
        if value is _MISSING or value is None:
            if required:
                raise BadRequest(f"{label}: is required")
            return default
        if not isinstance(value, str):
            raise BadRequest(f"{label}: must be a string")
        if trim:
            value = value.strip()
        if required and value == "" and min_len > 0:
            raise BadRequest(f"{label}: is required")
        n = len(value)
        if n < min_len or (max_len is not None and n > max_len):
            bound = f"{min_len}–{max_len}" if max_len is not None else f"at least {min_len}"
            raise BadRequest(f"{label}: must be {bound} characters")
        return value

    def integer(self, name: str, *, required: bool = False, default: Any = None, min_value: int | None = None,
            max_value: int | None = None, label: str | None = None) -> Any:
        label = label or name
        value = self.data.get(name, _MISSING)
        if value is _MISSING or value is None:
            if required:
                raise BadRequest(f"{label}: is required")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise BadRequest(f"{label}: must be an integer")
        if not INT64_MIN <= value <= INT64_MAX:  # nothing stored anywhere is wider than BIGINT
            raise BadRequest(f"{label}: is out of range")
        if min_value is not None and value < min_value:
            raise BadRequest(f"{label}: must be at least {min_value}")
        if max_value is not None and value > max_value:
            raise BadRequest(f"{label}: must be at most {max_value}")
        return value

    def boolean(self, name: str, *, required: bool = False, default: Any = None) -> Any:
        value = self.data.get(name, _MISSING)
        if value is _MISSING or value is None:
            if required:
                raise BadRequest(f"{name}: is required")
            return default
        if not isinstance(value, bool):
            raise BadRequest(f"{name}: must be a boolean")
        return value


def path_id(raw: str, name: str = "id") -> int:
    """A positive integer path parameter; anything else is a 400 (not Sanic's 404)."""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18 or int(raw) < 1:
        raise BadRequest(f"{name}: must be a positive integer")
    return int(raw)


def query_str(request: Request, name: str, *, trim: bool = True, max_len: int = 255) -> str:
    value = request.args.get(name, "") or ""
    value = value.strip() if trim else value
    if len(value) > max_len:
        raise BadRequest(f"{name}: must be at most {max_len} characters")
    problem = text_problem(value)
    if problem is not None:
        raise BadRequest(f"{name}: {problem}")
    return value
