"""The success envelope `{"success": true, "message": "", "data": …}`.

A few routes answer a field next to `data` too, because new-api's clients read it there (the channel
test's `time`, a balance's `balance`): `extra` adds them; it never replaces `success`, `message` or
`data`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sanic.response import HTTPResponse, json


def ok(data: Any = None, message: str = "", *, status: int = 200,
       headers: dict[str, str] | None = None, extra: Mapping[str, Any] | None = None) -> HTTPResponse:
    body: dict[str, Any] = {"success": True, "message": message}
    body.update({k: v for k, v in (extra or {}).items() if k not in ("success", "message", "data")})
    body["data"] = data
    return json(body, status=status, headers=headers)
