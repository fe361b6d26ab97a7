"""OpenAI moderations (`POST /v1/moderations`) on OpenAI channels (type 1): the body checks are
`providers.openai.parse_moderation`; the reply reports no usage, so a call is billed on the prompt
estimate (docs/api/gateway.md#openai-moderation-g2)."""

from __future__ import annotations

from core.enums import ChannelType
from server.upstream.formats.openai_compat import OpenAIPassThrough, OpenAIRoute
from server.upstream.providers.base import Asked
from server.upstream.providers.openai import MODERATIONS, OPENAI


def read_moderation(body: bytes) -> Asked:
    return OPENAI.read_body(MODERATIONS, body)


MODERATION_FORMAT = OpenAIRoute("moderations", MODERATIONS, read_moderation,
                                OpenAIPassThrough("moderations", None, None),
                                frozenset({ChannelType.OPENAI}))
