"""The two chat routes with the exchange that serves each on every channel type: pass-through on a
channel of the caller's wire, the conversion on the other (docs/CHAT.md#routes-and-channel-types).

    POST /v1/chat/completions   types 1, 8, 20, 25, 40, 43, 24 (Google's OpenAI endpoint): pass-through
                                type 14 (Anthropic): converted (`chat_via_anthropic`)
    POST /v1/messages           type 14: pass-through
                                types 1, 8, 20, 25, 40, 43, 24: converted (`messages_via_openai`)

Selection among the channels serving a model does not prefer the caller's wire: a retry may move to a
channel of another type, and so start or stop converting.
"""

from __future__ import annotations

from core.enums import ChannelType
from server.upstream.formats.anthropic_messages import AnthropicPassThrough, MessagesRoute, read_messages
from server.upstream.formats.chat_via_anthropic import ChatViaAnthropic
from server.upstream.formats.messages_via_openai import MessagesViaOpenAI
from server.upstream.formats.openai_chat import CHAT, CHAT_PASS_THROUGH, read_chat
from server.upstream.formats.openai_compat import OPENAI_COMPATIBLE, OpenAIRoute

OPENAI_WIRE = OPENAI_COMPATIBLE | {ChannelType.GEMINI}
"""The types that take OpenAI's chat: the OpenAI-compatible ones, and Gemini through Google's endpoint."""

CHAT_FORMAT = OpenAIRoute("chat", CHAT, read_chat, CHAT_PASS_THROUGH, OPENAI_WIRE,
                          {ChannelType.ANTHROPIC: ChatViaAnthropic()})
_CONVERTED = MessagesViaOpenAI()
MESSAGES_FORMAT = MessagesRoute("messages", read_messages,
                                {ChannelType.ANTHROPIC: AnthropicPassThrough(),
                                 **{kind: _CONVERTED for kind in OPENAI_WIRE}})
