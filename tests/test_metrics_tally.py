"""The buffered counters and histograms of the model-call path (server/metrics/tally.py) write exactly what
prometheus-client's own `inc` and `observe` would have, once flushed, and nothing before."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from server.metrics import tally

BUCKETS = (0.001, 0.01, 0.1, 1.0, 10.0)

amounts = st.lists(st.one_of(st.floats(min_value=-1.0, max_value=100.0, allow_nan=False),
                             st.sampled_from([0.0, *BUCKETS])), max_size=40)


def pair() -> tuple[CollectorRegistry, Histogram, Counter, CollectorRegistry, Histogram, Counter]:
    direct, buffered = CollectorRegistry(), CollectorRegistry()
    return (direct, Histogram("t_seconds", "h", ("k",), buckets=BUCKETS, registry=direct),
            Counter("t_calls", "c", ("k",), registry=direct),
            buffered, Histogram("t_seconds", "h", ("k",), buckets=BUCKETS, registry=buffered),
            Counter("t_calls", "c", ("k",), registry=buffered))


@given(first=amounts, second=amounts)
def test_flushed_figures_equal_the_direct_ones(first: list[float], second: list[float]) -> None:
    direct, histogram, counter, buffered, b_histogram, b_counter = pair()
    histogram.labels("a"), counter.labels("a")  # a child from the start on both sides
    seconds = tally.BufferedHistogram(b_histogram.labels("a"))
    calls = tally.BufferedCounter(b_counter.labels("a"))
    for batch in (first, second):  # two flushes: the buffers start again from zero after one
        for amount in batch:
            histogram.labels("a").observe(amount)
            counter.labels("a").inc(abs(amount))
            seconds.observe(amount)
            calls.inc(abs(amount))
        tally.flush()
        got, want = _samples(buffered), _samples(direct)
        assert got.keys() == want.keys()
        assert all(math.isclose(got[k], want[k], rel_tol=1e-9, abs_tol=1e-9) for k in want), (got, want)


def test_nothing_is_written_before_a_flush() -> None:
    _, _, _, buffered, b_histogram, b_counter = pair()
    seconds = tally.BufferedHistogram(b_histogram.labels("a"))
    calls = tally.BufferedCounter(b_counter.labels("a"))
    seconds.observe(0.05)
    calls.inc()
    assert buffered.get_sample_value("t_seconds_count", {"k": "a"}) == 0.0
    assert buffered.get_sample_value("t_calls_total", {"k": "a"}) == 0.0
    tally.flush()
    assert buffered.get_sample_value("t_seconds_count", {"k": "a"}) == 1.0
    assert buffered.get_sample_value("t_seconds_bucket", {"k": "a", "le": "0.1"}) == 1.0
    assert buffered.get_sample_value("t_seconds_bucket", {"k": "a", "le": "0.01"}) == 0.0
    assert buffered.get_sample_value("t_calls_total", {"k": "a"}) == 1.0


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample but the creation times."""
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in registry.collect() for sample in family.samples
            if not sample.name.endswith("_created")}


def test_the_declared_text_is_unchanged_by_buffering() -> None:
    """The exposition of a flushed buffered histogram is the direct one's, byte for byte."""
    direct, histogram, _, buffered, b_histogram, _ = pair()
    seconds = tally.BufferedHistogram(b_histogram.labels("a"))
    for amount in (0.0005, 0.001, 0.5, 3.0, 50.0):
        histogram.labels("a").observe(amount)
        seconds.observe(amount)
    tally.flush()
    strip = [line for line in generate_latest(direct).splitlines() if b"_created" not in line]
    assert [line for line in generate_latest(buffered).splitlines() if b"_created" not in line] == strip
