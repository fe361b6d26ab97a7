"""In-process backend for embedded mode (one process): the same semantics as Redis, in dictionaries.

Time is `time.monotonic` unless a clock is injected (tests move it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

from quota.backends.base import RateResult


class MemoryBackend:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._values: dict[str, tuple[float, float]] = {}  # key -> (value, expires_at or inf)
        self._subscribers: dict[str, set[asyncio.Queue[tuple[str, str]]]] = {}

    def _get(self, key: str) -> float | None:
        item = self._values.get(key)
        if item is None:
            return None
        if item[1] <= self._clock():
            del self._values[key]
            return None
        return item[0]

    async def ping(self) -> None:
        return None

    async def gcra(self, key: str, limit: int, period: float, cost: int = 1) -> RateResult:
        # Whole nanoseconds: float seconds would make the last unit of a burst miss by one ulp.
        if limit < 1 or period <= 0:
            raise ValueError("gcra: limit must be ≥ 1 and period > 0")
        now = round(self._clock() * 1e9)
        interval = max(1, round(period * 1e9 / limit))
        burst = limit * interval
        stored = self._get(key)
        tat = now if stored is None or stored < now else int(stored)
        new_tat = tat + interval * cost
        diff = now - (new_tat - burst)
        if diff < 0:
            remaining = max(0, (now - (tat - burst)) // interval)
            return RateResult(False, remaining, -diff / 1e9)
        self._values[key] = (new_tat, new_tat / 1e9)
        return RateResult(True, diff // interval, 0.0)

    async def incr(self, key: str, ttl: float) -> int:
        current = self._get(key)
        if current is None:
            self._values[key] = (1, self._clock() + ttl)
            return 1
        expires = self._values[key][1]
        self._values[key] = (current + 1, expires)
        return int(current + 1)

    async def get_int(self, key: str) -> int:
        value = self._get(key)
        return int(value) if value is not None else 0

    async def ttl(self, key: str) -> float:
        if self._get(key) is None:
            return 0.0
        return max(0.0, self._values[key][1] - self._clock())

    async def delete(self, *keys: str) -> None:
        for key in keys:
            self._values.pop(key, None)

    async def publish(self, channel: str, message: str) -> None:
        for queue in self._subscribers.get(channel, ()):
            queue.put_nowait((channel, message))

    async def subscribe(self, *channels: str) -> AsyncIterator[tuple[str, str]]:
        queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        for channel in channels:
            self._subscribers.setdefault(channel, set()).add(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            for channel in channels:
                self._subscribers.get(channel, set()).discard(queue)

    async def close(self) -> None:
        self._values.clear()
