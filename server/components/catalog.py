"""What Tollway knows without asking anyone: the channel types (new-api numbers) and the built-in model
catalog — pure model metadata, no wire format.

- `CHANNEL_TYPES`: every new-api channel type number a channel may have (an unknown one is a 400). The
  ones the gateway calls are those with a provider (`server/upstream/providers/`); channels of the other
  types are stored and listed but never selected (docs/api/channels.md#channel-fields).
- `CATALOG`: the models `GET /api/channel/models` lists, with their capabilities
  (docs/api/gateway.md#gemini-generatecontent-g1): `speech_output` for the speech models (and inferred for any
  name containing `-tts`), `moderation` for the moderation models.
- `capabilities(model, overrides)`: the capabilities of any model name, with the option
  `ModelCapabilities` (`{"<model>": {"speech_output": bool, …}}`) applied on top.
- `BUILTIN_RATIOS`, `FREE_PREFIXES`: the prices known out of the box (docs/api/gateway.md#prices).
- `models_by_channel_type()`: the catalog by channel type, new-api's `GET /api/models`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.enums import ChannelType

CHANNEL_TYPES: dict[int, str] = {
    1: "OpenAI", 2: "Midjourney", 3: "Azure", 4: "Ollama", 5: "MidjourneyPlus", 6: "OpenAIMax",
    7: "OhMyGPT", 8: "Custom", 9: "AILS", 10: "AIProxy", 11: "PaLM", 12: "API2GPT", 13: "AIGC2D",
    14: "Anthropic", 15: "Baidu", 16: "Zhipu", 17: "Ali", 18: "Xunfei", 19: "360", 20: "OpenRouter",
    21: "AIProxyLibrary", 22: "FastGPT", 23: "Tencent", 24: "Gemini", 25: "Moonshot", 26: "ZhipuV4",
    27: "Perplexity", 31: "LingYiWanWu", 33: "AWS", 34: "Cohere", 35: "MiniMax", 36: "SunoAPI",
    37: "Dify", 38: "Jina", 39: "Cloudflare", 40: "SiliconFlow", 41: "VertexAI", 42: "Mistral",
    43: "DeepSeek", 44: "MokaAI", 45: "VolcEngine", 46: "BaiduV2", 47: "Xinference", 48: "xAI",
    49: "Coze", 50: "Kling", 51: "Jimeng", 52: "Vidu", 53: "Submodel", 54: "DoubaoVideo", 55: "Sora",
    56: "Replicate", 57: "Codex",
}

SPEECH_OUTPUT = "speech_output"
MODERATION = "moderation"
CAPABILITIES = (SPEECH_OUTPUT, MODERATION)
CATALOG_CREATED = 1626777600  # the fixed `created` new-api answers for its built-in models


@dataclass(frozen=True, slots=True)
class CatalogModel:
    id: str
    owned_by: str
    capabilities: frozenset[str] = frozenset()


def _google(name: str, *caps: str) -> CatalogModel:
    return CatalogModel(name, "google", frozenset(caps))


def _openai(name: str, *caps: str) -> CatalogModel:
    return CatalogModel(name, "openai", frozenset(caps))


CATALOG: tuple[CatalogModel, ...] = (
    _google("gemini-2.5-pro"),
    _google("gemini-2.5-flash"),
    _google("gemini-2.5-flash-lite"),
    _google("gemini-2.5-flash-preview-tts", SPEECH_OUTPUT),
    _google("gemini-2.5-pro-preview-tts", SPEECH_OUTPUT),
    _google("gemini-2.0-flash"),
    _google("gemini-2.0-flash-lite"),
    _google("gemini-1.5-pro"),
    _google("gemini-1.5-flash"),
    _openai("omni-moderation-latest", MODERATION),
    _openai("omni-moderation-2024-09-26", MODERATION),
    _openai("text-moderation-latest", MODERATION),
    _openai("text-moderation-stable", MODERATION),
)
_BY_ID = {m.id: m for m in CATALOG}

BUILTIN_RATIOS: dict[str, tuple[float, float]] = {  # model → (ModelRatio, CompletionRatio)
    "gemini-2.5-flash-preview-tts": (0.25, 20.0),
    "gemini-2.5-pro-preview-tts": (0.5, 20.0),
}
FREE_PREFIXES = ("omni-moderation-", "text-moderation-")  # models that cost nothing, by name


def type_name(channel_type: int) -> str:
    return CHANNEL_TYPES.get(channel_type, "Unknown")


def capabilities(model: str, overrides: Mapping[str, Any]) -> dict[str, bool]:
    """`{capability: bool}` for `model`: the catalog's (a name containing `-tts` is inferred to speak),
    then the booleans of `overrides[model]` (the option `ModelCapabilities`) on top."""
    entry = _BY_ID.get(model)
    caps = entry.capabilities if entry is not None else frozenset()
    out = {name: name in caps for name in CAPABILITIES}
    if "-tts" in model.lower():
        out[SPEECH_OUTPUT] = True
    override = overrides.get(model)
    if isinstance(override, Mapping):
        out.update({str(k): v for k, v in override.items() if isinstance(v, bool)})
    return out


_OWNER_OF_TYPE = {ChannelType.OPENAI: "openai", ChannelType.GEMINI: "google"}


def models_by_channel_type() -> dict[str, list[str]]:
    """`GET /api/models`: the catalog's models by the channel type number (as text) that serves them: the
    models a new channel of that type is offered. Only the served types are listed; for any other type the
    new-api console offers none."""
    return {str(int(t)): [m.id for m in CATALOG if m.owned_by == owner]
            for t, owner in _OWNER_OF_TYPE.items()}
