"""OpenAI chat completions (`POST /v1/chat/completions`): the body checks, the usage, and the stream rules
(docs/CHAT.md#what-is-checked).

Checked, each a 400 naming the field before anything is reserved or sent: `model` (non-empty string),
`messages` (non-empty array of objects with a string `role`), `stream` (bool), `stream_options` (object;
`include_usage` bool), `max_tokens` / `max_completion_tokens` / `n` (int ≥ 1), `tools` (array of
objects). Everything else passes as sent.

Streams: the upstream is always asked for the usage chunk (`stream_options.include_usage`, merged into the
caller's; a channel whose `setting` says `stream_include_usage: false` is not asked). The caller gets that
chunk (`choices: []` with `usage`) only when it asked for it; asked for and not sent, Tollway writes one
before `[DONE]` with the counts it billed. Every other event is written as the upstream sent it.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from server.upstream.formats.base import Channel, Counter, dumps, estimated
from server.upstream.formats.openai_compat import (
    OpenAIPassThrough,
    json_or_none,
    whole_count,
)
from server.upstream.formats.sse import data_of, frame
from server.upstream.providers.base import SSE, Asked, Operation, Usage
from server.upstream.providers.bodies import invalid, parse_object, required_messages, required_model

CHAT = Operation("chat/completions")
DONE = b"[DONE]"
_USAGE_OBJECT = re.compile(rb'"usage"\s*:\s*\{')
"""A chunk that carries usage (an upstream asked for it sends `"usage": null` in every other chunk: those are
written without being parsed)."""


def _positive_int(data: dict[str, Any], name: str) -> int | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise invalid(f"{name}: must be an integer ≥ 1", name)
    return value


def _texts_of_content(content: Any, out: list[str]) -> None:
    if isinstance(content, str):
        out.append(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])


def _texts_of_calls(calls: Any, out: list[str]) -> None:
    if isinstance(calls, list):
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                for name in ("name", "arguments"):
                    if isinstance(function.get(name), str):
                        out.append(function[name])


def read_chat(body: bytes) -> Asked:
    data = parse_object(body)
    model = required_model(data)
    messages = required_messages(data)
    texts: list[str] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise invalid(f"messages[{i}]: must be an object", "messages")
        if not isinstance(message.get("role"), str):
            raise invalid(f"messages[{i}].role: must be a string", "messages")
        _texts_of_content(message.get("content"), texts)
        _texts_of_calls(message.get("tool_calls"), texts)
    stream = data.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise invalid("stream: must be a boolean", "stream")
    include_usage = False
    options = data.get("stream_options")
    if options is not None:
        if not isinstance(options, dict):
            raise invalid("stream_options: must be an object", "stream_options")
        flag = options.get("include_usage")
        if flag is not None and not isinstance(flag, bool):
            raise invalid("stream_options.include_usage: must be a boolean", "stream_options")
        include_usage = flag is True
    cap = _positive_int(data, "max_completion_tokens")
    max_tokens = _positive_int(data, "max_tokens")
    _positive_int(data, "n")
    tools = data.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
            raise invalid("tools: must be an array of objects", "tools")
        texts.extend(json.dumps(t, ensure_ascii=False) for t in tools)
    return Asked(model, texts, False, cap if cap is not None else max_tokens, data, stream=stream,
                 include_usage=include_usage and stream, floor=True)


def usage_of_chat(usage: Any) -> Usage | None:
    """`usage` of a chat completion (or of Google's OpenAI-compatible endpoint): cached prompt tokens are
    cache reads, the rest is input."""
    if not isinstance(usage, dict):
        return None
    prompt = whole_count(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = whole_count(details.get("cached_tokens")) if isinstance(details, dict) else 0
    return Usage(max(0, prompt - cached), whole_count(usage.get("completion_tokens")), cache_read=cached)


def texts_of_chat(data: Any) -> list[str]:
    """The reply's text, tool names and tool arguments (of a completion, or of a chunk's deltas)."""
    out: list[str] = []
    choices = data.get("choices") if isinstance(data, dict) else None
    if isinstance(choices, list):
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            message = choice.get("message") or choice.get("delta")
            if isinstance(message, dict):
                _texts_of_content(message.get("content"), out)
                _texts_of_calls(message.get("tool_calls"), out)
    return out


def ask_for_usage(asked: Asked, channel: Channel) -> dict[str, Any] | None:
    """A streamed call always asks the upstream for the usage chunk (unless the channel says no)."""
    if not asked.stream or not channel.stream_include_usage:
        return None
    options = (asked.fields or {}).get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        return None
    merged = dict(options) if isinstance(options, dict) else {}
    merged["include_usage"] = True
    return {"stream_options": merged}


class ChatStream:
    """A chat stream in pass-through: events as sent, but the usage chunk by the caller's choice."""

    form = SSE
    __slots__ = ("_asked", "_datas", "_done", "_sent_usage", "usage")

    def __init__(self, op: Operation, asked: Asked, channel: Channel, count: Counter) -> None:
        self._asked = asked
        self.usage: Usage | None = None
        self._datas: list[bytes] = []  # the chunks delivered, read only when a count is needed
        self._done = False
        self._sent_usage = False  # the caller got a usage chunk

    def delivered(self) -> list[str]:
        out: list[str] = []
        for data in self._datas:
            out.extend(texts_of_chat(json_or_none(data)))
        return out

    def start(self) -> bytes:
        return b""

    def event(self, raw: bytes) -> bytes:
        data = data_of(raw)
        if data == DONE:
            self._done = True
            return self._usage_chunk() + raw
        if b'"usage"' in data and _USAGE_OBJECT.search(data) is not None:  # not `"usage": null`
            chunk = json_or_none(data)
            if isinstance(chunk, dict):
                usage = usage_of_chat(chunk.get("usage"))
                if usage is not None:
                    self.usage = usage
                    if chunk.get("choices") == []:  # the usage chunk
                        if not self._asked.include_usage:
                            return b""
                        self._sent_usage = True
                        return raw
        if data and data[:1] == b"{":
            self._datas.append(data)
        return raw

    def end(self) -> bytes:
        return b"" if self._done else self._usage_chunk()

    def _usage_chunk(self) -> bytes:
        """Asked for and not sent by the upstream: ours, with the counts billed (its own if it sent
        usage without a usage chunk, else Tollway's count)."""
        if not self._asked.include_usage or self._sent_usage:
            return b""
        self._sent_usage = True
        usage = self.usage or estimated(self._asked, self.delivered())
        first = json_or_none(self._datas[0]) if self._datas else None
        first = first if isinstance(first, dict) else {}
        chunk = {"id": first.get("id", ""), "object": "chat.completion.chunk",
                 "created": first.get("created", int(time.time())),
                 "model": first.get("model", self._asked.model),
                 "choices": [], "usage": chat_usage(usage)}
        return frame(dumps(chunk).encode())

    def error(self, status: int, code: str, message: str) -> bytes:
        return error_event(code, message)


def chat_usage(usage: Usage) -> dict[str, Any]:
    """A chat completion's `usage` object of the counts billed (every input token in `prompt_tokens`)."""
    return {"prompt_tokens": usage.prompt, "completion_tokens": usage.output,
            "total_tokens": usage.prompt + usage.output,
            "prompt_tokens_details": {"cached_tokens": usage.cache_read}}


def error_event(code: str, message: str) -> bytes:
    """The event that ends a chat stream cut after its first byte (the openai SDK raises `APIError`)."""
    error = {"message": message, "type": "server_error", "param": None, "code": code}
    return frame(json.dumps({"error": error}, ensure_ascii=False).encode())


CHAT_PASS_THROUGH = OpenAIPassThrough("chat/completions", usage_of_chat, texts_of_chat, ChatStream,
                                      ask_for_usage)
"""A chat call on an OpenAI-format channel (`chat_routes` puts it with the conversion for Anthropic)."""
