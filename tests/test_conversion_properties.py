"""Properties of the conversion (docs/CHAT.md#conversion) over generated input: any body the route's checks
accept is converted or refused with a 400 naming a field — never another exception (a 500); any sequence
of upstream events is mapped or ends the stream with `StreamBroken` — never another exception; and a
converted Anthropic stream keeps Anthropic's grammar (every block opened once and closed once, in index
order, `message_delta` and `message_stop` once, last) while carrying every text and argument piece, in
order."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from server.errors import InvalidRequest
from server.upstream.estimate import count_all
from server.upstream.formats.anthropic_messages import MESSAGES, read_messages
from server.upstream.formats.base import StreamBroken
from server.upstream.formats.chat_routes import CHAT_FORMAT, MESSAGES_FORMAT
from server.upstream.formats.chat_via_anthropic import messages_request
from server.upstream.formats.messages_via_openai import chat_request
from server.upstream.formats.openai_chat import CHAT, read_chat
from server.upstream.formats.sse import Events, data_of, name_of
from tests.test_conversion_formats import Target

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12)
words = st.sampled_from(["text", "image_url", "image", "tool_use", "tool_result", "thinking", "document",
                         "function", "custom", "url", "base64", "data:image/png;base64,AA", "https://x/y",
                         "system", "developer", "user", "assistant", "tool", "auto", "none", "required",
                         "any"])
keys = st.sampled_from(["type", "text", "content", "role", "image_url", "url", "source", "media_type",
                        "data", "tool_calls", "function", "name", "arguments", "id", "tool_call_id",
                        "tool_use_id", "input", "parameters", "description", "input_schema"])
shaped = st.recursive(
    st.none() | words | st.text(max_size=4) | st.integers(0, 2) | st.just('{"a": 1}'),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4), max_leaves=16)
"""Values built from the words the conversion reads, so generated bodies reach its branches."""


@settings(max_examples=200, deadline=None)
@given(messages=st.lists(st.dictionaries(keys, shaped, max_size=4), min_size=1, max_size=4),
       extra=st.dictionaries(st.sampled_from(["n", "stop", "temperature", "tools", "tool_choice", "user",
                                              "parallel_tool_calls", "top_p"]), shaped | json_values,
                             max_size=4))
def test_any_accepted_chat_body_is_converted_or_refused_naming_a_field(messages: list[dict[str, Any]],
                                                                        extra: dict[str, Any]) -> None:
    for message in messages:
        message.setdefault("role", "user")
        if not isinstance(message["role"], str):
            message["role"] = "user"
    body = json.dumps({"model": "c", "messages": messages, **extra}).encode()
    try:
        asked = read_chat(body)
    except InvalidRequest:
        return
    try:
        out = messages_request(replace(asked, request_id="r"), "c")
    except InvalidRequest as refused:
        assert refused.param in ("messages", "n", "tools", "tool_choice")
        return
    json.dumps(out)  # what goes upstream is JSON
    assert all(turn["role"] in ("user", "assistant") for turn in out["messages"])


@settings(max_examples=200, deadline=None)
@given(turns=st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                                             "content": shaped}), min_size=1, max_size=4),
       extra=st.dictionaries(st.sampled_from(["system", "tools", "tool_choice", "stop_sequences", "metadata",
                                              "temperature"]), shaped | json_values, max_size=4),
       channel_type=st.sampled_from([1, 8, 24, 43]))
def test_any_accepted_messages_body_is_converted_or_refused_naming_a_field(
        turns: list[dict[str, Any]], extra: dict[str, Any], channel_type: int) -> None:
    body = json.dumps({"model": "m", "max_tokens": 9, "messages": turns, **extra}).encode()
    try:
        asked = read_messages(body)
    except InvalidRequest:
        return
    try:
        out = chat_request(replace(asked, request_id="r"), "m", Target(channel_type))
    except InvalidRequest as refused:
        assert refused.param in ("messages", "tools")
        return
    json.dumps(out)
    assert all(m["role"] in ("system", "user", "assistant", "tool") for m in out["messages"])


def chunk(choices: Any = None, usage: Any = None) -> bytes:
    body: dict[str, Any] = {"object": "chat.completion.chunk"}
    if choices is not None:
        body["choices"] = choices
    if usage is not None:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


NAMES = ("fname", "gname")  # longer than any generated argument piece
tool_delta = st.fixed_dictionaries({"index": st.integers(0, 2)}, optional={
    "id": st.sampled_from(["c0", "c1", "c2"]),
    "function": st.fixed_dictionaries({}, optional={"name": st.sampled_from(NAMES),
                                                    "arguments": st.text(max_size=4)})})
openai_chunks = st.lists(st.one_of(
    st.builds(lambda text: chunk([{"index": 0, "delta": {"content": text}}]), st.text(max_size=5)),
    st.builds(lambda calls: chunk([{"index": 0, "delta": {"tool_calls": calls}}]),
              st.lists(tool_delta, min_size=1, max_size=2)),
    st.builds(lambda reason: chunk([{"index": 0, "delta": {}, "finish_reason": reason}]),
              st.sampled_from(["stop", "length", "tool_calls", "content_filter", "other"])),
    st.builds(lambda n: chunk([], {"prompt_tokens": n, "completion_tokens": n}), st.integers(0, 50)),
    st.just(b"data: [DONE]\n\n"), st.just(b": comment\n\n"), st.just(b"data: not json\n\n"),
    st.builds(lambda value: chunk(value), json_values)), max_size=14)


@settings(max_examples=250, deadline=None)
@given(events=openai_chunks)
def test_any_openai_stream_maps_to_a_well_formed_anthropic_stream_or_breaks_cleanly(
        events: list[bytes]) -> None:
    asked = replace(read_messages(b'{"model":"m","max_tokens":5,"stream":true,'
                                  b'"messages":[{"role":"user","content":"hi"}]}'), request_id="r")
    mapper = MESSAGES_FORMAT.exchange(1).stream(MESSAGES, asked, Target(1), count_all)
    written = b""
    try:
        for event in events:
            written += mapper.event(event)
        written += mapper.end()
        broken = False
    except StreamBroken as error:
        written += error.written
        broken = True
    names: list[str] = []
    opened: list[int] = []
    closed: list[int] = []
    pieces: list[str] = []
    for event in Events().feed(written):
        name, data = name_of(event).decode(), json.loads(data_of(event))
        assert data["type"] == name
        names.append(name)
        if name == "content_block_start":
            assert data["index"] == len(opened) and len(closed) == len(opened)  # the previous one closed
            opened.append(data["index"])
        elif name == "content_block_stop":
            assert data["index"] == opened[-1] and data["index"] not in closed
            closed.append(data["index"])
        elif name == "content_block_delta":
            assert data["index"] in opened
            if data["index"] == opened[-1]:
                assert data["index"] not in closed
            delta = data["delta"]
            pieces.append(delta.get("text", delta.get("partial_json")))
    if names:
        assert names[0] == "message_start" and names.count("message_start") == 1
    if not broken:
        assert names[-2:] == ["message_delta", "message_stop"] and names.count("message_stop") == 1
        assert opened == closed
    # every text and argument piece written is one the caller was charged for, in order (names aside)
    assert pieces == [p for p in mapper.delivered() if p and p not in NAMES]


anthropic_events = st.lists(st.one_of(
    st.builds(lambda i, kind: f"event: content_block_start\ndata: {json.dumps({'type': 'content_block_start', 'index': i, 'content_block': {'type': kind, 'id': 't', 'name': 'f', 'input': {}, 'text': ''}})}\n\n".encode(),  # noqa: E501
              st.integers(0, 3), st.sampled_from(["text", "tool_use", "thinking"])),
    st.builds(lambda i, kind, text: f"event: content_block_delta\ndata: {json.dumps({'type': 'content_block_delta', 'index': i, 'delta': {'type': kind, 'text': text, 'partial_json': text}})}\n\n".encode(),  # noqa: E501
              st.integers(0, 3), st.sampled_from(["text_delta", "input_json_delta", "thinking_delta"]),
              st.text(max_size=4)),
    st.builds(lambda i: f"event: content_block_stop\ndata: {json.dumps({'type': 'content_block_stop', 'index': i})}\n\n".encode(),  # noqa: E501
              st.integers(0, 3)),
    st.builds(lambda usage: f"event: message_start\ndata: {json.dumps({'type': 'message_start', 'message': {'usage': usage}})}\n\n".encode(),  # noqa: E501
              json_values),
    st.builds(lambda usage: f"event: message_delta\ndata: {json.dumps({'type': 'message_delta', 'delta': {'stop_reason': 'end_turn'}, 'usage': usage})}\n\n".encode(),  # noqa: E501
              json_values),
    st.just(b'event: message_stop\ndata: {"type": "message_stop"}\n\n'),
    st.just(b'event: ping\ndata: {"type": "ping"}\n\n'),
    st.builds(lambda value: b"data: " + json.dumps(value).encode() + b"\n\n", json_values)), max_size=14)


@settings(max_examples=250, deadline=None)
@given(events=anthropic_events, include_usage=st.booleans())
def test_any_anthropic_stream_maps_to_chunks_or_breaks_cleanly(events: list[bytes],
                                                               include_usage: bool) -> None:
    body = {"model": "c", "stream": True, "stream_options": {"include_usage": include_usage},
            "messages": [{"role": "user", "content": "hi"}]}
    asked = replace(read_chat(json.dumps(body).encode()), request_id="r")
    mapper = CHAT_FORMAT.exchange(14).stream(CHAT, asked, Target(14), count_all)
    written = b""
    try:
        for event in events:
            written += mapper.event(event)
        written += mapper.end()
    except StreamBroken:
        return
    datas = [data_of(event) for event in Events().feed(written)]
    assert datas[-1] == b"[DONE]" and datas.count(b"[DONE]") == 1
    chunks = [json.loads(d) for d in datas[:-1]]
    usage_chunks = [c for c in chunks if c["choices"] == []]
    assert len(usage_chunks) == (1 if include_usage else 0)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    indexes = [call["index"] for delta in deltas for call in delta.get("tool_calls", [])]
    assert all(0 <= i < 4 for i in indexes)
    starts = [call["index"] for delta in deltas for call in delta.get("tool_calls", []) if "id" in call]
    assert starts == list(range(len(starts)))  # counted over tool blocks: 0, 1, 2, …
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert sum(f is not None for f in finishes) >= 1
