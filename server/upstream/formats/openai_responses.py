"""OpenAI Responses (`POST /v1/responses`) on OpenAI (type 1) and Custom (type 8) channels, in pass-through:
the body checks, the usage, and the stream rules (docs/CHAT.md#responses).

Only those two types: the other OpenAI-format upstreams (OpenRouter, Moonshot, SiliconFlow, DeepSeek) serve
chat completions, not this API, so a model offered only by them is a 404 `model_not_found` here.

Checked, each a 400 naming the field before anything is reserved or sent: `model` (non-empty string),
`input` (string or array), `stream` (bool), `max_output_tokens` (int ≥ 1), `background` (never `true`:
a background response lives on at the upstream after the call, and Tollway serves no retrieval of it).
Everything else passes as sent (`previous_response_id` too: it works when one channel serves the model).

Reserved on the estimate of the input (the input string, or the input items' text, plus `instructions`)
and `max_output_tokens`, else `PreConsumedCompletionTokens`. Billed on `usage`: cached input tokens are
cache reads, the rest is input; `output_tokens` (reasoning included) is output.

Streams are written event by event as the upstream sent them; nothing is injected (the terminal event
`response.completed`, `response.incomplete` or `response.failed` carries the usage in its `response`). A
stream cut after its first byte ends with one `event: error` in the Responses shape, numbered after the
last event the caller got.
"""

from __future__ import annotations

import json
import re
from typing import Any

from core.enums import ChannelType
from server.upstream.formats.base import Channel, Counter
from server.upstream.formats.openai_compat import OpenAIPassThrough, OpenAIRoute, json_or_none, whole_count
from server.upstream.formats.sse import data_of, name_of
from server.upstream.providers.base import SSE, Asked, Operation, Usage
from server.upstream.providers.bodies import invalid, parse_object, required_model

RESPONSES = Operation("responses")
TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
"""The events that end a response; each carries the whole response, its usage included."""
DELTAS = frozenset({"response.output_text.delta", "response.refusal.delta",
                    "response.function_call_arguments.delta"})
"""The events whose `delta` is content the caller reads (counted when the upstream reports no usage)."""
TEXT_PARTS = frozenset({"input_text", "output_text"})


def _texts_of_item(item: Any, out: list[str]) -> None:
    """The text of one input item: a message's content (a string, or its text parts), a tool call's
    arguments, a tool output's text."""
    if not isinstance(item, dict):
        return
    content = item.get("content")
    if isinstance(content, str):
        out.append(content)
    elif isinstance(content, list):
        for part in content:
            text = part.get("text") if isinstance(part, dict) else None
            if isinstance(text, str) and part.get("type") in TEXT_PARTS:
                out.append(text)
    for name in ("arguments", "output"):
        if isinstance(item.get(name), str):
            out.append(item[name])


def read_responses(body: bytes) -> Asked:
    data = parse_object(body)
    model = required_model(data)
    texts: list[str] = []
    given = data.get("input")
    if isinstance(given, str):
        texts.append(given)
    elif isinstance(given, list):
        for item in given:
            _texts_of_item(item, texts)
    elif given is not None:
        raise invalid("input: must be a string or an array of input items", "input")
    if isinstance(data.get("instructions"), str):
        texts.append(data["instructions"])
    stream = data.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise invalid("stream: must be a boolean", "stream")
    cap = data.get("max_output_tokens")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        raise invalid("max_output_tokens: must be an integer ≥ 1", "max_output_tokens")
    if data.get("background") is True:
        raise invalid("background: background responses are not served (send it without `background`)",
                      "background")
    return Asked(model, texts, False, cap, data, stream=stream)


def usage_of_responses(usage: Any) -> Usage | None:
    """`usage` of a response: cached input tokens are cache reads, the rest is input (never below 0);
    `output_tokens` (reasoning tokens included) is output."""
    if not isinstance(usage, dict):
        return None
    given = whole_count(usage.get("input_tokens"))
    details = usage.get("input_tokens_details")
    cached = whole_count(details.get("cached_tokens")) if isinstance(details, dict) else 0
    return Usage(max(0, given - cached), whole_count(usage.get("output_tokens")), cache_read=cached)


def texts_of_responses(data: Any) -> list[str]:
    """A response's text (`output_text` and refusal parts of its messages) and its function calls' names
    and arguments."""
    out: list[str] = []
    output = data.get("output") if isinstance(data, dict) else None
    if not isinstance(output, list):
        return out
    for item in output:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            for name in ("name", "arguments"):
                if isinstance(item.get(name), str):
                    out.append(item[name])
            continue
        content = item.get("content")
        if isinstance(content, list):
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    out.append(part["text"])
                elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                    out.append(part["refusal"])
    return out


_SEQUENCE = re.compile(rb'"sequence_number"\s*:\s*(\d+)')
_TYPE = re.compile(rb'"type"\s*:\s*"(response\.[a-z_.]+)"')


def _type_of(data: bytes) -> str:
    """An event's `type` when the upstream sent no `event:` line (the first `response.…` type in it)."""
    found = _TYPE.search(data)
    return found.group(1).decode() if found is not None else ""


def _content_of(event: Any) -> list[str]:
    """The delivered text of one content event: a delta, or a function call's name."""
    if not isinstance(event, dict):
        return []
    kind = event.get("type")
    if kind in DELTAS and isinstance(event.get("delta"), str):
        return [event["delta"]]
    if kind == "response.output_item.added":
        item = event.get("item")
        name = item.get("name") if isinstance(item, dict) and item.get("type") == "function_call" else None
        if isinstance(name, str):
            return [name]
    return []


class ResponsesStream:
    """A Responses stream in pass-through: every event as sent. Read on the way, without parsing most
    events: the last `sequence_number` (a pattern), the terminal event's usage (parsed: one per stream);
    the content events are kept and parsed only when a count of the delivered content is needed."""

    form = SSE
    __slots__ = ("_content", "_last", "usage")

    def __init__(self, op: Operation, asked: Asked, channel: Channel, count: Counter) -> None:
        self.usage: Usage | None = None
        self._content: list[bytes] = []  # the data of the events that carry content, unparsed
        self._last = -1  # the last sequence number the caller got (the first event is 0)

    def delivered(self) -> list[str]:
        out: list[str] = []
        for data in self._content:
            out.extend(_content_of(json_or_none(data)))
        return out

    def start(self) -> bytes:
        return b""

    def event(self, raw: bytes) -> bytes:
        data = data_of(raw)
        if data[:1] != b"{":
            return raw
        number = _SEQUENCE.search(data)
        if number is not None:
            self._last = int(number.group(1))
        kind = name_of(raw).decode("ascii", "replace") or _type_of(data)
        if kind in TERMINAL:
            event = json_or_none(data)
            response = event.get("response") if isinstance(event, dict) else None
            usage = usage_of_responses(response.get("usage")) if isinstance(response, dict) else None
            if usage is not None:
                self.usage = usage
        elif kind in DELTAS or kind == "response.output_item.added":
            self._content.append(data)
        return raw

    def end(self) -> bytes:
        return b""

    def error(self, status: int, code: str, message: str) -> bytes:
        error = {"type": "error", "code": code, "message": message, "param": None,
                 "sequence_number": self._last + 1}
        return b"event: error\ndata: " + json.dumps(error, ensure_ascii=False).encode() + b"\n\n"


RESPONSES_FORMAT = OpenAIRoute("responses", RESPONSES, read_responses,
                              OpenAIPassThrough("responses", usage_of_responses, texts_of_responses,
                                                ResponsesStream),
                              frozenset({ChannelType.OPENAI, ChannelType.CUSTOM}))
