"""In-process backend for embedded mode (one process): the same semantics as Redis, in dictionaries.

Time is `time.monotonic` unless a clock is injected (tests move it).
"""

from __future__ import annotations

import asyncio
import math
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
        now = self._clock()
        interval = period / limit
        tat = self._get(key)
        if tat is None or tat < now:
            tat = now
        new_tat = tat + interval * cost
        diff = now - (new_tat - limit * interval)
        if diff < 0:
            remaining = max(0, math.floor((now - (tat - limit * interval)) / interval))
            return RateResult(False, remaining, -diff)
        self._values[key] = (new_tat, new_tat)
        return RateResult(True, math.floor(diff / interval + 1e-9), 0.0)

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
