"""JSON request bodies: the one parse of a body before its schema validates it (server/web/routing.py).

A route that reads a body (`route(..., body=…)`) reads it only when it is labelled JSON: `Content-Type:
application/json` or `application/<x>+json` (`application/merge-patch+json`), parameters allowed
(`; charset=utf-8`), case ignored. Any other body — `text/plain`, a form, no label at all — is a 415
naming what was sent, before a byte of it is parsed. That keeps a page of another site from posting a
form to a JSON route: a browser sends `text/plain`, `application/x-www-form-urlencoded` and
`multipart/form-data` (or a body with no label) cross-site without asking, but never `application/json`
(login CSRF, docs/SECURITY.md; the guard's cross-site refusal, server/auth/origin.py, covers the routes
that read no body). A request without a body needs no label: a route that requires one answers its 400.

The model-call routes (`passthrough`) never come here: they are authenticated by an API key, never by a
cookie a page could ride, and their provider reads the body whatever its label (server/upstream/). Nor
does the payment webhook, verified as raw bytes against its signature.

A body that is not a JSON object is a 400; so is any string, anywhere in the body, that is not storable
text (a lone surrogate, NUL: see `server.web.text`), named by its field, so no handler ever sees one. The
fields themselves are checked by the route's schema (server/web/schema.py).
"""

from __future__ import annotations

import json
import re
from typing import Any

from sanic import Request

from server.errors import BadRequest, UnsupportedMediaType
from server.web.text import first_bad_text

# the part of a `+json` subtype before the suffix (RFC 6838's restricted-name, lower-cased)
_SUBTYPE_PREFIX = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,120}")
_SHOWN = 100  # characters of an unaccepted label that the 415 repeats


def is_json_media_type(content_type: str) -> bool:
    """Whether a `Content-Type` value labels JSON: `application/json` or `application/<x>+json`, with any
    parameters, in any case."""
    media = content_type.split(";", 1)[0].strip().lower()
    kind, slash, subtype = media.partition("/")
    if not slash or kind != "application":
        return False
    if subtype == "json":
        return True
    return subtype.endswith("+json") and _SUBTYPE_PREFIX.fullmatch(subtype[:-5]) is not None


def require_json_label(content_type: str | None) -> None:
    """A 415 naming the label unless it is JSON's (see the module docstring)."""
    if content_type is not None and is_json_media_type(content_type):
        return
    if content_type is None or not content_type.strip():
        raise UnsupportedMediaType("Content-Type: missing; send the body as application/json")
    media = content_type.split(";", 1)[0].strip()[:_SHOWN]
    shown = "".join(c if c.isprintable() else "?" for c in media) or "(empty)"
    raise UnsupportedMediaType(f"Content-Type: {shown} is not accepted; send the body as application/json")


def json_object(request: Request) -> dict[str, Any]:
    raw = request.body
    if not raw:
        raise BadRequest("request body must be a JSON object")
    require_json_label(request.headers.get("content-type"))
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
