"""Anthropic (channel type 14) as the gateway speaks it: the caller's key, our error objects, the model
list, and how an admin reaches a channel of this type (docs/CHAT.md#anthropic-messages). What a Messages
body holds and how a channel serves it are `server/upstream/formats/anthropic_messages.py`'s.

    caller   x-api-key: <key>, else Authorization: [Bearer ]<key> (the anthropic SDK 2.x sends Bearer)
    upstream {base}/v1/...      x-api-key: <channel key>, anthropic-version
    errors   {"type": "error", "error": {"type", "message", "details": {"error_code"}}, "request_id"}
    models   GET {base}/v1/models, paged by `after_id` while `has_more`
    balance  none (Anthropic publishes no balance endpoint)

A refusal's HTTP status is the one Anthropic's SDK reads for it: a reservation larger than the balance is
a 402 `billing_error` here (OpenAI's wire says 429 `insufficient_quota`); every other status is the
refusal's own.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from core.enums import ChannelType
from server.upstream.providers.base import (
    BalanceQuery,
    ChannelTarget,
    ListedModel,
    ModelPage,
    Params,
    TestOutcome,
    UnreadableReply,
    UpstreamCall,
    UpstreamError,
    base_of,
    bearer,
    json_object,
    message_of,
    passed,
    upstream_headers,
)

DEFAULT_BASE = "https://api.anthropic.com"
DEFAULT_VERSION = "2023-06-01"
"""The `anthropic-version` sent when the caller sent none (and by admin calls)."""
TEST_INPUT = "hello"
PAGE_SIZE = 1000  # the largest page Anthropic's model list serves
TYPES = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
         403: "permission_error", 404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
         504: "timeout_error", 529: "overloaded_error"}
UPSTREAM_TYPES = {404: "not_found_error", 413: "request_too_large"}
"""A reshaped upstream 4xx: these by status, any other 4xx `invalid_request_error`."""
STATUS_OF_CODE = {"insufficient_quota": 402}
"""Refusals whose status on this wire is not the refusal's own (by our `code`)."""
_REQUEST_ID = re.compile(r"\(request id: ([^()\s]*)\)$")


def error_type(status: int) -> str:
    if status in TYPES:
        return TYPES[status]
    return "api_error" if status >= 500 else "invalid_request_error"


def anthropic_headers(channel: ChannelTarget, key: str, version: str = DEFAULT_VERSION,
                      beta: str | None = None, *, stream: bool = False) -> dict[str, str]:
    """JSON headers, the channel's override, then the key and the API version (and beta flags if any)."""
    auth = {"x-api-key": key, "anthropic-version": version}
    if beta:
        auth["anthropic-beta"] = beta
    return upstream_headers(channel, auth, "text/event-stream" if stream else "application/json")


def rfc3339(seconds: int) -> str:
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class Anthropic:
    channel_type = ChannelType.ANTHROPIC
    channel_types: frozenset[int] = frozenset({ChannelType.ANTHROPIC})
    owned_by = "anthropic"
    default_base = DEFAULT_BASE
    # the anthropic SDK reads `request-id`
    request_id_headers: tuple[str, ...] = ("X-Request-Id", "request-id")

    # ---- the caller's request -------------------------------------------------------------------------

    def caller_key(self, headers: Params, args: Params) -> str:
        key = headers.get("x-api-key")
        if key:
            return str(key).strip()
        return bearer(headers.get("authorization") or "")

    # ---- our answers in this wire ---------------------------------------------------------------------

    def refusal_status(self, status: int, code: str) -> int:
        return STATUS_OF_CODE.get(code, status)

    def error_body(self, status: int, code: str, message: str, param: str | None, *, upstream: bool
                   ) -> bytes:
        """The request id is the one our message ends with (`(request id: X)`, every message we write)."""
        if upstream:
            kind = UPSTREAM_TYPES.get(status, "invalid_request_error") if status < 500 else "api_error"
            code = "upstream_error"
        else:
            kind = error_type(status)
        found = _REQUEST_ID.search(message)
        body = {"type": "error", "error": {"type": kind, "message": message, "details": {"error_code": code}},
                "request_id": found.group(1) if found is not None else None}
        return json.dumps(body, ensure_ascii=False).encode()

    def is_error_body(self, body: bytes) -> bool:
        try:
            value = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return False
        error = value.get("error") if isinstance(value, dict) else None
        return (isinstance(value, dict) and value.get("type") == "error" and isinstance(error, dict)
                and isinstance(error.get("type"), str) and isinstance(error.get("message"), str))

    def stream_error(self, status: int, message: str) -> bytes:
        return json.dumps({"type": "error", "error": {"type": error_type(status), "message": message}},
                          ensure_ascii=False).encode()

    def model_list(self, models: Sequence[ListedModel]) -> dict[str, Any]:
        data = [{"type": "model", "id": m.id, "display_name": m.id, "created_at": rfc3339(m.created)}
                for m in models]
        return {"data": data, "has_more": False, "first_id": models[0].id if models else None,
                "last_id": models[-1].id if models else None}

    # ---- channel administration -----------------------------------------------------------------------

    def models_call(self, channel: ChannelTarget, key: str, page: str | None = None) -> UpstreamCall:
        url = f"{base_of(channel, DEFAULT_BASE)}/v1/models?limit={PAGE_SIZE}"
        if page:
            url += f"&after_id={quote(page, safe='')}"
        return UpstreamCall("GET", url, anthropic_headers(channel, key), b"")

    def read_models(self, body: bytes) -> ModelPage:
        data = json_object(body)
        models = data.get("data")
        if not isinstance(models, list):
            raise UnreadableReply("data: must be an array")
        ids = [str(m["id"]) for m in models if isinstance(m, dict) and isinstance(m.get("id"), str)]
        last = data.get("last_id")
        more = data.get("has_more") is True and isinstance(last, str) and last
        return ModelPage(ids, last if more and isinstance(last, str) else None)

    def test_call(self, channel: ChannelTarget, key: str, model: str, capabilities: Mapping[str, bool]
                  ) -> UpstreamCall:
        """A message of one output token."""
        body = {"model": model, "max_tokens": 1, "messages": [{"role": "user", "content": TEST_INPUT}]}
        return UpstreamCall("POST", f"{base_of(channel, DEFAULT_BASE)}/v1/messages",
                            anthropic_headers(channel, key), json.dumps(body).encode())

    def test_outcome(self, status: int, body: bytes) -> TestOutcome:
        return passed(status, body)

    def upstream_error(self, status: int, body: bytes) -> UpstreamError:
        return UpstreamError(status, message_of(body))

    def balance_query(self, channel: ChannelTarget, key: str, today: Any) -> BalanceQuery | None:
        return None


ANTHROPIC = Anthropic()
