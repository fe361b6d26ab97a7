"""OpenAI moderations (`POST /v1/moderations`) on OpenAI channels (type 1): the body checks are
`providers.openai.parse_moderation`; the reply reports no usage, so a call is billed on the prompt
estimate (docs/API.md#openai-moderation-g2)."""

from __future__ import annotations

from typing import Any

from core.enums import ChannelType
from server.upstream.formats.base import Fixed
from server.upstream.formats.openai_compat import OpenAIPassThrough
from server.upstream.providers.base import Asked, Operation, Provider, Usage
from server.upstream.providers.openai import MODERATIONS, OPENAI


def no_usage(usage: Any) -> Usage | None:
    return None


def no_texts(data: Any) -> list[str]:
    return []


_PASS = OpenAIPassThrough("moderations", no_usage, no_texts)


class ModerationFormat(Fixed):
    name = "moderations"
    dialect: Provider = OPENAI
    channel_types: frozenset[int] = frozenset({ChannelType.OPENAI})

    def __init__(self) -> None:
        super().__init__(MODERATIONS)

    def read_body(self, op: Operation, body: bytes) -> Asked:
        return OPENAI.read_body(op, body)

    def exchange(self, channel_type: int) -> OpenAIPassThrough:
        if channel_type not in self.channel_types:
            raise KeyError(channel_type)
        return _PASS


MODERATION_FORMAT = ModerationFormat()
