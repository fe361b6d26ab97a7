"""A fake Anthropic API (`FakeAnthropic`) on a real socket, for the gateway's end-to-end tests.

- `POST /v1/messages`: a message whose text is `reply` (default "Hello from the fake Claude."), or, when
  the request has `tools` and `tool_uses` is set, those `tool_use` blocks (`stop_reason: tool_use`),
  after a text block when `text_first` is set. `thinking` (a text) puts a `thinking` block, with a
  `signature`, before everything else. `stop_reason` replaces the stop reason (`max_tokens`, …).
  Streamed (`stream: true`) as Anthropic does: `message_start` (its usage: the input and cache counts, one
  output token), a `ping` when `ping` is set, per block `content_block_start`, `content_block_delta`
  (`text_delta` or `thinking_delta` per word then one `signature_delta`, or `input_json_delta` in two
  halves), `content_block_stop`, then `message_delta` (stop reason, usage with the final
  `output_tokens`, and the input counts again: cumulative) and `message_stop`; with `raw_stream` set,
  exactly those chunks instead.
  Usage: `usage` (a dict: sent as is, with the stream's `message_start` taking it whole and
  `message_delta` its `output_tokens`; None: none at all), by default input tokens = words of the
  messages + 5, output tokens = words of the answer (thinking included) + a quarter of the tool inputs'
  JSON characters.
- `GET /v1/models`: `models` in Anthropic's list shape (one page).
- Anything else is Anthropic's 404 `not_found_error`.

Errors are Anthropic's `{"type": "error", "error": {"type", "message"}, "request_id"}`. With `valid_keys`
set, another `x-api-key` is the real 401 `authentication_error`. Every request is recorded, headers too
(`anthropic-version`, `anthropic-beta`).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from typing import Any

from tests.fakes.base import FakeServer, Recorded, Reply, json_reply
from tests.fakes.openai_text import prompt_words, words

DEFAULT_MODELS = ("claude-fake-sonnet", "claude-fake-haiku")
ERRORS: dict[str, tuple[int, str, str]] = {
    "400": (400, "invalid_request_error", "messages: Input should be a valid list (injected by the fake)"),
    "403": (403, "permission_error", "Your API key does not have permission to use the specified resource."),
    "429": (429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    "500": (500, "api_error", "Internal server error"),
}


SIGNATURE = "EqQBCkYIBxgCKkBmYWtlLXNpZ25hdHVyZS1vZi10aGUtdGhpbmtpbmc="
"""The signature of the fake's thinking blocks (opaque to the caller, as Anthropic's are)."""


def anthropic_error(status: int, type_: str, message: str) -> Reply:
    return json_reply(status, {"type": "error", "error": {"type": type_, "message": message},
                               "request_id": f"req_{secrets.token_hex(12)}"})


def event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


class FakeAnthropic(FakeServer):
    """Fake Anthropic. Attributes may be changed while it runs; they apply to the next request."""

    def __init__(self, *, models: Iterable[str] = DEFAULT_MODELS, valid_keys: Iterable[str] | None = None,
                 slow_seconds: float = 5.0, chunk_delay: float = 0.01) -> None:
        super().__init__(valid_keys=valid_keys, slow_seconds=slow_seconds, chunk_delay=chunk_delay)
        self.models = list(models)
        self.reply = "Hello from the fake Claude."
        self.tool_uses: list[tuple[str, dict[str, Any]]] = []
        self.usage: dict[str, Any] | bool | None = True  # True: computed; None: none; a dict: as is
        self.text_first = False
        """With tool uses: a text block (`reply`) before them."""
        self.thinking: str | None = None
        """A thinking block with this text (and a signature) before the others."""
        self.stop_reason: str | None = None
        """The stop reason to answer (None: `tool_use` with tool uses, else `end_turn`)."""
        self.ping = False
        """A `ping` event right after `message_start`, as Anthropic sends one."""
        self.raw_stream: list[bytes] | None = None
        """A streamed message is answered with exactly these chunks."""

    # -- hooks ------------------------------------------------------------------------------------------

    def reply_headers(self) -> dict[str, str]:
        return {"request-id": f"req_{secrets.token_hex(12)}", "anthropic-organization-id": "org-fake"}

    def api_key(self, request: Recorded) -> str | None:
        return request.headers.get("x-api-key") or None

    def key_error(self, request: Recorded, key: str | None) -> Reply:
        return anthropic_error(401, "authentication_error", self.echoed("invalid x-api-key", request))

    def error_reply(self, mode: str, request: Recorded) -> Reply:
        if mode == "401":
            return self.key_error(request, self.api_key(request))
        status, type_, message = ERRORS[mode]
        return anthropic_error(status, type_, self.echoed(message, request))

    def route(self, request: Recorded) -> Reply:
        path = request.path.rstrip("/")
        if request.method == "POST" and path == "/v1/messages":
            return self._message(request)
        if request.method == "GET" and path == "/v1/models":
            data = [{"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
                    for m in self.models]
            return json_reply(200, {"data": data, "has_more": False,
                                    "first_id": data[0]["id"] if data else None,
                                    "last_id": data[-1]["id"] if data else None})
        return anthropic_error(404, "not_found_error", f"Not Found ({request.method} {request.path})")

    # -- messages ---------------------------------------------------------------------------------------

    def _usage(self, body: dict[str, Any], output: int) -> dict[str, Any] | None:
        if self.usage is None:
            return None
        if isinstance(self.usage, dict):
            return dict(self.usage)
        return {"input_tokens": prompt_words(body) + 5, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0, "output_tokens": output}

    def blocks(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The content blocks of the answer to `body`."""
        tools = bool(body.get("tools")) and bool(self.tool_uses)
        blocks: list[dict[str, Any]] = []
        if self.thinking is not None:
            blocks.append({"type": "thinking", "thinking": self.thinking, "signature": SIGNATURE})
        if not tools or self.text_first:
            blocks.append({"type": "text", "text": self.reply})
        if tools:
            blocks += [{"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": args}
                       for i, (name, args) in enumerate(self.tool_uses)]
        return blocks

    def _message(self, request: Recorded) -> Reply:
        body = request.json
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return anthropic_error(400, "invalid_request_error", "messages: Field required")
        if not isinstance(body.get("max_tokens"), int):
            return anthropic_error(400, "invalid_request_error", "max_tokens: Field required")
        blocks = self.blocks(body)
        output = sum(len(json.dumps(b["input"])) // 4 if b["type"] == "tool_use" else words(b.get("text", "")
                     or b.get("thinking", "")) for b in blocks)
        usage = self._usage(body, output)
        uses_tools = any(b["type"] == "tool_use" for b in blocks)
        stop = self.stop_reason or ("tool_use" if uses_tools else "end_turn")
        message: dict[str, Any] = {"id": "msg_fake", "type": "message", "role": "assistant",
                                   "model": body.get("model", ""), "content": blocks, "stop_reason": stop,
                                   "stop_sequence": None}
        if not body.get("stream"):
            if usage is not None:
                message["usage"] = usage
            return json_reply(200, message)
        if self.raw_stream is not None:
            return Reply(200, content_type="text/event-stream", chunks=list(self.raw_stream))
        start = dict(message, content=[], stop_reason=None)
        if usage is not None:
            start["usage"] = dict(usage, output_tokens=1)
        chunks = [event("message_start", {"type": "message_start", "message": start})]
        if self.ping:
            chunks.append(event("ping", {"type": "ping"}))
        for index, block in enumerate(blocks):
            first, deltas = _stream_block(block)
            chunks.append(event("content_block_start", {"type": "content_block_start", "index": index,
                                                        "content_block": first}))
            chunks += [event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                     "delta": delta}) for delta in deltas]
            chunks.append(event("content_block_stop", {"type": "content_block_stop", "index": index}))
        delta_usage = ({"output_tokens": usage.get("output_tokens", 0),
                        **{k: v for k, v in usage.items() if k.endswith("input_tokens")}}
                       if usage is not None else {"output_tokens": 0})
        chunks.append(event("message_delta", {"type": "message_delta",
                                              "delta": {"stop_reason": stop, "stop_sequence": None},
                                              "usage": delta_usage}))
        chunks.append(event("message_stop", {"type": "message_stop"}))
        return Reply(200, content_type="text/event-stream", chunks=chunks)


def _stream_block(block: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A block's `content_block_start` payload and its deltas, as Anthropic streams them."""
    if block["type"] == "tool_use":
        raw = json.dumps(block["input"])
        half = len(raw) // 2
        return dict(block, input={}), [{"type": "input_json_delta", "partial_json": part}
                                       for part in (raw[:half], raw[half:])]
    kind = block["type"]  # text or thinking
    pieces = block[kind].split(" ")
    deltas = [{"type": f"{kind}_delta", kind: (" " if i else "") + piece} for i, piece in enumerate(pieces)]
    if kind == "thinking":
        signature = {"type": "signature_delta", "signature": block["signature"]}
        return {"type": "thinking", "thinking": "", "signature": ""}, [*deltas, signature]
    return {"type": "text", "text": ""}, deltas
