"""How each provider that publishes an account balance reports it (`GET /api/channel/update_balance`,
docs/api/channels.md#channel-tests-balances-and-model-lists), and the default address of the channel types
whose upstream Tollway only queries (never routes to).

Every request carries `Authorization: Bearer <key>` and the channel's `header_override`; `{base}` is the
channel's `base_url`, or the type's default address.

    type 1 OpenAI, 8 Custom   GET {base}/v1/dashboard/billing/subscription → hard_limit_usd, then
                              GET {base}/v1/dashboard/billing/usage?start_date&end_date → total_usage
                              (cents); balance = hard limit − usage / 100, USD (openai.py)
    type 20 OpenRouter        GET {base}/v1/credits → data.total_credits − data.total_usage, USD
    type 25 Moonshot          GET {base}/v1/users/me/balance → data.available_balance, CNY
                              (an answer whose `status` is not true or whose `code` is not 0 is a failure)
    type 40 SiliconFlow       GET {base}/v1/user/info → data.totalBalance (a decimal string), CNY
                              (`code` must be 20000)
    type 43 DeepSeek          GET {base}/user/balance → balance_infos[].total_balance (a decimal string)
                              of the CNY entry, else of the USD entry

Amounts come back in the upstream's currency (`Money`); turning CNY into USD is the caller's business
(the `USDExchangeRate` option).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable
from typing import Any

from core.enums import ChannelType
from server.upstream.providers.base import (
    BalanceQuery,
    ChannelTarget,
    Money,
    UnreadableReply,
    UpstreamCall,
    json_object,
    upstream_headers,
)
from server.upstream.providers.openai import OPENAI

DEFAULT_BASES: dict[int, str] = {
    ChannelType.OPENROUTER: "https://openrouter.ai/api",
    ChannelType.MOONSHOT: "https://api.moonshot.cn",
    ChannelType.SILICONFLOW: "https://api.siliconflow.cn",
    ChannelType.DEEPSEEK: "https://api.deepseek.com",
    42: "https://api.mistral.ai",  # Mistral
    48: "https://api.x.ai",  # xAI
}
"""The default address of the OpenAI-compatible channel types (served, listed and queried; a
Custom channel has none: its `base_url` is required)."""


def _amount(value: Any, name: str) -> float:
    """A number, or a decimal number written as text (how several providers send money)."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise UnreadableReply(f"{name}: must be a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise UnreadableReply(f"{name}: must be a number")
    return float(value)


def _object(data: dict[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name)
    if not isinstance(value, dict):
        raise UnreadableReply(f"{name}: must be an object")
    return value


def _get(channel: ChannelTarget, key: str, path: str) -> UpstreamCall:
    headers = upstream_headers(channel, {"Authorization": f"Bearer {key}"}, "application/json")
    return UpstreamCall("GET", f"{channel.base_url}{path}", headers, b"")


def _one_call(call: UpstreamCall, read: Callable[[dict[str, Any]], Money]) -> BalanceQuery:
    return BalanceQuery(call, None, lambda body, _second: read(json_object(body)))


def _openrouter(data: dict[str, Any]) -> Money:
    credits = _object(data, "data")
    return Money(_amount(credits.get("total_credits"), "data.total_credits")
                 - _amount(credits.get("total_usage"), "data.total_usage"))


def _moonshot(data: dict[str, Any]) -> Money:
    if data.get("status") is not True or data.get("code") != 0:
        raise UnreadableReply(f"the upstream refused: code {data.get('code')!r}, scode {data.get('scode')!r}")
    return Money(_amount(_object(data, "data").get("available_balance"), "data.available_balance"), "CNY")


def _siliconflow(data: dict[str, Any]) -> Money:
    if data.get("code") != 20000:
        raise UnreadableReply(f"the upstream refused: code {data.get('code')!r}, "
                              f"message {str(data.get('message'))[:200]!r}")
    return Money(_amount(_object(data, "data").get("totalBalance"), "data.totalBalance"), "CNY")


def _deepseek(data: dict[str, Any]) -> Money:
    infos = data.get("balance_infos")
    if not isinstance(infos, list):
        raise UnreadableReply("balance_infos: must be an array")
    by_currency = {str(i.get("currency")): i for i in infos if isinstance(i, dict)}
    for currency in ("CNY", "USD"):
        if currency in by_currency:
            return Money(_amount(by_currency[currency].get("total_balance"), "total_balance"), currency)
    raise UnreadableReply("balance_infos: no CNY or USD balance")


_SINGLE: dict[int, tuple[str, Callable[[dict[str, Any]], Money]]] = {
    ChannelType.OPENROUTER: ("/v1/credits", _openrouter),
    ChannelType.MOONSHOT: ("/v1/users/me/balance", _moonshot),
    ChannelType.SILICONFLOW: ("/v1/user/info", _siliconflow),
    ChannelType.DEEPSEEK: ("/user/balance", _deepseek),
}
BALANCE_TYPES: frozenset[int] = frozenset({ChannelType.OPENAI, ChannelType.CUSTOM, *_SINGLE})
"""The channel types whose balance can be queried."""


def balance_query(channel_type: int, channel: ChannelTarget, key: str, today: datetime.date
                  ) -> BalanceQuery | None:
    """The query of a channel of `channel_type` whose `base_url` is already resolved (never empty);
    None for a type that publishes no balance."""
    if channel_type in (ChannelType.OPENAI, ChannelType.CUSTOM):
        return OPENAI.balance_query(channel, key, today)
    single = _SINGLE.get(channel_type)
    if single is None:
        return None
    path, read = single
    return _one_call(_get(channel, key, path), read)
