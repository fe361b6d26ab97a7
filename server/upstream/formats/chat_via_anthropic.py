"""OpenAI chat completions served by an Anthropic channel (type 14): the caller's chat request becomes a
Messages request, and the message (or its stream) becomes a chat completion (docs/CHAT.md#conversion).

    request   system / developer messages → `system` text blocks; user text and images → blocks;
              assistant text and `tool_calls` → `text` and `tool_use` blocks; `tool` messages (and a user
              message right after them) → one user turn of `tool_result` blocks first; `max_tokens` ←
              `max_completion_tokens`, `max_tokens`, else `claude.default_max_tokens`; `stop`,
              `temperature` (at most 1), `top_p`, `tools`, `tool_choice`, `parallel_tool_calls`, `user`
    reply     text blocks → `content`, `tool_use` blocks → `tool_calls` (in block order), `stop_reason` →
              `finish_reason`, usage → `prompt_tokens` (every input token, cached or not),
              `completion_tokens`, `cached_tokens` (cache reads); `id` `chatcmpl-<request id>`, the model
              the caller asked for
    stream    each Anthropic event becomes at most one chunk, written before the next read; a tool call's
              `index` counts the `tool_use` blocks before it (never Anthropic's block index); the usage
              chunk only when the caller asked for it; `[DONE]` after `message_stop`

Checked before anything is sent (a 400 naming the field; such a request would pass through to an
OpenAI-format channel): `n` is 1, every `role` is one of system, developer, user, assistant, tool, a
`content` is a string, null or an array of `text` and `image_url` parts, and a tool call's `arguments` is
the text of a JSON object. Dropped, as documented: reasoning fields, `response_format`, `logprobs`,
`seed`, penalties, `store`, `metadata`, `modalities`, `audio`, `prediction`, `web_search_options` and
any field not named above; thinking blocks of the reply (their tokens stay in the output count).

Billed on Anthropic's usage (cache reads and 5-minute and 1-hour writes priced apart), read from a stream
as in pass-through: `message_start`'s counts, each field `message_delta` reports overwriting them.
"""

from __future__ import annotations

import time
from typing import Any

from server.upstream.formats.anthropic_messages import CumulativeUsage, texts_of_message, usage_of_messages
from server.upstream.formats.base import Answer, Channel, Counter, StreamBroken, dumps, estimated
from server.upstream.formats.openai_chat import chat_usage, error_event
from server.upstream.formats.openai_compat import json_or_none
from server.upstream.formats.sse import data_of, frame, name_of
from server.upstream.providers import default_base
from server.upstream.providers.anthropic import ANTHROPIC, DEFAULT_VERSION, anthropic_headers
from server.upstream.providers.base import (
    SSE,
    Asked,
    Operation,
    UnreadableReply,
    UpstreamCall,
    UpstreamError,
    Usage,
)
from server.upstream.providers.bodies import invalid

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
FINISH_REASON = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "max_tokens": "length",
                 "model_context_window_exceeded": "length", "tool_use": "tool_calls",
                 "refusal": "content_filter"}
"""Anthropic's `stop_reason` → OpenAI's `finish_reason` (any other: `stop`)."""
TOOL_CHOICE = {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"}}
DONE = b"data: [DONE]\n\n"


def _text_of(content: Any, where: str) -> str:
    """A system, developer or tool message's content as one text (its text parts joined)."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            text = part.get("text") if isinstance(part, dict) and part.get("type") == "text" else None
            if not isinstance(text, str):
                raise invalid(f"{where}.content[{j}]: must be a text part on a Claude model", "messages")
            parts.append(text)
        return "\n".join(parts)
    raise invalid(f"{where}.content: must be a string, null or an array of parts", "messages")


def _image(part: dict[str, Any], where: str) -> dict[str, Any]:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    if isinstance(url, str) and url.startswith(("https://", "http://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    raise invalid(f"{where}.image_url.url: must be a data:<type>;base64, URL or an http(s) URL", "messages")


def _user_blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise invalid(f"{where}.content: must be a string, null or an array of parts", "messages")
    blocks: list[dict[str, Any]] = []
    for j, part in enumerate(content):
        part = part if isinstance(part, dict) else {}
        kind, text = part.get("type"), part.get("text")
        if kind == "text" and isinstance(text, str):
            if text:
                blocks.append({"type": "text", "text": text})
        elif kind == "image_url":
            blocks.append(_image(part, f"{where}.content[{j}]"))
        else:
            raise invalid(f"{where}.content[{j}]: only text and image_url parts can go to a Claude model",
                          "messages")
    return blocks


def _assistant_blocks(message: dict[str, Any], where: str) -> list[dict[str, Any]]:
    content = message.get("content")
    text = _text_of(content, where)
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    calls = message.get("tool_calls")
    for j, call in enumerate(calls if isinstance(calls, list) else []):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise invalid(f"{where}.tool_calls[{j}].function.name: must be a string", "messages")
        arguments = function.get("arguments")
        decoded = json_or_none(arguments.encode()) if isinstance(arguments, str) else None
        if not isinstance(decoded, dict):
            raise invalid(f"{where}.tool_calls[{j}].function.arguments: must be the text of a JSON object",
                          "messages")
        blocks.append({"type": "tool_use", "id": call.get("id") or f"toolu_{j}", "name": function["name"],
                       "input": decoded})
    return blocks


def _turns(messages: list[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The `system` blocks and the turns of a chat's messages."""
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []  # tool results waiting for the user turn they open
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        role = message.get("role")
        if role not in ROLES:
            raise invalid(f"{where}.role: must be system, developer, user, assistant or tool on a Claude "
                          "model", "messages")
        if role in ("system", "developer"):
            text = _text_of(message.get("content"), where)
            if text:
                system.append({"type": "text", "text": text})
        elif role == "tool":
            results.append({"type": "tool_result", "tool_use_id": str(message.get("tool_call_id") or ""),
                            "content": _text_of(message.get("content"), where)})
        elif role == "user":
            turns.append({"role": "user", "content": results + _user_blocks(message.get("content"), where)})
            results = []
        else:
            if results:
                turns.append({"role": "user", "content": results})
                results = []
            blocks = _assistant_blocks(message, where)
            if blocks:
                turns.append({"role": "assistant", "content": blocks})
    if results:
        turns.append({"role": "user", "content": results})
    return system, turns


def _tools(tools: list[Any]) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(tools):
        function = tool.get("function")
        if tool.get("type", "function") != "function" or not isinstance(function, dict) \
                or not isinstance(function.get("name"), str):
            raise invalid(f"tools[{i}]: only function tools can go to a Claude model", "tools")
        converted: dict[str, Any] = {"name": function["name"]}
        if isinstance(function.get("description"), str):
            converted["description"] = function["description"]
        parameters = function.get("parameters")
        converted["input_schema"] = parameters if isinstance(parameters, dict) else {"type": "object"}
        out.append(converted)
    return out


def _tool_choice(choice: Any) -> dict[str, Any] | None:
    if isinstance(choice, str):
        if choice not in TOOL_CHOICE:
            raise invalid("tool_choice: must be auto, none, required or a function", "tool_choice")
        return dict(TOOL_CHOICE[choice])
    if isinstance(choice, dict):
        function = choice.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return {"type": "tool", "name": function["name"]}
        raise invalid("tool_choice.function.name: must be a string", "tool_choice")
    return None


def messages_request(asked: Asked, upstream_model: str) -> dict[str, Any]:
    """The Messages request of a chat request (the checks of a converted call raise a 400 here)."""
    data = asked.fields or {}
    n = data.get("n")
    if n is not None and n != 1:
        raise invalid("n: must be 1 on a Claude model", "n")
    system, turns = _turns(data["messages"])
    out: dict[str, Any] = {"model": upstream_model, "messages": turns,
                           "max_tokens": asked.completion_tokens or asked.default_cap}
    if system:
        out["system"] = system
    stop = data.get("stop")
    if isinstance(stop, str):
        out["stop_sequences"] = [stop]
    elif isinstance(stop, list):
        out["stop_sequences"] = [s for s in stop if isinstance(s, str)]
    temperature = data.get("temperature")
    if isinstance(temperature, int | float) and not isinstance(temperature, bool):
        out["temperature"] = min(temperature, 1)
    top_p = data.get("top_p")
    if isinstance(top_p, int | float) and not isinstance(top_p, bool):
        out["top_p"] = top_p
    tools = data.get("tools")
    if isinstance(tools, list) and tools:
        out["tools"] = _tools(tools)
    choice = _tool_choice(data.get("tool_choice"))
    if data.get("parallel_tool_calls") is False:
        choice = choice or {"type": "auto"}
        choice["disable_parallel_tool_use"] = True
    if choice is not None:
        out["tool_choice"] = choice
    if isinstance(data.get("user"), str):
        out["metadata"] = {"user_id": data["user"]}
    if asked.stream:
        out["stream"] = True
    return out


def completion_of(message: dict[str, Any], asked: Asked, usage: Usage) -> dict[str, Any]:
    """A chat completion of an Anthropic message."""
    texts, calls = [], []
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        block = block if isinstance(block, dict) else {}
        kind, text = block.get("type"), block.get("text")
        if kind == "text" and isinstance(text, str):
            texts.append(text)
        elif kind == "tool_use":
            function = {"name": block.get("name"), "arguments": dumps(block.get("input", {}))}
            calls.append({"id": block.get("id"), "type": "function", "function": function})
    reply: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        reply["tool_calls"] = calls
    return {"id": f"chatcmpl-{asked.request_id}", "object": "chat.completion", "created": int(time.time()),
            "model": asked.model,
            "choices": [{"index": 0, "message": reply, "logprobs": None,
                         "finish_reason": FINISH_REASON.get(str(message.get("stop_reason")), "stop")}],
            "usage": chat_usage(usage)}


class ChatFromAnthropicStream:
    """Anthropic events → chat chunks, one event at a time (module docstring)."""

    form = SSE
    __slots__ = ("_asked", "_blocks", "_delivered", "_done", "_finished", "_head", "_tools",
                 "_usage", "usage")

    def __init__(self, op: Operation, asked: Asked, channel: Channel, count: Counter) -> None:
        self._asked = asked
        self._usage = CumulativeUsage()
        self.usage: Usage | None = None
        self._blocks: dict[int, int] = {}  # Anthropic's block index → the tool call's index, open blocks
        self._tools = 0  # tool_use blocks so far
        self._delivered: list[str] = []
        self._finished = self._done = False
        head = {"id": f"chatcmpl-{asked.request_id}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": asked.model}
        self._head = dumps(head)[:-1].encode()  # `{"id":…,"model":"m"` — a chunk goes on from here

    def delivered(self) -> list[str]:
        return self._delivered

    def start(self) -> bytes:
        return b""

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return frame(self._head + b',"choices":[' + dumps(choice).encode() + b"]}")

    def event(self, raw: bytes) -> bytes:
        data = data_of(raw)
        event = json_or_none(data) if data[:1] == b"{" else None
        if not isinstance(event, dict) or self._done:  # nothing follows `[DONE]`
            return b""
        kind = event.get("type") or name_of(raw).decode("utf-8", "replace")
        if kind == "content_block_delta":
            return self._delta(event)
        if kind == "content_block_start":
            block, index = event.get("content_block"), event.get("index")
            if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(index, int):
                k = self._blocks[index] = self._tools
                self._tools += 1
                name = str(block.get("name") or "")
                self._delivered.append(name)
                return self._chunk({"tool_calls": [{"index": k, "id": block.get("id"), "type": "function",
                                                    "function": {"name": name, "arguments": ""}}]})
            return b""
        if kind == "content_block_stop":
            index = event.get("index")
            self._blocks.pop(index if isinstance(index, int) else -1, None)
            return b""
        if kind == "message_start":
            message = event.get("message")
            self._usage.start(message.get("usage") if isinstance(message, dict) else None)
            self.usage = self._usage.usage
            return self._chunk({"role": "assistant", "content": ""})
        if kind == "message_delta":
            self._usage.delta(event.get("usage"))
            self.usage = self._usage.usage
            delta = event.get("delta")
            reason = delta.get("stop_reason") if isinstance(delta, dict) else None
            self._finished = True
            return self._chunk({}, FINISH_REASON.get(str(reason), "stop"))
        if kind == "message_stop":
            return self._close()
        if kind == "error":
            error = event.get("error")
            what = error.get("type") if isinstance(error, dict) else None
            raise StreamBroken(f"the upstream stream ended with an error ({str(what or 'unknown')[:40]})")
        return b""  # ping, thinking and signature deltas, anything new

    def _delta(self, event: dict[str, Any]) -> bytes:
        delta = event.get("delta")
        kind = delta.get("type") if isinstance(delta, dict) else None
        if kind == "text_delta":
            text = delta.get("text")  # type: ignore[union-attr]
            if isinstance(text, str) and text:
                self._delivered.append(text)
                return self._chunk({"content": text})
        elif kind == "input_json_delta":
            index = event.get("index")
            k = self._blocks.get(index) if isinstance(index, int) else None
            if k is None:
                raise StreamBroken("the upstream sent a tool input for a block that is not open")
            piece = delta.get("partial_json")  # type: ignore[union-attr]
            if isinstance(piece, str) and piece:
                self._delivered.append(piece)
                return self._chunk({"tool_calls": [{"index": k, "function": {"arguments": piece}}]})
        return b""

    def _close(self) -> bytes:
        """The finish chunk if none came, the usage chunk if the caller asked, `[DONE]`."""
        if self._done:
            return b""
        self._done = True
        out = b"" if self._finished else self._chunk({}, "stop")
        if self._asked.include_usage:
            usage = self.usage or estimated(self._asked, self._delivered)
            out += frame(self._head + b',"choices":[],"usage":' + dumps(chat_usage(usage)).encode() + b"}")
        return out + DONE

    def end(self) -> bytes:
        return self._close()

    def error(self, status: int, code: str, message: str) -> bytes:
        return error_event(code, message)


class ChatViaAnthropic:
    """A chat call served by an Anthropic channel (module docstring)."""

    conversion: tuple[str, str] | None = ("openai", "anthropic")

    def request(self, channel: Channel, key: str, op: Operation, asked: Asked, upstream_model: str,
                body: bytes) -> UpstreamCall:
        converted = dumps(messages_request(asked, upstream_model)).encode()
        base = channel.base_url or default_base(channel.type)
        return UpstreamCall("POST", f"{base}/v1/messages",
                            anthropic_headers(channel, key, DEFAULT_VERSION, None, stream=asked.stream),
                            converted, asked.stream)

    def reply(self, op: Operation, asked: Asked, body: bytes) -> Answer:
        message = json_or_none(body)
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            raise UnreadableReply("a reply that is not an Anthropic message")
        usage = usage_of_messages(message.get("usage"))
        if usage is None:  # billed on Tollway's count, and the reply says so
            usage = estimated(asked, texts_of_message(message))
        return Answer(dumps(completion_of(message, asked, usage)).encode(), usage, [])

    def stream(self, op: Operation, asked: Asked, channel: Channel, count: Counter
               ) -> ChatFromAnthropicStream:
        return ChatFromAnthropicStream(op, asked, channel, count)

    def upstream_error(self, status: int, body: bytes) -> UpstreamError:
        return ANTHROPIC.upstream_error(status, body)
