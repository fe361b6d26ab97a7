"""Anthropic Messages served by an OpenAI-format channel (types 1, 8, 20, 25, 40, 43, and Gemini's
OpenAI-compatible endpoint on type 24): the Messages request becomes a chat request, and the chat
completion (or its stream) becomes a message (docs/CHAT.md#conversion).

    request   `system` → a first system message; user text and images → a user message; `tool_result`
              blocks → one `tool` message each, before the rest of their turn; assistant text and
              `tool_use` blocks → `content` and `tool_calls`; thinking blocks dropped; `max_tokens` →
              `max_completion_tokens` (OpenAI, type 1) or `max_tokens` (the others); `stop_sequences`,
              `temperature`, `top_p`, `tools`, `tool_choice`, `disable_parallel_tool_use`,
              `metadata.user_id`; a stream asks for the usage chunk
    reply     `content` → a text block (when not empty), `tool_calls` → `tool_use` blocks (`input`: the
              decoded arguments, `{}` when they are no JSON object), `finish_reason` → `stop_reason`,
              usage → `input_tokens` (net of cached tokens), `cache_read_input_tokens`, `output_tokens`;
              `id` `msg_<request id>`, the model the caller asked for
    stream    `message_start` on the first chunk; a text block opened on the first text, a `tool_use`
              block per call; `content_block_stop` when the next block opens or the choice finishes;
              `message_delta` and `message_stop` on the usage chunk after the finish (else on `[DONE]`,
              with Tollway's counts); block indexes 0, 1, 2… over the blocks written

Checked before anything is sent (a 400 `invalid_request_error` naming the field): content blocks are
`text`, `image`, `tool_use`, `tool_result`, `thinking` or `redacted_thinking` (a `document` or any other
block cannot be carried), and `tools[]` are client tools (no `type`, or `custom`: server tools run at
Anthropic). Dropped, as documented: `top_k`, `thinking`, `cache_control` markers, `container`,
`mcp_servers`, citations and any field not named above. Billed on the upstream's usage, once.
"""

from __future__ import annotations

from typing import Any

from core.enums import ChannelType
from server.upstream.formats.anthropic_messages import error_event
from server.upstream.formats.base import Answer, Channel, Counter, StreamBroken, dumps, estimated
from server.upstream.formats.openai_chat import texts_of_chat, usage_of_chat
from server.upstream.formats.openai_compat import bearer_headers, endpoint, json_or_none
from server.upstream.formats.sse import data_of
from server.upstream.providers.base import (
    SSE,
    Asked,
    Operation,
    UnreadableReply,
    UpstreamCall,
    UpstreamError,
    Usage,
    message_of,
)
from server.upstream.providers.bodies import invalid

BLOCKS = frozenset({"text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking"})
STOP_REASON = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use",
               "function_call": "tool_use", "content_filter": "refusal"}
"""OpenAI's `finish_reason` → Anthropic's `stop_reason` (any other: `end_turn`)."""
TOOL_CHOICE = {"auto": "auto", "any": "required", "none": "none"}


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    """A turn's content as blocks (a string is one text block), each of a kind that can be carried."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise invalid(f"{where}.content: must be a string or an array of content blocks", "messages")
    for j, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if not isinstance(kind, str) or kind not in BLOCKS:
            raise invalid(f"{where}.content[{j}].type: {str(kind)[:40]!r} blocks cannot go to this model "
                          "(text, image, tool_use, tool_result and thinking can)", "messages")
    return content


def _text(content: Any) -> str:
    """A tool result's content as text (its text blocks joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = (b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text")
        return "\n".join(t for t in texts if isinstance(t, str))
    return ""


def _image_url(block: dict[str, Any], where: str) -> dict[str, Any]:
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "base64":
        url = f"data:{source.get('media_type')};base64,{source.get('data')}"
    elif isinstance(source, dict) and source.get("type") == "url" and isinstance(source.get("url"), str):
        url = source["url"]
    else:
        raise invalid(f"{where}.source: must be a base64 or url image source", "messages")
    return {"type": "image_url", "image_url": {"url": url}}


def _user(content: Any, where: str) -> list[dict[str, Any]]:
    """A user turn: its tool results as `tool` messages, then the rest as one user message."""
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for j, block in enumerate(_blocks(content, where)):
        kind = block["type"]
        if kind == "tool_result":
            out.append({"role": "tool", "tool_call_id": str(block.get("tool_use_id") or ""),
                        "content": _text(block.get("content"))})
        elif kind == "text" and isinstance(block.get("text"), str):
            parts.append({"type": "text", "text": block["text"]})
        elif kind == "image":
            parts.append(_image_url(block, f"{where}.content[{j}]"))
    if parts:
        out.append({"role": "user", "content": parts})
    return out


def _assistant(content: Any, where: str) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    texts, calls = [], []
    for block in _blocks(content, where):
        if block["type"] == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block["type"] == "tool_use":
            function = {"name": block.get("name"), "arguments": dumps(block.get("input", {}))}
            calls.append({"id": block.get("id"), "type": "function", "function": function})
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if calls:
        message["tool_calls"] = calls
    return message


def _tools(tools: list[Any]) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(tools):
        if tool.get("type", "custom") != "custom":
            kind = str(tool.get("type"))[:40]
            raise invalid(f"tools[{i}].type: server tools ({kind}) cannot go to this model", "tools")
        function: dict[str, Any] = {"name": tool.get("name")}
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        function["parameters"] = tool.get("input_schema", {"type": "object"})
        out.append({"type": "function", "function": function})
    return out


def chat_request(asked: Asked, upstream_model: str, channel: Channel) -> dict[str, Any]:
    """The chat request of a Messages request (the checks of a converted call raise a 400 here)."""
    data = asked.fields or {}
    messages: list[dict[str, Any]] = []
    system = data.get("system")
    if isinstance(system, list):
        system = "\n\n".join(b["text"] for b in system)
    if system:
        messages.append({"role": "system", "content": system})
    for i, turn in enumerate(data["messages"]):
        where = f"messages[{i}]"
        if turn["role"] == "user":
            messages.extend(_user(turn.get("content"), where))
        else:
            messages.append(_assistant(turn.get("content"), where))
    cap = "max_completion_tokens" if channel.type == ChannelType.OPENAI else "max_tokens"
    out: dict[str, Any] = {"model": upstream_model, "messages": messages, cap: data["max_tokens"]}
    if isinstance(data.get("stop_sequences"), list):
        out["stop"] = data["stop_sequences"]
    for name in ("temperature", "top_p"):
        if isinstance(data.get(name), int | float) and not isinstance(data.get(name), bool):
            out[name] = data[name]
    tools = data.get("tools")
    if isinstance(tools, list) and tools:
        out["tools"] = _tools(tools)
    choice = data.get("tool_choice")
    if isinstance(choice, dict):
        kind = choice.get("type")
        if kind == "tool" and isinstance(choice.get("name"), str):
            out["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        elif isinstance(kind, str) and kind in TOOL_CHOICE:
            out["tool_choice"] = TOOL_CHOICE[str(kind)]
        if choice.get("disable_parallel_tool_use") is True:
            out["parallel_tool_calls"] = False
    metadata = data.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("user_id"), str):
        out["user"] = metadata["user_id"]
    if asked.stream:
        out["stream"] = True
        if channel.stream_include_usage:
            out["stream_options"] = {"include_usage": True}
    return out


def _message_usage(usage: Usage) -> dict[str, int]:
    return {"input_tokens": usage.input, "cache_read_input_tokens": usage.cache_read,
            "cache_creation_input_tokens": usage.cache_write, "output_tokens": usage.output}


def _arguments(text: Any) -> Any:
    decoded = json_or_none(text.encode()) if isinstance(text, str) else None
    return decoded if isinstance(decoded, dict) else {}


def message_of_completion(completion: dict[str, Any], asked: Asked, usage: Usage) -> dict[str, Any]:
    """An Anthropic message of a chat completion (its first choice)."""
    choice = _first_choice(completion) or {}
    reply = choice.get("message")
    reply = reply if isinstance(reply, dict) else {}
    content: list[dict[str, Any]] = []
    if isinstance(reply.get("content"), str) and reply["content"]:
        content.append({"type": "text", "text": reply["content"]})
    calls = reply.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            content.append({"type": "tool_use", "id": call.get("id"), "name": function.get("name"),
                            "input": _arguments(function.get("arguments"))})
    return {"id": f"msg_{asked.request_id}", "type": "message", "role": "assistant", "model": asked.model,
            "content": content, "stop_reason": STOP_REASON.get(str(choice.get("finish_reason")), "end_turn"),
            "stop_sequence": None, "usage": _message_usage(usage)}


def _first_choice(data: dict[str, Any]) -> dict[str, Any] | None:
    choices = data.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    return first if isinstance(first, dict) else None


def _event(kind: str, data: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + dumps({"type": kind, **data}).encode() + b"\n\n"


class MessagesFromChatStream:
    """Chat chunks → Anthropic events, one chunk at a time (module docstring)."""

    form = SSE
    __slots__ = ("_asked", "_blocks", "_calls", "_closed", "_delivered", "_ended", "_finish", "_open",
                 "_prompt", "_started", "usage")

    def __init__(self, op: Operation, asked: Asked, channel: Channel, count: Counter) -> None:
        self._asked = asked
        self._prompt = count(asked.texts) + asked.counted
        self.usage: Usage | None = None
        self._started = self._ended = False
        self._blocks = 0  # blocks written
        self._open: tuple[str, int] | None = None  # ("text", -1) or ("tool", call index j) of the open block
        self._calls: dict[int, tuple[int, str]] = {}  # call index j → (its block index, its id)
        self._closed: set[int] = set()  # calls whose block is closed
        self._finish: str | None = None
        self._delivered: list[str] = []

    def delivered(self) -> list[str]:
        return self._delivered

    def start(self) -> bytes:
        return b""

    def _message_start(self) -> bytes:
        if self._started:
            return b""
        self._started = True
        usage = {"input_tokens": self._prompt, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
                 "output_tokens": 0}
        return _event("message_start", {"message": {
            "id": f"msg_{self._asked.request_id}", "type": "message", "role": "assistant",
            "model": self._asked.model, "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": usage}})

    def _close_block(self) -> bytes:
        if self._open is None:
            return b""
        kind, j = self._open
        self._open = None
        if kind == "tool":
            self._closed.add(j)
        return _event("content_block_stop", {"index": self._blocks - 1})

    def _open_block(self, block: dict[str, Any], key: tuple[str, int]) -> bytes:
        out = self._close_block() + _event("content_block_start",
                                           {"index": self._blocks, "content_block": block})
        self._open = key
        self._blocks += 1
        return out

    def event(self, raw: bytes) -> bytes:
        data = data_of(raw)
        if data == b"[DONE]":
            return self._finish_message()
        chunk = json_or_none(data) if data[:1] == b"{" else None
        if not isinstance(chunk, dict):
            return b""
        usage = usage_of_chat(chunk.get("usage"))
        if usage is not None:  # the last one reported is billed, even after the message ended
            self.usage = usage
        if self._ended:
            return b""
        if isinstance(chunk.get("error"), dict):
            raise StreamBroken("the upstream stream ended with an error", self._message_start())
        out = self._message_start()
        choice = _first_choice(chunk)
        if choice is not None:
            delta = choice.get("delta")
            if isinstance(delta, dict):
                out += self._delta(delta, out)
            if choice.get("finish_reason") is not None:
                out += self._close_block()
                self._finish = str(choice["finish_reason"])
        if usage is not None and (self._finish is not None or choice is None):
            out += self._finish_message()
        return out

    def _delta(self, delta: dict[str, Any], written: bytes) -> bytes:
        out = b""
        text = delta.get("content")
        if isinstance(text, str) and text:
            if self._open is None or self._open[0] != "text":
                out += self._open_block({"type": "text", "text": ""}, ("text", -1))
            self._delivered.append(text)
            out += _event("content_block_delta", {"index": self._blocks - 1,
                                                  "delta": {"type": "text_delta", "text": text}})
        calls = delta.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            if not isinstance(call, dict):
                continue
            j = call.get("index", 0)
            j = j if isinstance(j, int) else 0
            function = call.get("function")
            function = function if isinstance(function, dict) else {}
            known = self._calls.get(j)
            if call.get("id") and (known is None or known[1] != call["id"]):
                name = str(function.get("name") or "")
                self._delivered.append(name)
                out += self._open_block({"type": "tool_use", "id": call["id"], "name": name, "input": {}},
                                        ("tool", j))
                self._calls[j] = (self._blocks - 1, str(call["id"]))
            piece = function.get("arguments")
            if isinstance(piece, str) and piece:
                if j not in self._calls or j in self._closed:
                    raise StreamBroken("the upstream sent arguments for a tool call whose block is closed",
                                       written + out)
                self._delivered.append(piece)
                delta = {"type": "input_json_delta", "partial_json": piece}
                out += _event("content_block_delta", {"index": self._calls[j][0], "delta": delta})
        return out

    def _finish_message(self) -> bytes:
        """`message_delta` (the stop reason, the final counts) and `message_stop`, once."""
        if self._ended:
            return b""
        out = self._message_start() + self._close_block()
        self._ended = True
        usage = self.usage or estimated(self._asked, self._delivered)
        reason = STOP_REASON.get(self._finish or "stop", "end_turn")
        return out + _event("message_delta", {"delta": {"stop_reason": reason, "stop_sequence": None},
                                              "usage": _message_usage(usage)}) + _event("message_stop", {})

    def end(self) -> bytes:
        return self._finish_message()

    def error(self, status: int, code: str, message: str) -> bytes:
        return error_event(code, message)


class MessagesViaOpenAI:
    """A Messages call served by an OpenAI-format channel (module docstring)."""

    conversion: tuple[str, str] | None = ("anthropic", "openai")

    def request(self, channel: Channel, key: str, op: Operation, asked: Asked, upstream_model: str,
                body: bytes) -> UpstreamCall:
        converted = dumps(chat_request(asked, upstream_model, channel)).encode()
        return UpstreamCall("POST", endpoint(channel, "chat/completions"),
                            bearer_headers(channel, key, stream=asked.stream), converted, asked.stream)

    def reply(self, op: Operation, asked: Asked, body: bytes) -> Answer:
        completion = json_or_none(body)
        if not isinstance(completion, dict) or not isinstance(completion.get("choices"), list):
            raise UnreadableReply("a reply that is not a chat completion")
        usage = usage_of_chat(completion.get("usage"))
        if usage is None:  # billed on Tollway's count, and the reply says so
            usage = estimated(asked, texts_of_chat(completion))
        return Answer(dumps(message_of_completion(completion, asked, usage)).encode(), usage, [])

    def stream(self, op: Operation, asked: Asked, channel: Channel, count: Counter
               ) -> MessagesFromChatStream:
        return MessagesFromChatStream(op, asked, channel, count)

    def upstream_error(self, status: int, body: bytes) -> UpstreamError:
        return UpstreamError(status, message_of(body))
