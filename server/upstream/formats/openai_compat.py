"""OpenAI-format upstreams: which channel types speak OpenAI's wire, where their endpoints are, and the
pass-through exchange every OpenAI-format route shares (docs/CHAT.md#routes-and-channel-types).

    types 1, 8, 20, 25, 40, 43   {base}/v1/{path}                  Authorization: Bearer <channel key>
    type 24 (Gemini)             {base}/v1beta/openai/{path}       (Google's OpenAI-compatible endpoint)

`{base}` is the channel's `base_url` or its type's default (a Custom channel has none: saving one without a
`base_url` is refused). The caller's body goes up byte for byte, except that `model` is replaced when the
channel maps it (the JSON is then re-encoded, other fields kept) and a streamed chat call asks for the
usage chunk (`openai_chat`). The reply comes back byte for byte.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from core.enums import ChannelType
from server.upstream.formats.base import Answer, Channel, Counter, Exchange, StreamMapper
from server.upstream.providers import OPENAI_WIRE_TYPES, default_base
from server.upstream.providers.base import (
    Asked,
    Operation,
    Params,
    Provider,
    UnreadableReply,
    UpstreamCall,
    UpstreamError,
    Usage,
    message_of,
    upstream_headers,
)
from server.upstream.providers.openai import OPENAI

OPENAI_COMPATIBLE = OPENAI_WIRE_TYPES
GOOGLE_OPENAI_PATH = "/v1beta/openai"


def endpoint(channel: Channel, path: str) -> str:
    """The URL of `path` (`chat/completions`, `embeddings`, …) on an OpenAI-format upstream."""
    base = channel.base_url or default_base(channel.type)
    if channel.type == ChannelType.GEMINI:
        return f"{base}{GOOGLE_OPENAI_PATH}/{path}"
    return f"{base}/v1/{path}"


def bearer_headers(channel: Channel, key: str, *, stream: bool = False) -> dict[str, str]:
    return upstream_headers(channel, {"Authorization": f"Bearer {key}"},
                            "text/event-stream" if stream else "application/json")


def with_model(asked: Asked, upstream_model: str, body: bytes, extra: dict[str, Any] | None = None) -> bytes:
    """The caller's bytes, or, when the model is mapped or a field is added, its JSON re-encoded."""
    if upstream_model == asked.model and not extra:
        return body
    data = dict(asked.fields or {})
    data["model"] = upstream_model
    if extra:
        data.update(extra)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def whole_count(value: Any) -> int:
    """A token count as reported: a non-negative JSON integer, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


_USAGE_KEY = re.compile(rb'"usage"\s*:\s*')
_DECODER = json.JSONDecoder()


def usage_object(body: bytes) -> Any:
    """The value of a reply's last `"usage"` key, decoded alone (None when there is none or it does not
    decode). A key inside a string cannot match: its quotes are escaped there."""
    at = body.rfind(b'"usage"')
    found = _USAGE_KEY.match(body, at) if at >= 0 else None
    if found is None:
        return None
    try:
        value, _ = _DECODER.raw_decode(body[found.end():].decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return value


def json_or_none(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


class OpenAIPassThrough:
    """An OpenAI-format route served by an OpenAI-format upstream: bytes both ways.

    `usage` reads a complete reply's usage (None: the route's replies report none), `texts` its text
    (counted when there is no usage; None: there is none to count), `mapper` builds a stream's mapper
    (None: the route never streams).

    A reply is not parsed whole when it need not be: it must open as a JSON object, its `usage` object is
    read where it stands (the last `"usage"` key of the body, decoded alone), and only a reply without one
    is parsed to count its text — an embeddings reply of a few hundred kilobytes of floats costs a search,
    not a parse."""

    conversion: tuple[str, str] | None = None

    def __init__(self, path: str, usage: Callable[[Any], Usage | None] | None,
                 texts: Callable[[Any], list[str]] | None,
                 mapper: Callable[[Operation, Asked, Channel, Counter], StreamMapper] | None = None,
                 request_extra: Callable[[Asked, Channel], dict[str, Any] | None] | None = None) -> None:
        self.path, self._usage, self._texts = path, usage, texts
        self._mapper, self._extra = mapper, request_extra

    def request(self, channel: Channel, key: str, op: Operation, asked: Asked, upstream_model: str,
                body: bytes) -> UpstreamCall:
        extra = self._extra(asked, channel) if self._extra is not None else None
        return UpstreamCall("POST", endpoint(channel, self.path),
                            bearer_headers(channel, key, stream=asked.stream),
                            with_model(asked, upstream_model, body, extra), asked.stream)

    def reply(self, op: Operation, asked: Asked, body: bytes) -> Answer:
        if body.lstrip()[:1] != b"{":
            raise UnreadableReply("a reply that is not a JSON object")
        if self._usage is not None:
            usage = self._usage(usage_object(body))
            if usage is not None:
                return Answer(body, usage, [])
        if self._usage is None and self._texts is None:  # nothing to read (moderation): the estimate bills
            return Answer(body, None, [])
        data = json_or_none(body)  # no usage where it should stand: the whole reply, checked and read
        if not isinstance(data, dict):
            raise UnreadableReply("a reply that is not a JSON object")
        return Answer(body, self._usage(data.get("usage")) if self._usage is not None else None,
                      self._texts(data) if self._texts is not None else [])

    def stream(self, op: Operation, asked: Asked, channel: Channel, count: Counter) -> StreamMapper:
        assert self._mapper is not None
        return self._mapper(op, asked, channel, count)

    def upstream_error(self, status: int, body: bytes) -> UpstreamError:
        return UpstreamError(status, message_of(body))


class OpenAIRoute:
    """An OpenAI-format route (its path names one operation) served by one pass-through exchange on each
    of its OpenAI-format channel types, and by a conversion on each type of `converted` (chat on
    Anthropic channels)."""

    dialect: Provider = OPENAI
    forwards: tuple[str, ...] = ()

    def __init__(self, name: str, op: Operation, read: Callable[[bytes], Asked], exchange: OpenAIPassThrough,
                 channel_types: frozenset[int], converted: Mapping[int, Exchange] | None = None) -> None:
        self.name, self._op, self._read, self._exchange = name, op, read, exchange
        self._passed, self._converted = channel_types, dict(converted or {})
        self.channel_types = channel_types | frozenset(self._converted)

    def operation(self, target: str, args: Params) -> Operation:
        return self._op

    def read_body(self, op: Operation, body: bytes) -> Asked:
        return self._read(body)

    def exchange(self, channel_type: int) -> Exchange:
        if channel_type in self._passed:
            return self._exchange
        return self._converted[channel_type]
