"""Errors of the model-call routes and their two wire shapes (docs/API.md#gateway-errors).

    TollwayError (server.errors)
     └── GatewayError           one refusal of the gateway: HTTP status + `code` (+ `param`, extra headers)
          └── UpstreamPassthrough   a non-retried upstream 4xx, answered with the upstream's body

OpenAI routes answer `{"error": {"message", "type", "param", "code"}}`; Gemini routes answer
`{"error": {"code", "message", "status", "details": [ErrorInfo]}}`. Every message the gateway writes ends
with `(request id: X)`. Any other error of the tree (a 503 when Redis is down, Sanic's 413) is shaped the
same way, by the route family of the path (`shape_for`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sanic import Request
from sanic.response import HTTPResponse, raw

from server.errors import TollwayError

GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                 409: "ABORTED", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                 501: "UNIMPLEMENTED", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
DEFAULT_CODE = {400: "invalid_request", 401: "invalid_api_key", 403: "permission_denied", 404: "not_found",
                405: "method_not_allowed", 413: "request_too_large", 429: "rate_limit_exceeded",
                503: "service_unavailable"}


class GatewayError(TollwayError):
    def __init__(self, status: int, code: str, message: str, *, param: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message, code=code)
        self.status = status
        self.param = param
        self._headers = headers or {}

    def headers(self) -> dict[str, str]:
        return dict(self._headers)


class UpstreamPassthrough(GatewayError):
    """An upstream 4xx that is not retried: its status (after `status_code_mapping`) and body.

    `body` and `message` must already be redacted (`server.redaction.redact` with the channel's keys):
    they reach the caller. None of the upstream's headers is kept: the reply has our headers only."""

    def __init__(self, status: int, body: bytes, content_type: str, message: str) -> None:
        super().__init__(status, "upstream_error", message)
        self.body = body
        self.content_type = content_type


def google_status(status: int) -> str:
    if status in GOOGLE_STATUS:
        return GOOGLE_STATUS[status]
    return "INTERNAL" if status >= 500 else "INVALID_ARGUMENT"


def openai_type(status: int, code: str) -> str:
    if status == 401:
        return "authentication_error"
    if status == 403:
        return "permission_error"
    if status == 429:
        return "insufficient_quota" if code == "insufficient_quota" else "rate_limit_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def _code(err: TollwayError) -> str:
    if err.code:
        return err.code
    return DEFAULT_CODE.get(err.status, "internal_error" if err.status >= 500 else "invalid_request")


def _with_id(message: str, request_id: str) -> str:
    return f"{message} (request id: {request_id})"


def _headers(err: TollwayError, request_id: str) -> dict[str, str]:
    headers = err.headers()
    headers["X-Request-Id"] = request_id
    return headers


def openai_error(err: TollwayError, request_id: str) -> HTTPResponse:
    if isinstance(err, UpstreamPassthrough) and _is_openai_error(err.body):
        return raw(err.body, status=err.status, content_type="application/json",
                   headers=_headers(err, request_id))
    code = _code(err)
    body = {"error": {"message": _with_id(err.message, request_id), "type": openai_type(err.status, code),
                      "param": getattr(err, "param", None), "code": code}}
    if isinstance(err, UpstreamPassthrough):
        body["error"].update(type="upstream_error", code=str(err.status))
    return _json(body, err.status, _headers(err, request_id))


def google_error(err: TollwayError, request_id: str) -> HTTPResponse:
    if isinstance(err, UpstreamPassthrough) and _is_google_error(err.body):
        return raw(err.body, status=err.status, content_type="application/json",
                   headers=_headers(err, request_id))
    code = _code(err)
    body = {"error": {"code": err.status, "message": _with_id(err.message, request_id),
                      "status": google_status(err.status),
                      "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                   "reason": code, "domain": "tollway"}]}}
    return _json(body, err.status, _headers(err, request_id))


def google_error_payload(status: int, message: str, request_id: str) -> bytes:
    """The error object sent as the last event of a stream that failed after its first byte."""
    return json.dumps({"error": {"code": status, "message": _with_id(message, request_id),
                                 "status": google_status(status)}}).encode()


def _json(body: dict[str, Any], status: int, headers: dict[str, str]) -> HTTPResponse:
    return raw(json.dumps(body, ensure_ascii=False).encode(), status=status, content_type="application/json",
               headers=headers)


def _error_object(body: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    error = value.get("error") if isinstance(value, dict) else None
    return error if isinstance(error, dict) else None


def _is_google_error(body: bytes) -> bool:
    error = _error_object(body)
    if error is None:
        return False
    code = error.get("code")
    return (isinstance(code, int) and not isinstance(code, bool) and isinstance(error.get("status"), str)
            and isinstance(error.get("message"), str))


def _is_openai_error(body: bytes) -> bool:
    error = _error_object(body)
    return error is not None and isinstance(error.get("message"), str)


def upstream_message(body: bytes) -> str:
    """The upstream's own message (`error.message` or `message`), else the first 512 characters."""
    error = _error_object(body)
    if error is not None and isinstance(error.get("message"), str):
        return str(error["message"])
    try:
        value = json.loads(body)
        if isinstance(value, dict) and isinstance(value.get("message"), str):
            return str(value["message"])
    except (ValueError, UnicodeDecodeError):
        pass
    return body[:512].decode("utf-8", "replace")


def is_gemini_path(path: str) -> bool:
    return path.startswith("/v1beta/") or (path.startswith("/v1/models/") and ":" in path)


Shape = Callable[[TollwayError, str], HTTPResponse]


def shape_for(request: Request) -> Shape | None:
    """The error shape of the route family of this path; None for `/api` (the envelope)."""
    path = request.path
    if is_gemini_path(path):
        return google_error
    if path.startswith("/v1/"):
        return openai_error
    return None
