"""The checks every model-call body gets, whatever its provider (docs/api/gateway.md#gateway-admission-order,
step 7): it is a JSON object, and no string in it is anything but Unicode text; a model name is an identifier.

A string anywhere in the body that is not Unicode text (a lone surrogate escape such as `"\\ud800"`) is
refused once, here, before anything reads it; NUL and other control characters are refused only in the
model name (it is stored in the logs and echoed in messages; prompt text is the caller's business and is
forwarded as sent). What each provider's body must hold is checked by the provider
(`server/upstream/providers/`). Every refusal is a 400 whose message names the field.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from server.errors import InvalidRequest
from server.web.text import first_bad_text


def invalid(message: str, param: str | None = None) -> InvalidRequest:
    return InvalidRequest(message, param=param)


# Where a lone surrogate could come from in a UTF-8 body: a `\uD800`–`\uDFFF` escape, or the bytes of an
# encoded surrogate (json.loads decodes bytes with "surrogatepass"). A body with neither — nearly every
# one — skips the walk over the parsed value; a body in another encoding (BOM, NULs up front) is walked.
_MAY_HOLD_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")


def _may_hold_surrogate(body: bytes) -> bool:
    head = body[:4]
    return (b"\x00" in head or head.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff"))
            or _MAY_HOLD_SURROGATE.search(body) is not None)


def parse_object(body: bytes) -> dict[str, Any]:
    if not body:
        raise invalid("request body must be a JSON object")
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise invalid("request body is not valid JSON") from None
    if not isinstance(value, dict):
        raise invalid("request body must be a JSON object")
    bad = first_bad_text(value, nul=False) if _may_hold_surrogate(body) else None
    if bad is not None:
        field, problem = bad
        top = None if field == "request body" else field.split(".")[0].split("[")[0]
        raise invalid(f"{field}: {problem}", top)
    return value


MODEL_NAME_MAX = 255


def check_model_name(model: str, label: str = "model") -> str:
    """A model name is an identifier: no control or format characters, at most 255 characters (it is
    stored in the logs and echoed in error messages)."""
    if len(model) > MODEL_NAME_MAX or any(unicodedata.category(c) in ("Cc", "Cf", "Cs") for c in model):
        raise invalid(f"{label}: must be at most {MODEL_NAME_MAX} characters without control characters",
                      label)
    return model


def required_messages(data: dict[str, Any]) -> list[Any]:
    """The body's `messages`: a non-empty array (each entry is checked by the route; a 400 naming
    `messages` otherwise)."""
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid("messages: must be a non-empty array of objects", "messages")
    return messages


def required_model(data: dict[str, Any]) -> str:
    """The body's `model`: a non-empty string that is a model name (a 400 naming `model` otherwise)."""
    model = data.get("model")
    if not isinstance(model, str) or not model.strip():
        raise invalid("model: must be a non-empty string", "model")
    return check_model_name(model)
