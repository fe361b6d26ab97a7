"""The pure pieces of the chat benchmark (scripts/bench_chat.py, scripts/bench_chat_streams.py,
scripts/bench_chat_convert.py): the percentile, the delay reader whatever the reads, the fixed replies as
Tollway cuts them (the Anthropic streams as its conversion and pass-through read them), that every
set-up's requests reach the reply meant for their model, the reply check, the modes and the figures of a
cell. No timing is asserted: the figures are the script's to print."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scripts.bench import BY_PROCESS
from scripts.bench_chat import chat_fixture
from scripts.bench_chat_convert import (
    ALL_MODES,
    CHAT_MODE,
    CLAUDE_EVENTS,
    CLAUDE_PREFIXES,
    MESSAGES_PATH,
    MODES,
    PROMPT_TOKENS,
    anthropic_stream,
    messages_request,
    parse_modes,
    sse,
    text_pieces,
    with_claude,
)
from scripts.bench_chat_streams import (
    CHAT_PATH,
    EVENTS,
    PACED,
    PLAIN,
    PREFIXES,
    STREAM_1,
    Stamps,
    chat_replies,
    chat_request,
    chunk,
    event,
    litellm_config,
    per_chunk_us,
    percentile,
    stream_body,
    stream_cpu_cell,
    ttfb_cell,
    usage_chunk,
)
from scripts.bench_env import MODERATION, fixed_locations
from server.upstream.estimate import count_all
from server.upstream.formats.anthropic_messages import MESSAGES, read_messages
from server.upstream.formats.base import StreamMapper
from server.upstream.formats.chat_routes import CHAT_FORMAT, MESSAGES_FORMAT
from server.upstream.formats.openai_chat import CHAT, read_chat
from server.upstream.formats.openai_compat import endpoint
from server.upstream.formats.sse import Events, data_of, name_of
from server.upstream.providers.base import Usage
from tests.test_providers import Channel

UPSTREAM, PACED_URL = "http://127.0.0.1:8001", "http://127.0.0.1:8002"
ANTHROPIC = 14


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=1, max_size=60),
       st.floats(min_value=0, max_value=100))
def test_the_percentile_is_the_nearest_rank(values: list[float], q: float) -> None:
    p = percentile(values, q)
    rank = max(1, math.ceil(q / 100 * len(values)))
    assert p in values
    assert sum(v <= p for v in values) >= rank  # at least q % at or below it
    assert sum(v < p for v in values) < rank  # and it is the smallest such value


def test_the_percentile_refuses_what_has_none() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([float(i) for i in range(1, 201)], 99) == 198.0


def test_the_cpu_per_chunk_is_the_difference_over_the_extra_chunks() -> None:
    assert per_chunk_us(434.0, 2_133.0) == pytest.approx((2_133 - 434) / 199)
    assert per_chunk_us(100.0, 100.0) == 0.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=12),
       st.lists(st.integers(min_value=1, max_value=400), max_size=30), st.booleans())
def test_each_delay_is_taken_when_its_event_is_whole(sent_ms: list[int], cuts: list[int], crlf: bool) -> None:
    """Events split anywhere across reads: each counts once, at the read that brings its blank line."""
    stamps = [1_700_000_000 + ms / 1000 for ms in sent_ms]
    events = [event(chunk(PACED, f"t{s:.6f}")) for s in stamps]
    events += [event(usage_chunk(PACED, len(stamps))), event(b"[DONE]")]  # no stamp in these
    if crlf:
        events = [e.replace(b"\n", b"\r\n") for e in events]
    stream = b"".join(events)
    bounds = sorted({min(c * 37, len(stream)) for c in cuts} | {0, len(stream)})
    reader = Stamps()
    read_at = [1_700_000_500.0 + i for i in range(len(bounds) - 1)]
    for i, (start, end) in enumerate(itertools.pairwise(bounds)):
        reader.feed(stream[start:end], read_at[i])
    ends = [sum(len(e) for e in events[:n + 1]) for n in range(len(stamps))]
    expected = [(read_at[next(i for i in range(len(read_at)) if bounds[i + 1] >= e)] - s) * 1000
                for e, s in zip(ends, stamps, strict=True)]
    assert reader.delays_ms == pytest.approx(expected, abs=1e-3)


def test_a_fixed_stream_is_k_chunks_then_usage_then_done() -> None:
    for model, k in EVENTS.items():
        cut = Events().feed(stream_body(model, k))
        datas = [data_of(e) for e in cut]
        assert len(cut) == k + 2 and datas[-1] == b"[DONE]"
        chunks = [json.loads(d) for d in datas[:-1]]
        for n, c in enumerate(chunks[:-1]):
            assert c["object"] == "chat.completion.chunk" and len(c["choices"]) == 1
            assert c["choices"][0]["finish_reason"] == ("stop" if n == k - 1 else None)
            assert 140 <= len(datas[n]) <= 200  # a realistic chunk's size
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == k


def test_every_set_up_reaches_the_reply_of_its_model() -> None:
    """Tollway builds the upstream URL from the channel's base_url, LiteLLM from its api_base: both must
    land on the path whose fixed reply belongs to the model."""
    replies = chat_replies()
    fixture = chat_fixture(PACED_URL)
    assert dict(fixture.replies) == replies
    ratios = json.loads(fixture.options["ModelRatio"])
    litellm = {m["model_name"]: m["litellm_params"] for m in json.loads(litellm_config(UPSTREAM, PACED_URL,
                                                                                        "sk-x"))["model_list"]}
    assert set(litellm) == {*PREFIXES, PACED, MODERATION}
    assert litellm[MODERATION]["api_base"] + "/moderations" == f"{UPSTREAM}/v1/moderations"
    for spec in fixture.channels:
        assert ratios[spec.models] > 0  # priced, or Tollway refuses the model
        url = spec.base_url if spec.base_url.startswith("http") else UPSTREAM + spec.base_url
        tollway = endpoint(Channel(base_url=url), "chat/completions")
        assert litellm[spec.models]["api_base"] + "/chat/completions" == tollway
        assert litellm[spec.models]["model"] == f"openai/{spec.models}"
        if spec.models == PACED:
            assert tollway == PACED_URL + CHAT_PATH
            continue
        path = tollway.removeprefix(UPSTREAM)
        kind, body = replies[path]
        if spec.models == PLAIN:
            assert kind == "application/json" and json.loads(body)["object"] == "chat.completion"
        else:
            assert kind == "text/event-stream" and body == stream_body(spec.models, EVENTS[spec.models])


def test_long_replies_are_served_from_files(tmp_path: Path) -> None:
    """nginx refuses a configuration string over 4 KiB: a long reply (or one nginx would read as
    variables or escapes) goes to a file with the same bytes."""
    odd = {"/q": b'{"a":"it\'s"}', "/v": b'{"a":"$x"}', "/e": b'{"a":"\\n"}'}
    replies = {"/s": ("application/json", b'{"a":1}'), "/l": ("text/event-stream", stream_body("m", 200)),
               **{path: ("application/json", body) for path, body in odd.items()}}
    conf = fixed_locations(tmp_path, replies)
    assert "location = /s { default_type application/json; return 200 '{\"a\":1}'; }" in conf
    files = dict(re.findall(r"location = (/\w) \{[^}]*alias (\S+);", conf))
    assert set(files) == {"/l", *odd}
    for path, name in files.items():
        assert Path(name).read_bytes() == replies[path][1]


# ---- the Anthropic Messages modes (scripts/bench_chat_convert.py) ----------------------------------------

def test_a_fixed_anthropic_stream_is_one_text_block_of_k_deltas() -> None:
    for model, k in CLAUDE_EVENTS.items():
        cut = Events().feed(anthropic_stream(model, k))
        names = [name_of(e).decode() for e in cut]
        assert names == ["message_start", "content_block_start", *["content_block_delta"] * k,
                         "content_block_stop", "message_delta", "message_stop"]
        datas = [json.loads(data_of(e)) for e in cut]
        assert [d["type"] for d in datas] == names
        assert datas[0]["message"]["model"] == model and datas[0]["message"]["usage"]["output_tokens"] == 1
        assert all(140 <= len(e) <= 160 for e in cut[2:2 + k])  # about 150 bytes, its event line included
        assert all(d["delta"]["type"] == "text_delta" and d["index"] == 0 for d in datas[2:2 + k])
        assert datas[-2]["usage"]["output_tokens"] == k and datas[-2]["delta"]["stop_reason"] == "end_turn"


def _mapped(mapper: StreamMapper, upstream: bytes) -> bytes:
    return mapper.start() + b"".join(mapper.event(e) for e in Events().feed(upstream)) + mapper.end()


@pytest.mark.parametrize("k", [1, 200])
def test_tollway_maps_every_fixed_stream_whole_and_reads_its_usage(k: int) -> None:
    """What each mode's calls get: the stream whole, each text piece delivered, the usage read (the calls
    are billed on it: the conservation check counts them)."""
    model = {n: m for m, n in CLAUDE_EVENTS.items()}[k]
    openai = {n: m for m, n in EVENTS.items()}[k]
    chat = read_chat(chat_request(model, stream=True).encode())
    to_chat = CHAT_FORMAT.exchange(ANTHROPIC).stream(CHAT, chat, Channel(type=ANTHROPIC), count_all)
    assert text_pieces(CHAT_PATH, _mapped(to_chat, anthropic_stream(model, k))) == k
    assert to_chat.usage == Usage(PROMPT_TOKENS, k)
    asked = read_messages(messages_request(model).encode())
    passed = MESSAGES_FORMAT.exchange(ANTHROPIC).stream(MESSAGES, asked, Channel(type=ANTHROPIC), count_all)
    assert _mapped(passed, anthropic_stream(model, k)) == anthropic_stream(model, k)
    assert passed.usage == Usage(PROMPT_TOKENS, k)
    asked = read_messages(messages_request(openai).encode())
    to_messages = MESSAGES_FORMAT.exchange(1).stream(MESSAGES, asked, Channel(), count_all)
    assert text_pieces(MESSAGES_PATH, _mapped(to_messages, stream_body(openai, k))) == k
    assert to_messages.usage == Usage(12, k)


def test_a_stream_that_is_not_whole_is_refused() -> None:
    whole = anthropic_stream("m", 3)
    assert text_pieces(MESSAGES_PATH, whole) == 3 and text_pieces(CHAT_PATH, stream_body("m", 3)) == 3
    error = sse("error", {"type": "error", "error": {"type": "api_error", "message": "broken"}})
    cut = whole.rsplit(b"event: content_block_stop", 1)[0]
    broken_chat = event(chunk("m", "a")) + event(b'{"error":{"message":"broken"}}') + event(b"[DONE]")
    for path, body in ((MESSAGES_PATH, cut), (MESSAGES_PATH, cut + error), (MESSAGES_PATH, b""),
                       (CHAT_PATH, stream_body("m", 3).removesuffix(event(b"[DONE]"))),
                       (CHAT_PATH, broken_chat), (CHAT_PATH, b"")):
        with pytest.raises(ValueError):
            text_pieces(path, body)


def test_the_claude_models_reach_their_streams_and_the_rest_is_kept() -> None:
    """Tollway calls `{base_url}/v1/messages` on a type 14 channel (converted or not): the path of the
    stream that belongs to the model; the pass-through's replies, channels and prices stay."""
    base = chat_fixture(PACED_URL)
    fixture = with_claude(base)
    assert {k: fixture.replies[k] for k in base.replies} == dict(base.replies)
    assert list(fixture.channels[:len(base.channels)]) == list(base.channels)
    ratios = json.loads(fixture.options["ModelRatio"])
    assert ratios == json.loads(base.options["ModelRatio"]) | dict.fromkeys(CLAUDE_PREFIXES, 0.5)
    claude = [spec for spec in fixture.channels if spec.type == ANTHROPIC]
    assert sorted(spec.models for spec in claude) == sorted(CLAUDE_PREFIXES)
    for spec in claude:
        channel = Channel(base_url=UPSTREAM + spec.base_url, type=ANTHROPIC)
        for route, body in ((CHAT_FORMAT, chat_request(spec.models, stream=True)),
                            (MESSAGES_FORMAT, messages_request(spec.models))):
            asked = route.read_body(MESSAGES if route is MESSAGES_FORMAT else CHAT, body.encode())
            op = MESSAGES if route is MESSAGES_FORMAT else CHAT
            call = route.exchange(ANTHROPIC).request(channel, "k", op, asked, spec.models, body.encode())
            kind, reply = fixture.replies[call.url.removeprefix(UPSTREAM)]
            assert kind == "text/event-stream"
            assert reply == anthropic_stream(spec.models, CLAUDE_EVENTS[spec.models])
    for mode in MODES.values():  # direct's path is the 1-event stream of the mode's upstream wire
        direct = fixture.replies[mode.direct][1]
        assert direct in (stream_body(STREAM_1, 1), anthropic_stream(mode.models[0], 1))


def test_the_modes_are_chosen_by_name_or_label_in_their_order() -> None:
    assert parse_modes("all") == list(ALL_MODES) and parse_modes("messages, all") == list(ALL_MODES)
    assert parse_modes("messages,chat-anthropic") == ["chat-anthropic", "messages"]
    assert parse_modes("messages->openai,chat→anthropic,chat") == [
        CHAT_MODE, "messages-openai", "chat-anthropic"]
    assert parse_modes("messages pass-through") == ["messages"]
    with pytest.raises(ValueError, match="chatty"):
        parse_modes("chat,chatty")


def test_a_cells_figures_are_the_worker_and_the_tree_and_the_excess_over_direct() -> None:
    k1 = {"cpu_us_per_call": 500, BY_PROCESS: {"redis-1w": 450, "redis-1w (its quota sync)": 50}}
    k200 = {"cpu_us_per_call": 4_700, BY_PROCESS: {"redis-1w": 4_430, "redis-1w (its quota sync)": 270}}
    cell = stream_cpu_cell(k1, k200, "redis-1w")
    assert (cell["us_per_chunk"], cell["us_per_chunk_tree"]) == (20.0, 21.1)  # 3,980 and 4,200 over 199
    alone = stream_cpu_cell({"cpu_us_per_call": 400}, {"cpu_us_per_call": 2_390}, "embedded")
    assert alone["us_per_chunk"] == alone["us_per_chunk_tree"] == 10.0
    ttfb = ttfb_cell([2.0, 3.0, 9.0], [0.5, 1.0, 4.0])
    assert ttfb == {"n": 3, "p50": 3.0, "p99": 9.0, "added_p50": 2.0, "added_p99": 5.0}
