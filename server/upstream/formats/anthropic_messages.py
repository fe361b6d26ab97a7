"""Anthropic Messages (`POST /v1/messages`) on Anthropic (type 14) channels, in pass-through: the body
checks, the estimate, the usage, and the stream rules (docs/CHAT.md#anthropic-messages).

Checked, each a 400 `invalid_request_error` naming the field before anything is reserved or sent:
`model` (non-empty string), `messages` (non-empty array of objects whose `role` is `user` or
`assistant`), `max_tokens` (int ≥ 1, required: Anthropic requires it too), `system` (string or array of
text blocks), `stream` (bool), `tools` (array of objects). Everything else passes as sent.
`count_tokens` bodies get the same checks but for `max_tokens` (`read_count`).

Reserved on the estimate of the prompt (the system text, the text blocks, `tool_use` inputs as JSON,
`tool_result` texts, and each tool's name, description and `input_schema` as JSON; images count 0) and
`max_tokens`. Billed on `usage`: Anthropic's `input_tokens` are already net of the cache; cache reads, and
cache writes kept 5 minutes and 1 hour (`cache_creation`, else `cache_creation_input_tokens` as 5-minute
writes), are priced by `CacheRatio` and `CreateCacheRatio` (× 1.6 for 1 hour).

The upstream request carries the caller's `anthropic-version` (else `2023-06-01`) and `anthropic-beta`
(the route's `forwards`: the pipeline copies them into `Asked.headers`); the body goes up byte for byte
unless the channel maps the model. Streams are written event by event as the upstream sent them; the
usage is `message_start`'s (but for its output count, a placeholder until `message_delta` brings the
real one), each field `message_delta` reports overwriting it (they are cumulative, never added). A stream
cut after its first byte ends with one `event: error` in Anthropic's shape.

Type 14 serves this route in pass-through (`AnthropicPassThrough`); the OpenAI-format types serve it
converted (`messages_via_openai`); `chat_routes` puts the two together.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from server.upstream.formats.base import Answer, Channel, Counter, Exchange, dumps
from server.upstream.formats.openai_compat import json_or_none, whole_count, with_model
from server.upstream.formats.sse import data_of, name_of
from server.upstream.providers import default_base
from server.upstream.providers.anthropic import ANTHROPIC, DEFAULT_VERSION, anthropic_headers
from server.upstream.providers.base import (
    SSE,
    Asked,
    Operation,
    Params,
    Provider,
    UnreadableReply,
    UpstreamCall,
    UpstreamError,
    Usage,
)
from server.upstream.providers.bodies import invalid, parse_object, required_messages, required_model

MESSAGES = Operation("messages")
ROLES = frozenset({"user", "assistant"})
VERSION, BETA = "anthropic-version", "anthropic-beta"
DELTAS = frozenset({b"text_delta", b"input_json_delta"})
_TYPE = re.compile(rb'"type"\s*:\s*"([a-z_]+)"')
_DELTA_TYPE = re.compile(rb'"delta"\s*:\s*\{\s*"type"\s*:\s*"([a-z_]+)"')


def _texts_of_blocks(content: Any, out: list[str]) -> None:
    """A message's content: a string, or its text blocks, `tool_use` inputs (as JSON) and `tool_result`
    texts (images and other blocks count 0)."""
    if isinstance(content, str):
        out.append(content)
        return
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            out.append(block["text"])
        elif kind == "tool_use" and "input" in block:
            out.append(dumps(block["input"]))
        elif kind == "tool_result":
            _texts_of_blocks(block.get("content"), out)


def read_count(body: bytes) -> Asked:
    """The checks of a `count_tokens` body (and of a Messages body, but for `max_tokens`)."""
    data = parse_object(body)
    model = required_model(data)
    messages = required_messages(data)
    texts: list[str] = []
    system = data.get("system")
    if isinstance(system, str):
        texts.append(system)
    elif isinstance(system, list):
        for i, block in enumerate(system):
            if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"),
                                                                                           str):
                raise invalid(f"system[{i}]: must be a text block", "system")
            texts.append(block["text"])
    elif system is not None:
        raise invalid("system: must be a string or an array of text blocks", "system")
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise invalid(f"messages[{i}]: must be an object", "messages")
        if message.get("role") not in ROLES:
            raise invalid(f"messages[{i}].role: must be \"user\" or \"assistant\"", "messages")
        _texts_of_blocks(message.get("content"), texts)
    tools = data.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise invalid("tools: must be an array of objects", "tools")
        for i, tool in enumerate(tools):
            if not isinstance(tool, dict):
                raise invalid(f"tools[{i}]: must be an object", "tools")
            for name in ("name", "description"):
                if isinstance(tool.get(name), str):
                    texts.append(tool[name])
            if "input_schema" in tool:
                texts.append(dumps(tool["input_schema"]))
    stream = data.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise invalid("stream: must be a boolean", "stream")
    return Asked(model, texts, False, None, data, stream=stream)


def read_messages(body: bytes) -> Asked:
    asked = read_count(body)
    assert asked.fields is not None
    cap = asked.fields.get("max_tokens")
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise invalid("max_tokens: required, an integer ≥ 1", "max_tokens")
    return Asked(asked.model, asked.texts, False, cap, asked.fields, stream=asked.stream)


def usage_of_messages(usage: Any) -> Usage | None:
    """`usage` of a message: `input_tokens` (net of the cache), cache reads, 5-minute and 1-hour cache
    writes (`cache_creation`, else `cache_creation_input_tokens` as 5-minute writes), `output_tokens`."""
    if not isinstance(usage, dict):
        return None
    creation = usage.get("cache_creation")
    if isinstance(creation, dict):
        write_5m = whole_count(creation.get("ephemeral_5m_input_tokens"))
        write_1h = whole_count(creation.get("ephemeral_1h_input_tokens"))
    else:
        write_5m, write_1h = whole_count(usage.get("cache_creation_input_tokens")), 0
    return Usage(whole_count(usage.get("input_tokens")), whole_count(usage.get("output_tokens")),
                 cache_read=whole_count(usage.get("cache_read_input_tokens")), cache_write_5m=write_5m,
                 cache_write_1h=write_1h)


def texts_of_message(data: Any) -> list[str]:
    """A message's text blocks and its tool calls' names and inputs (as JSON)."""
    out: list[str] = []
    content = data.get("content") if isinstance(data, dict) else None
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(block.get("name"), str):
            out.append(block["name"])
    _texts_of_blocks(content, out)
    return out


class CumulativeUsage:
    """Anthropic's usage in a stream: `message_start`'s counts (but for its output count, a placeholder
    until `message_delta` brings the real one), each field `message_delta` reports overwriting them (they
    are cumulative, never added). `usage`: the counts so far (None before any)."""

    __slots__ = ("_reported", "usage")

    def __init__(self) -> None:
        self._reported: dict[str, Any] = {}
        self.usage: Usage | None = None

    def start(self, given: Any) -> None:
        if isinstance(given, dict):  # its output count (1) is no count yet: a stream cut before
            # message_delta is charged what it delivered
            self._take({k: v for k, v in given.items() if k != "output_tokens"})

    def delta(self, given: Any) -> None:
        if isinstance(given, dict):
            self._take(given)

    def _take(self, given: dict[str, Any]) -> None:
        self._reported.update({k: v for k, v in given.items() if v is not None})
        self.usage = usage_of_messages(self._reported)


class MessagesStream:
    """A Messages stream in pass-through: every event as sent. Parsed on the way: `message_start` and
    `message_delta` (one each, for the usage); the text and tool-input deltas are kept unparsed and read
    only when a count of the delivered content is needed."""

    form = SSE
    __slots__ = ("_content", "_usage", "usage")

    def __init__(self, op: Operation, asked: Asked, channel: Channel, count: Counter) -> None:
        self.usage: Usage | None = None
        self._usage = CumulativeUsage()
        self._content: list[bytes] = []

    def delivered(self) -> list[str]:
        out: list[str] = []
        for data in self._content:
            event = json_or_none(data)
            delta = event.get("delta") if isinstance(event, dict) else None
            if isinstance(delta, dict):
                piece = delta.get("text") if delta.get("type") == "text_delta" else delta.get("partial_json")
                if isinstance(piece, str):
                    out.append(piece)
        return out

    def start(self) -> bytes:
        return b""

    def event(self, raw: bytes) -> bytes:
        data = data_of(raw)
        if data[:1] != b"{":
            return raw
        kind = name_of(raw)
        if not kind:
            found = _TYPE.search(data)
            kind = found.group(1) if found is not None else b""
        if kind == b"content_block_delta":
            delta = _DELTA_TYPE.search(data)
            if delta is not None and delta.group(1) in DELTAS:
                self._content.append(data)
        elif kind == b"message_start":
            event = json_or_none(data)
            message = event.get("message") if isinstance(event, dict) else None
            self._usage.start(message.get("usage") if isinstance(message, dict) else None)
            self.usage = self._usage.usage
        elif kind == b"message_delta":
            event = json_or_none(data)
            self._usage.delta(event.get("usage") if isinstance(event, dict) else None)
            self.usage = self._usage.usage
        return raw

    def end(self) -> bytes:
        return b""

    def error(self, status: int, code: str, message: str) -> bytes:
        return error_event(code, message)


def error_event(code: str, message: str) -> bytes:
    """The event that ends a Messages stream cut after its first byte."""
    kind = "timeout_error" if code == "upstream_timeout" else "api_error"
    error = {"type": "error", "error": {"type": kind, "message": message}}
    return b"event: error\ndata: " + json.dumps(error, ensure_ascii=False).encode() + b"\n\n"


class AnthropicPassThrough:
    """A Messages call served by an Anthropic channel: bytes both ways."""

    conversion: tuple[str, str] | None = None

    def request(self, channel: Channel, key: str, op: Operation, asked: Asked, upstream_model: str,
                body: bytes) -> UpstreamCall:
        given = asked.headers or {}
        headers = anthropic_headers(channel, key, given.get(VERSION) or DEFAULT_VERSION, given.get(BETA),
                                    stream=asked.stream)
        base = channel.base_url or default_base(channel.type)
        return UpstreamCall("POST", f"{base}/v1/messages", headers, with_model(asked, upstream_model, body),
                            asked.stream)

    def reply(self, op: Operation, asked: Asked, body: bytes) -> Answer:
        data = json_or_none(body)
        if not isinstance(data, dict):
            raise UnreadableReply("a reply that is not a JSON object")
        return Answer(body, usage_of_messages(data.get("usage")), texts_of_message(data))

    def stream(self, op: Operation, asked: Asked, channel: Channel, count: Counter) -> MessagesStream:
        return MessagesStream(op, asked, channel, count)

    def upstream_error(self, status: int, body: bytes) -> UpstreamError:
        return ANTHROPIC.upstream_error(status, body)


class MessagesRoute:
    """An Anthropic route of one operation, with an exchange per channel type that serves it (none for
    `count_tokens`, which Tollway answers itself)."""

    dialect: Provider = ANTHROPIC
    forwards: tuple[str, ...] = (VERSION, BETA)

    def __init__(self, name: str, read: Callable[[bytes], Asked], exchanges: Mapping[int, Exchange]) -> None:
        self.name, self._read, self.exchanges = name, read, exchanges
        self.channel_types = frozenset(exchanges)

    def operation(self, target: str, args: Params) -> Operation:
        return MESSAGES

    def read_body(self, op: Operation, body: bytes) -> Asked:
        return self._read(body)

    def exchange(self, channel_type: int) -> Exchange:
        return self.exchanges[channel_type]


COUNT_FORMAT = MessagesRoute("count_tokens", read_count, {})
"""`POST /v1/messages/count_tokens`: the key and the body checked, the estimate answered (no exchange)."""
