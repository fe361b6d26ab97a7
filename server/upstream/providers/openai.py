"""OpenAI and OpenAI-compatible upstreams (channel type 1) as the gateway speaks them: moderations.

    caller   POST /v1/moderations                     key: Authorization: Bearer
    upstream POST {base}/v1/moderations               Authorization: Bearer <channel key>
    body     forwarded unchanged, unless the channel maps the model: then only `model` is replaced
    usage    none: moderation is billed on the prompt estimate (docs/api/gateway.md#token-usage-and-estimates)
    errors   {"error": {"message", "type", "param", "code"}}
    balance  GET {base}/v1/dashboard/billing/subscription (hard_limit_usd) minus
             GET {base}/v1/dashboard/billing/usage?start_date&end_date (total_usage in cents)
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.enums import ChannelType
from server.components.catalog import MODERATION
from server.errors import UnknownMethod
from server.upstream.providers.base import (
    Asked,
    BalanceQuery,
    ChannelTarget,
    ListedModel,
    ModelPage,
    Money,
    Operation,
    Params,
    TestOutcome,
    UnreadableReply,
    UpstreamCall,
    UpstreamError,
    base_of,
    bearer,
    error_object,
    json_object,
    message_of,
    passed,
    upstream_headers,
)
from server.upstream.providers.bodies import check_model_name, invalid, parse_object

DEFAULT_BASE = "https://api.openai.com"
DEFAULT_MODERATION_MODEL = "omni-moderation-latest"
MODERATIONS = Operation("moderations")
OPERATIONS = {"moderations": MODERATIONS}
TEST_INPUT = "hello"


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


@dataclass(frozen=True, slots=True)
class ModerationBody:
    data: dict[str, Any]
    model: str
    texts: list[str]


def parse_moderation(body: bytes) -> ModerationBody:
    """`input`: a non-empty string, a non-empty array of non-empty strings, or a non-empty array of
    text / image_url parts; `model` an optional non-empty string
    (docs/api/gateway.md#openai-moderation-g2)."""
    data = parse_object(body)
    value = data.get("input")
    texts: list[str] = []
    bad = invalid("input: must be a non-empty string, a non-empty array of non-empty strings, or a "
                  "non-empty array of text/image_url parts", "input")
    if isinstance(value, str):
        if not value:
            raise bad
        texts.append(value)
    elif isinstance(value, list) and value:
        if all(isinstance(v, str) for v in value):
            if not all(value):
                raise bad
            texts.extend(value)
        elif all(isinstance(v, dict) for v in value):
            for part in value:
                kind = part.get("type")
                if kind == "text" and isinstance(part.get("text"), str) and part["text"]:
                    texts.append(part["text"])
                elif (kind == "image_url" and isinstance(part.get("image_url"), dict)
                      and isinstance(part["image_url"].get("url"), str) and part["image_url"]["url"]):
                    continue
                else:
                    raise bad
        else:
            raise bad
    else:
        raise bad
    model = data.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise invalid("model: must be a non-empty string", "model")
    if model is not None:
        check_model_name(model.strip())
    return ModerationBody(data, (model or DEFAULT_MODERATION_MODEL).strip(), texts)


def _bearer_headers(channel: ChannelTarget, key: str) -> dict[str, str]:
    return upstream_headers(channel, {"Authorization": f"Bearer {key}"}, "application/json")


def _number(data: dict[str, Any], name: str) -> float:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UnreadableReply(f"{name}: must be a number")
    return float(value)


class OpenAI:
    channel_type = ChannelType.OPENAI
    channel_types: frozenset[int] = frozenset({ChannelType.OPENAI})
    owned_by = "openai"
    default_base = DEFAULT_BASE
    request_id_headers: tuple[str, ...] = ("X-Request-Id",)

    # ---- the caller's request -------------------------------------------------------------------------

    def caller_key(self, headers: Params, args: Params) -> str:
        return bearer(headers.get("authorization") or "")

    def operation(self, target: str, args: Params) -> Operation:
        op = OPERATIONS.get(target)
        if op is None:
            raise UnknownMethod(f"unknown method {target!r}")
        return op

    def read_body(self, op: Operation, body: bytes) -> Asked:
        parsed = parse_moderation(body)
        return Asked(parsed.model, parsed.texts, False, 0, parsed.data)

    # ---- the upstream call ----------------------------------------------------------------------------

    def upstream_error(self, status: int, body: bytes) -> UpstreamError:
        return UpstreamError(status, message_of(body))

    # ---- our answers in this wire ---------------------------------------------------------------------

    def refusal_status(self, status: int, code: str) -> int:
        return status

    def error_body(self, status: int, code: str, message: str, param: str | None, *, upstream: bool
                   ) -> bytes:
        if upstream:
            error = {"message": message, "type": "upstream_error", "param": param, "code": str(status)}
        else:
            error = {"message": message, "type": openai_type(status, code), "param": param, "code": code}
        return json.dumps({"error": error}, ensure_ascii=False).encode()

    def is_error_body(self, body: bytes) -> bool:
        error = error_object(body)
        return error is not None and isinstance(error.get("message"), str)

    def stream_error(self, status: int, message: str) -> bytes:
        return self.error_body(status, "upstream_failed", message, None, upstream=False)

    def model_list(self, models: Sequence[ListedModel]) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": m.id, "object": "model", "created": m.created,
                                            "owned_by": m.owned_by} for m in models]}

    # ---- channel administration -----------------------------------------------------------------------

    def models_call(self, channel: ChannelTarget, key: str, page: str | None = None) -> UpstreamCall:
        url = f"{base_of(channel, DEFAULT_BASE)}/v1/models"
        return UpstreamCall("GET", url, _bearer_headers(channel, key), b"")

    def read_models(self, body: bytes) -> ModelPage:
        data = json_object(body).get("data")
        if not isinstance(data, list):
            raise UnreadableReply("data: must be an array")
        return ModelPage([str(m["id"]) for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)])

    def test_call(self, channel: ChannelTarget, key: str, model: str, capabilities: Mapping[str, bool]
                  ) -> UpstreamCall:
        """A moderation model: one word to moderate; an embedding model (`embed` in its name): one word
        to embed; any other: a chat call for one token."""
        base = base_of(channel, DEFAULT_BASE)
        body: dict[str, Any]
        if capabilities.get(MODERATION):
            path, body = "moderations", {"model": model, "input": TEST_INPUT}
        elif "embed" in model.lower():
            path, body = "embeddings", {"model": model, "input": TEST_INPUT}
        else:
            path, body = "chat/completions", {"model": model, "max_tokens": 1,
                                              "messages": [{"role": "user", "content": TEST_INPUT}]}
        return UpstreamCall("POST", f"{base}/v1/{path}", _bearer_headers(channel, key),
                            json.dumps(body).encode())

    def test_outcome(self, status: int, body: bytes) -> TestOutcome:
        return passed(status, body)

    def balance_query(self, channel: ChannelTarget, key: str, today: Any) -> BalanceQuery | None:
        """new-api's query: the usage since the first of the month (the last 100 days for an account
        without a payment method) up to today, subtracted from the subscription's hard limit."""
        base, headers = base_of(channel, DEFAULT_BASE), _bearer_headers(channel, key)
        day: datetime.date = today

        def usage_call(subscription: bytes) -> UpstreamCall:
            paying = json_object(subscription).get("has_payment_method") is True
            start = day.replace(day=1) if paying else day - datetime.timedelta(days=100)
            return UpstreamCall("GET", f"{base}/v1/dashboard/billing/usage?start_date={start.isoformat()}"
                                       f"&end_date={day.isoformat()}", headers, b"")

        def read(subscription: bytes, usage: bytes) -> Money:
            return Money(_number(json_object(subscription), "hard_limit_usd")
                         - _number(json_object(usage), "total_usage") / 100)

        return BalanceQuery(UpstreamCall("GET", f"{base}/v1/dashboard/billing/subscription", headers, b""),
                            usage_call, read)


OPENAI = OpenAI()
