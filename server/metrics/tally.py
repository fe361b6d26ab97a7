"""The model-call path's counts, summed in memory and written to prometheus-client's values once per flush.

In multiprocess mode (`tollway serve`) every increment of a prometheus-client value writes to a
memory-mapped file under a lock: the writes a successful model call made cost more than the 5 % of its
CPU the metrics may take (docs/PERFORMANCE.md#figures-behind-the-code). So the figures every call touches
(HTTP requests, model calls, upstream attempts, tokens and quota, quota steps) go through `Buffered` counters
and histograms: the call adds to a number here (a histogram finds its bucket with `bisect`), and `flush`
writes each sum once — the workers flush every `FLUSH_INTERVAL` seconds (a named background task,
server/context.py) and when they stop, and a process flushes its own figures before it answers a scrape. So a
scrape may see another worker's counts up to `FLUSH_INTERVAL` late, and a process killed by SIGKILL loses at
most its last interval of counts (what a scrape saw is never lost, see server/metrics/__init__.py).

A histogram's sums are written to the buckets and the sum of its prometheus-client child (`_buckets`,
`_sum`): the library has no public call that adds several observations at once. tests/test_metrics_tally.py
checks that the result is exactly what `observe` for each value would have written.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

FLUSH_INTERVAL = 1.0
"""Seconds between two flushes of a worker."""

_pending: list[BufferedCounter | BufferedHistogram] = []  # every buffered child ever made (bounded labels)


class BufferedCounter:
    """A counter child whose increments are summed here until `flush`."""

    __slots__ = ("_child", "_count")

    def __init__(self, child: Any) -> None:
        self._child = child
        self._count = 0.0
        _pending.append(self)

    def inc(self, amount: float = 1.0) -> None:
        self._count += amount

    def write(self) -> None:
        if self._count:
            amount, self._count = self._count, 0.0
            self._child.inc(amount)


class BufferedHistogram:
    """A histogram child whose observations are counted per bucket here until `flush`."""

    __slots__ = ("_bounds", "_child", "_counts", "_sum")

    def __init__(self, child: Any) -> None:
        self._child = child
        self._bounds: list[float] = list(child._upper_bounds)  # the last one is +Inf
        self._counts = [0] * len(self._bounds)
        self._sum = 0.0
        _pending.append(self)

    def observe(self, amount: float) -> None:
        # the first bucket whose upper bound is >= amount, as prometheus-client's `observe` chooses
        self._counts[bisect_left(self._bounds, amount)] += 1
        self._sum += amount

    def write(self) -> None:
        counts = self._counts
        if not any(counts):
            return
        self._counts, total, self._sum = [0] * len(counts), self._sum, 0.0
        self._child._sum.inc(total)
        for bucket, n in zip(self._child._buckets, counts, strict=True):
            if n:
                bucket.inc(n)


def flush() -> None:
    """Write every buffered count of this process to its prometheus-client value."""
    for buffered in _pending:
        buffered.write()
