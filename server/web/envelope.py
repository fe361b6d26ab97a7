"""The success envelope `{"success": true, "message": "", "data": …}` and the page payload."""

from __future__ import annotations

from typing import Any

from sanic.response import HTTPResponse, json


def ok(data: Any = None, message: str = "", *, status: int = 200,
       headers: dict[str, str] | None = None) -> HTTPResponse:
    return json({"success": True, "message": message, "data": data}, status=status, headers=headers)
