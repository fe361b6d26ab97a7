"""Chat completions and embeddings of the fake OpenAI (`FakeOpenAI`), as the real API answers them,
under `/v1/` and under Google's OpenAI-compatible prefix `/v1beta/openai/` (so a Gemini channel's
OpenAI-format calls can be pointed at it too).

- `POST …/chat/completions`: the answer is `Text.reply` (default: "Hello from the fake." ), or, when the
  request has `tools` and `Text.tool_calls` is set, those calls (`finish_reason: tool_calls`), after the
  text when `Text.text_first` is set (`content` and `tool_calls` both, as models do that say something
  before calling). Streamed (`stream: true`) as OpenAI does: a role chunk, one chunk per word, then per
  tool call its fragments (the id and name first, then the arguments in two halves), a finish chunk, the
  usage chunk (`choices: []`) only when `stream_options.include_usage` is true, then `data: [DONE]`.
  `Text.finish_reason` replaces the finish reason (`length`, `content_filter`, …). Usage: `Text.usage`
  (None: no usage at all), by default prompt tokens = words of the messages + 7, `cached_tokens` =
  `Text.cached`, completion tokens = words of the answer (+ a quarter of the arguments' characters).
- `POST …/embeddings`: one vector of `Text.dimensions` floats per input (deterministic), or base64 of
  little-endian float32 when `encoding_format` is `base64`; usage: one token per word or per token id.
"""

from __future__ import annotations

import base64
import json
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.base import Recorded, Reply, json_reply

PREFIXES = ("/v1/", "/v1beta/openai/")


@dataclass
class Text:
    """What the fake's text endpoints answer; change it while the fake runs."""

    reply: str = "Hello from the fake."
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    text_first: bool = False  # with tool calls: the reply's text too, before them
    finish_reason: str | None = None  # None: "tool_calls" with calls, else "stop"
    usage: dict[str, Any] | bool | None = True  # True: computed; None: no usage; a dict: sent as is
    cached: int = 0
    dimensions: int = 4
    separator: bytes = b"\n\n"  # the blank line ending each event (`\r\n\r\n` some upstreams send)
    raw_stream: list[bytes] | None = None  # a streamed chat is answered with exactly these chunks


def words(text: str) -> int:
    return len(text.split())


def prompt_words(body: dict[str, Any]) -> int:
    """The words of a chat's (or Anthropic's) messages: string contents and text parts."""
    total = 0
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            total += words(content)
        elif isinstance(content, list):
            total += sum(words(p.get("text", "")) for p in content if isinstance(p, dict))
    return total


def text_path(path: str) -> str | None:
    """`chat/completions` or `embeddings` when the path is one of them under a served prefix."""
    for prefix in PREFIXES:
        if path.startswith(prefix) and path[len(prefix):] in ("chat/completions", "embeddings"):
            return path[len(prefix):]
    return None


def _usage(text: Text, body: dict[str, Any], completion: int) -> dict[str, Any] | None:
    if text.usage is None:
        return None
    if isinstance(text.usage, dict):
        return text.usage
    prompt = prompt_words(body) + 7
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": text.cached}}


def _calls(text: Text) -> list[dict[str, Any]]:
    return [{"id": f"call_{i}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args, separators=(",", ":"))}}
            for i, (name, args) in enumerate(text.tool_calls)]


def chat(text: Text, request: Recorded) -> Reply:
    body = request.json
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return json_reply(400, {"error": {"message": "messages is required", "type": "invalid_request_error",
                                          "param": "messages", "code": None}})
    model = body.get("model", "")
    tools = bool(body.get("tools")) and bool(text.tool_calls)
    calls = _calls(text) if tools else []
    content = text.reply if not tools or text.text_first else None
    completion = (words(content or "") + sum(len(c["function"]["arguments"]) // 4 for c in calls))
    usage = _usage(text, body, completion)
    finish = text.finish_reason or ("tool_calls" if tools else "stop")
    created, ident = int(time.time()), "chatcmpl-fake"
    if body.get("stream") and text.raw_stream is not None:
        return Reply(200, content_type="text/event-stream", chunks=list(text.raw_stream))
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if tools:
            message["tool_calls"] = calls
        reply: dict[str, Any] = {"id": ident, "object": "chat.completion", "created": created, "model": model,
                                 "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
        if usage is not None:
            reply["usage"] = usage
        return json_reply(200, reply)

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        data = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: " + json.dumps(data).encode() + text.separator

    chunks = [chunk({"role": "assistant", "content": ""})]
    if content is not None:
        pieces = content.split(" ")
        chunks += [chunk({"content": (" " if i else "") + piece}) for i, piece in enumerate(pieces)]
    for i, call in enumerate(calls):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        chunks.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                             "function": {"name": call["function"]["name"],
                                                          "arguments": ""}}]}))
        for part in (arguments[:half], arguments[half:]):
            chunks.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]}))
    chunks.append(chunk({}, finish))
    options = body.get("stream_options")
    if usage is not None and isinstance(options, dict) and options.get("include_usage"):
        data = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [], "usage": usage}
        chunks.append(b"data: " + json.dumps(data).encode() + text.separator)
    chunks.append(b"data: [DONE]" + text.separator)
    return Reply(200, content_type="text/event-stream", chunks=chunks)


def _vector(seed: str, dimensions: int) -> list[float]:
    base = sum(seed.encode()) % 97
    return [round(((base + i * 13) % 100) / 100 - 0.5, 4) for i in range(dimensions)]


def embeddings(text: Text, request: Recorded) -> Reply:
    body = request.json
    if not isinstance(body, dict) or body.get("input") in (None, "", []):
        return json_reply(400, {"error": {"message": "'input' is required", "type": "invalid_request_error",
                                          "param": "input", "code": None}})
    raw = body["input"]
    single = isinstance(raw, str) or (isinstance(raw, list) and raw and isinstance(raw[0], int))
    items = [raw] if single else raw
    tokens = sum(words(i) if isinstance(i, str) else len(i) for i in items)
    dims = body.get("dimensions") or text.dimensions
    data = []
    for index, item in enumerate(items):
        vector = _vector(json.dumps(item), dims)
        value: Any = vector
        if body.get("encoding_format") == "base64":
            value = base64.b64encode(struct.pack(f"<{dims}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": value})
    return json_reply(200, {"object": "list", "data": data, "model": body.get("model", ""),
                            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})
