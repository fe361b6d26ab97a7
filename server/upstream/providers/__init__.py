"""The providers the gateway speaks, by channel type (`core.enums.ChannelType`) and by route wire.

Each implements `base.Provider`: `gemini.GEMINI` (type 24, Google's wire), `anthropic.ANTHROPIC` (type 14,
Anthropic's wire) and `openai.OPENAI` (OpenAI's wire: type 1 and the OpenAI-compatible types 8, 20, 25, 40,
43, each at its own default address). A
channel of any other type is stored and listed but never selected; an admin may still list its
upstream's models (OpenAI's way) and, for some types, query its balance (`balances.py`).
"""

from __future__ import annotations

from core.enums import ChannelType
from server.upstream.providers.anthropic import ANTHROPIC
from server.upstream.providers.balances import DEFAULT_BASES
from server.upstream.providers.base import Provider
from server.upstream.providers.gemini import GEMINI
from server.upstream.providers.openai import OPENAI
from server.web.routing import Wire

OPENAI_WIRE_TYPES: frozenset[int] = frozenset({
    ChannelType.OPENAI, ChannelType.CUSTOM, ChannelType.OPENROUTER, ChannelType.MOONSHOT,
    ChannelType.SILICONFLOW, ChannelType.DEEPSEEK})
"""Channel types whose upstream speaks OpenAI's wire at `{base}/v1/…`."""

PROVIDERS: dict[int, Provider] = {GEMINI.channel_type: GEMINI, ANTHROPIC.channel_type: ANTHROPIC,
                                  **{t: OPENAI for t in OPENAI_WIRE_TYPES}}
SERVED_TYPES: frozenset[int] = frozenset(PROVIDERS)
_BY_WIRE: dict[Wire, Provider] = {Wire.GOOGLE: GEMINI, Wire.OPENAI: OPENAI, Wire.ANTHROPIC: ANTHROPIC}


def provider(channel_type: int) -> Provider:
    """The provider of a served channel type (KeyError for another)."""
    return PROVIDERS[channel_type]


def default_base(channel_type: int) -> str:
    """The address a channel of this type calls when its `base_url` is empty; "" when the type has none."""
    if channel_type in (GEMINI.channel_type, OPENAI.channel_type, ANTHROPIC.channel_type):
        return PROVIDERS[channel_type].default_base
    return DEFAULT_BASES.get(channel_type, "")


def lister(channel_type: int) -> Provider:
    """The provider whose model list a channel of this type answers: Gemini's for Gemini channels,
    Anthropic's for Anthropic channels, OpenAI's (`GET /v1/models`) for every other type."""
    return PROVIDERS.get(channel_type, OPENAI)


def owned_by(channel_type: int) -> str:
    """`owned_by` of a model served by a channel of this type, in OpenAI-shaped model lists."""
    served = PROVIDERS.get(channel_type)
    return served.owned_by if served is not None and served.channel_type == channel_type else "custom"


def for_wire(wire: Wire, path: str, *, anthropic_version: bool = False) -> Provider | None:
    """The provider whose error objects a route of this wire answers; None for the envelope. Under
    `GOOGLE_OR_OPENAI` (`/v1`), a path that names a Gemini method is Google's, any other OpenAI's; under
    `OPENAI_OR_ANTHROPIC` (`GET /v1/models`), a request with an `anthropic-version` header is Anthropic's."""
    if wire is Wire.GOOGLE_OR_OPENAI:
        return GEMINI if GEMINI.names_method(path) else OPENAI
    if wire is Wire.OPENAI_OR_ANTHROPIC:
        return ANTHROPIC if anthropic_version else OPENAI
    return _BY_WIRE.get(wire)
