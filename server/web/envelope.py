"""The success envelope `{"success": true, "message": "", "data": …}`.

`data` may hold reply models (`server.web.schema.Reply`) anywhere: one model, a list of them, the page
payload (`Page.payload(items, total)`) or any dict or list around them. The whole body is written in one
pass by pydantic's JSON serializer: a model under its field names (as `model_dump(mode="json",
by_alias=True)` would give them), plain values (numbers, text, booleans, null, lists, dicts, enum
members) as themselves — the same JSON values Sanic's encoder wrote before replies were models, in
about half its time.

A few routes answer a field next to `data` too, because new-api's clients read it there (the channel
test's `time`, a balance's `balance`): `extra` adds them; it never replaces `success`, `message` or
`data`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic_core import to_json
from sanic.response import HTTPResponse

JSON = "application/json"


def ok(data: Any = None, message: str = "", *, status: int = 200,
       headers: dict[str, str] | None = None, extra: Mapping[str, Any] | None = None) -> HTTPResponse:
    body: dict[str, Any] = {"success": True, "message": message}
    body.update({k: v for k, v in (extra or {}).items() if k not in ("success", "message", "data")})
    body["data"] = data
    return HTTPResponse(to_json(body, by_alias=True), status=status, headers=headers, content_type=JSON)
