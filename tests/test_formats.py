"""The format layer on small byte fixtures, without a server (server/upstream/formats/,
server/components/pricing.py): the cost formula against a Decimal reference, SSE events cut byte for byte, the
chat body checks, the usage normalization and the chat stream's usage-chunk rules."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.components.pricing import Price
from server.errors import InvalidRequest
from server.relay.pipeline import streamed_usage
from server.upstream.estimate import count_all
from server.upstream.formats.chat_routes import CHAT_FORMAT
from server.upstream.formats.openai_chat import (
    CHAT,
    ChatStream,
    ask_for_usage,
    read_chat,
    usage_of_chat,
)
from server.upstream.formats.openai_embeddings import EMBEDDINGS, EMBEDDINGS_FORMAT, read_embeddings
from server.upstream.formats.openai_moderation import MODERATION_FORMAT
from server.upstream.formats.sse import Events, data_of
from server.upstream.providers.base import UnreadableReply, Usage
from server.upstream.providers.openai import MODERATIONS
from tests.test_providers import Channel

counts = st.integers(min_value=0, max_value=10**7)
ratios = st.decimals(min_value=0, max_value=100, places=4, allow_nan=False, allow_infinity=False)




def reference(usage: Usage, model: Decimal, completion: Decimal, group: Decimal, cache: Decimal,
              create: Decimal) -> int:
    tokens = (usage.input + usage.cache_read * cache + usage.cache_write_5m * create
              + usage.cache_write_1h * create * Decimal("1.6") + usage.output * completion)
    points = tokens * model * group
    return max(math.ceil(points), 1) if points > 0 else 0


@settings(max_examples=300, deadline=None)
@given(counts, counts, counts, counts, counts, ratios, ratios, ratios, ratios, ratios)
def test_the_cost_is_the_decimal_formula_with_one_ceil(i: int, o: int, r: int, w5: int, w1: int,
                                                       model: Decimal, completion: Decimal, group: Decimal,
                                                       cache: Decimal, create: Decimal) -> None:
    usage = Usage(i, o, cache_read=r, cache_write_5m=w5, cache_write_1h=w1)
    price = Price(float(model), float(completion), float(group), None, float(cache), float(create))
    # the option values as written: a float read back from JSON prints as the decimal that was typed
    expected = reference(usage, *(Decimal(str(float(x))) for x in (model, completion, group, cache, create)))
    assert price.cost(usage, 500_000) == expected
    exact = ((i + r * cache + w5 * create + w1 * create * Decimal("1.6") + o * completion) * model * group)
    assert price.cost(usage, 500_000) >= exact  # never below what the usage is worth


def test_the_worked_examples() -> None:
    chat = Price(1.25, 4, 1, None, 0.5, 1.25)
    assert chat.cost(Usage(500, 300, cache_read=1500), 500_000) == 3063
    claude = Price(1.5, 5, 1, None, 0.1, 1.25)
    anthropic = Usage(100, 500, cache_read=4000, cache_write_5m=1000, cache_write_1h=200)
    assert claude.cost(anthropic, 500_000) == 6975
    assert Price(0.15, 8, 1, None, 0.25).cost(Usage(400, 200, cache_read=800), 500_000) == 330
    assert Price(0.01, 1, 1.5, None).cost(Usage(1234, 0), 500_000) == 19
    assert Price(0, 1, 1, 0.002).cost(Usage(0, 0), 500_000) == 1000


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([b"data: ", b"event: x\ndata: ", b": c\ndata:"]),
                          st.binary(max_size=40).filter(lambda b: b"\n" not in b and b"\r" not in b),
                          st.sampled_from([b"\n\n", b"\r\n\r\n", b"\n\r\n"])), max_size=8),
       st.lists(st.integers(min_value=1, max_value=30), max_size=10))
def test_events_come_out_whole_and_byte_for_byte_however_the_bytes_are_cut(
        events: list[tuple[bytes, bytes, bytes]], cuts: list[int]) -> None:
    raw = [head + data + end for head, data, end in events]
    stream = b"".join(raw)
    splitter, out, at = Events(), [], 0
    for size in [*cuts, len(stream)]:
        out += splitter.feed(stream[at:at + size])
        at += size
    assert out == raw and splitter.rest() == b""
    # a `data:` field's value loses one leading space, the one after the colon when there is one
    assert [data_of(e) for e in out] == [data[1:] if head.endswith(b":") and data.startswith(b" ") else data
                                         for head, data, _ in events]


def test_data_of_joins_multi_line_data() -> None:
    assert data_of(b"event: message\ndata: {\"a\":\ndata: 1}\nid: 3\n\n") == b'{"a":\n1}'
    assert data_of(b"data:x\r\n\r\n") == b"x"


def param_of(body: Any) -> str | None:
    with pytest.raises(InvalidRequest) as refused:
        read_chat(json.dumps(body).encode())
    assert refused.value.message.startswith(str(refused.value.param))
    return refused.value.param


@given(st.one_of(st.none(), st.booleans(), st.integers(max_value=0), st.text(), st.floats(allow_nan=False)))
def test_each_checked_chat_field_is_refused_by_name(value: Any) -> None:
    ok = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    for name in ("max_tokens", "max_completion_tokens", "n"):
        if value is not None:
            assert param_of({**ok, name: value}) == name
    if value is not None and not isinstance(value, bool):
        assert param_of({**ok, "stream": value}) == "stream"
    assert param_of({**ok, "messages": value if not isinstance(value, str) else []}) == "messages"
    if not (isinstance(value, str) and value.strip()):
        assert param_of({**ok, "model": value}) == "model"


def test_a_chat_body_gives_what_the_gateway_needs() -> None:
    asked = read_chat(b'{"model": "m", "messages": [{"role": "user", "content": [{"type": "text", '
                      b'"text": "a"}]}, {"role": "assistant", "tool_calls": [{"function": {"name": "f", '
                      b'"arguments": "{}"}}]}],'
                      b' "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 9,'
                      b' "max_completion_tokens": 7, "tools": [{"type": "function"}]}')
    assert (asked.model, asked.stream, asked.include_usage, asked.completion_tokens) == ("m", True, True, 7)
    assert asked.texts[:3] == ["a", "f", "{}"]
    plain = read_chat(b'{"model": "m", "messages": [{"role": "user"}]}')
    assert (plain.stream, plain.include_usage, plain.completion_tokens) == (False, False, None)
    with pytest.raises(InvalidRequest) as refused:
        read_chat(b'{"model": "m", "messages": [{"role": "user"}], "stream_options": {"include_usage": 1}}')
    assert refused.value.param == "stream_options"


def test_embeddings_inputs() -> None:
    assert read_embeddings(b'{"model": "e", "input": [[1, 2], [3]]}').counted == 3
    assert read_embeddings(b'{"model": "e", "input": [5, 6]}').counted == 2
    asked = read_embeddings(b'{"model": "e", "input": ["a", "b"], "dimensions": 8}')
    assert (asked.texts, asked.floor, asked.completion_tokens) == (["a", "b"], False, 0)
    for body, param in ((b'{"model": "e", "input": [1, "a"]}', "input"),
                        (b'{"model": "e", "input": [true]}', "input"),
                        (b'{"model": "e", "input": "a", "dimensions": 0}', "dimensions")):
        with pytest.raises(InvalidRequest) as refused:
            read_embeddings(body)
        assert refused.value.param == param


def test_chat_usage_is_normalized_with_cache_reads() -> None:
    assert usage_of_chat({"prompt_tokens": 2000, "completion_tokens": 300, "prompt_tokens_details": {
        "cached_tokens": 1500}}) == Usage(500, 300, cache_read=1500)
    cached_only = {"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 9}}
    assert usage_of_chat(cached_only) == Usage(0, 0, 9)
    assert usage_of_chat({"prompt_tokens": True, "completion_tokens": -3}) == Usage(0, 0)
    assert usage_of_chat(None) is None


def chunk(delta: dict[str, Any] | None = None, usage: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {"id": "c1", "created": 1, "model": "m",
                            "choices": [] if delta is None else [{"index": 0, "delta": delta}]}
    if usage is not None:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def stream_of(include_usage: bool) -> ChatStream:
    body = {"model": "m", "messages": [{"role": "user", "content": "hello there"}], "stream": True}
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    return ChatStream(CHAT, read_chat(json.dumps(body).encode()), Channel(), count_all)


def test_the_usage_chunk_is_stripped_when_not_asked_and_kept_when_asked() -> None:
    usage_chunk = chunk(usage={"prompt_tokens": 3, "completion_tokens": 2})
    for asked in (False, True):
        mapper = stream_of(asked)
        written = [mapper.event(e) for e in (chunk({"content": "hi"}), usage_chunk, b"data: [DONE]\n\n")]
        assert written == [chunk({"content": "hi"}), usage_chunk if asked else b"", b"data: [DONE]\n\n"]
        assert mapper.usage == Usage(3, 2)


def test_a_missing_usage_chunk_is_written_before_done_when_asked() -> None:
    mapper = stream_of(True)
    assert mapper.event(chunk({"content": "abcd efgh"})) == chunk({"content": "abcd efgh"})
    done = mapper.event(b"data: [DONE]\n\n")
    ours, rest = done.split(b"\n\n", 1)
    assert rest == b"data: [DONE]\n\n"
    written = json.loads(data_of(ours + b"\n\n"))
    assert written["choices"] == [] and written["id"] == "c1"
    assert (written["usage"]["prompt_tokens"], written["usage"]["completion_tokens"]) == (3, 3)
    assert mapper.end() == b""
    assert stream_of(False).event(b"data: [DONE]\n\n") == b"data: [DONE]\n\n"


def test_what_a_stream_is_charged_on() -> None:
    delivered = stream_of(False)
    delivered.event(chunk({"content": "Hello there"}))
    assert streamed_usage(delivered, 40, interrupted=False) == Usage(40, 3, estimated=True)
    assert streamed_usage(delivered, 40, interrupted=True) == Usage(40, 3, estimated=True)
    nothing = stream_of(False)
    nothing.event(chunk({"role": "assistant", "content": ""}))
    assert streamed_usage(nothing, 40, interrupted=True) == Usage(0, 0)
    assert streamed_usage(nothing, 40, interrupted=False) == Usage(40, 0, estimated=True)
    reported = stream_of(False)
    reported.event(chunk({"content": "x"}))
    reported.event(chunk(usage={"prompt_tokens": 9, "completion_tokens": 4}))
    assert streamed_usage(reported, 40, interrupted=True) == Usage(9, 4)


def test_the_upstream_is_asked_for_usage_unless_the_channel_says_no() -> None:
    def asked(body: dict[str, Any]) -> Any:
        return read_chat(json.dumps({"model": "m", "messages": [{"role": "user"}], **body}).encode())

    assert ask_for_usage(asked({"stream": True}), Channel()) == {"stream_options": {"include_usage": True}}
    assert ask_for_usage(asked({"stream": True, "stream_options": {"x": 1}}), Channel()) == {
        "stream_options": {"x": 1, "include_usage": True}}
    already = asked({"stream": True, "stream_options": {"include_usage": True}})
    assert ask_for_usage(already, Channel()) is None
    assert ask_for_usage(asked({"stream": True}), Channel(stream_include_usage=False)) is None
    assert ask_for_usage(asked({}), Channel()) is None


def test_a_chunk_with_a_null_usage_is_written_as_sent_and_read_as_no_usage() -> None:
    mapper = stream_of(False)
    raw = b'data: {"id": "c1", "choices": [{"index": 0, "delta": {"content": "x"}}], "usage": null}\n\n'
    assert mapper.event(raw) == raw and mapper.usage is None
    spaced = chunk(usage={"prompt_tokens": 1, "completion_tokens": 1}).replace(b'"usage": {', b'"usage" :  {')
    assert mapper.event(spaced) == b"" and mapper.usage == Usage(1, 1)  # the usage chunk, not asked for


def test_a_replys_usage_is_read_where_it_stands_and_text_inside_strings_never_counts() -> None:
    exchange = CHAT_FORMAT.exchange(1)
    asked = read_chat(b'{"model": "m", "messages": [{"role": "user"}]}')
    decoy = json.dumps({"choices": [{"message": {"content": 'say "usage": {"prompt_tokens": 99}'}}],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 2}}).encode()
    assert exchange.reply(CHAT, asked, decoy).usage == Usage(5, 2)
    only_decoy = json.dumps({"choices": [{"message": {"content": '"usage": {"prompt_tokens": 99}'}}]}
                            ).encode()
    answer = exchange.reply(CHAT, asked, only_decoy)  # no usage: parsed whole, its text counted instead
    assert answer.usage is None and answer.texts == ['"usage": {"prompt_tokens": 99}']
    for broken in (b"<html>502</html>", b'{"choices": [{"message": ', b"", b"[1, 2]"):
        with pytest.raises(UnreadableReply):
            exchange.reply(CHAT, asked, broken)
    embeddings = EMBEDDINGS_FORMAT.exchange(1)
    vectors = {"data": [{"embedding": [0.5] * 1000}], "usage": {"prompt_tokens": 7, "total_tokens": 7}}
    assert embeddings.reply(EMBEDDINGS, asked, json.dumps(vectors).encode()).usage == Usage(7, 0)
    moderation = MODERATION_FORMAT.exchange(1)  # reports no usage: billed on the estimate
    reported = b'{"results": [], "usage": {"prompt_tokens": 3}}'
    assert moderation.reply(MODERATIONS, asked, reported).usage is None
