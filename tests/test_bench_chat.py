"""The pure pieces of the chat benchmark (scripts/bench_chat.py, scripts/bench_chat_streams.py): the
percentile, the delay reader whatever the reads, the fixed replies as Tollway cuts them, and that every
set-up's requests reach the reply meant for their model. No timing is asserted: the figures are the
script's to print."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scripts.bench_chat import chat_fixture
from scripts.bench_chat_streams import (
    CHAT_PATH,
    EVENTS,
    PACED,
    PLAIN,
    PREFIXES,
    Stamps,
    chat_replies,
    chunk,
    event,
    litellm_config,
    per_chunk_us,
    percentile,
    stream_body,
    usage_chunk,
)
from scripts.bench_env import MODERATION, fixed_locations
from server.upstream.formats.openai_compat import endpoint
from server.upstream.formats.sse import Events, data_of
from tests.test_providers import Channel

UPSTREAM, PACED_URL = "http://127.0.0.1:8001", "http://127.0.0.1:8002"




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
