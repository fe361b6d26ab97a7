"""In-process backend for embedded mode (one process): the same semantics as Redis, in dictionaries.

Time is `time.monotonic` unless a clock is injected (tests move it).

Like Redis, an expired key is gone even if nobody reads it again: every `SWEEP_EVERY` writes, the expired
entries are dropped, so keys an anonymous caller makes us write (rate-limit counters per IP, login-failure
counters, cached "no such key" records) cost memory only while they live.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence

from backend.base import (
    MAX_AHEAD_NS,
    MAX_WAIT_NS,
    NO_LIMIT,
    SUBSCRIBED,
    Limit,
    RateResult,
    active_limits,
)
from backend.versions import NAMES, Versions

SWEEP_EVERY = 1024


class MemoryBackend:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._values: dict[str, tuple[float, float]] = {}  # key -> (value, expires_at or inf)
        self._texts: dict[str, tuple[str, float]] = {}  # key -> (text, expires_at)
        self._subscribers: dict[str, set[asyncio.Queue[tuple[str, str]]]] = {}
        self._versions: dict[str, int] = dict.fromkeys(NAMES, 0)
        self._writes = 0

    def _wrote(self) -> None:
        """Count a write; every SWEEP_EVERY writes drop what has expired (amortised O(1) per write)."""
        self._writes += 1
        if self._writes < SWEEP_EVERY:
            return
        self._writes = 0
        now = self._clock()
        self._values = {k: v for k, v in self._values.items() if v[1] > now}
        self._texts = {k: v for k, v in self._texts.items() if v[1] > now}

    def key_count(self) -> int:
        """Keys held, expired or not (what the sweep bounds)."""
        return len(self._values) + len(self._texts)

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
        if limit < 1 or period <= 0:
            raise ValueError("gcra: limit must be ≥ 1 and period > 0")
        return await self.gcra_many([Limit(key, limit, period, cost)])

    async def gcra_many(self, limits: Sequence[Limit]) -> RateResult:
        return self.admit_now(limits)

    async def gcra_charge(self, *limits: Limit) -> None:
        self.charge_now(limits)

    def admit_now(self, limits: Sequence[Limit]) -> RateResult:
        """`gcra_many` without an await: usable inside another atomic in-process step (the in-process
        quota store's reserve)."""
        active = active_limits(limits)
        if not active:
            return RateResult(True, NO_LIMIT, 0.0)
        return self._run_gcra(active, force=False)

    def charge_now(self, limits: Sequence[Limit]) -> None:
        """`gcra_charge` without an await (the in-process quota store's settle)."""
        active = [limit for limit in active_limits(limits) if limit.cost > 0]
        if active:
            self._run_gcra(active, force=True)

    def _run_gcra(self, limits: list[Limit], *, force: bool) -> RateResult:
        """The arithmetic of gcra_multi.lua, in whole nanoseconds (float seconds would make the last unit
        of a burst miss by one ulp); no await inside, so it is atomic on the event loop."""
        now = round(self._clock() * 1e9)
        after: list[int] = []
        left: int | None = None
        free: int | None = None
        retry, refused_by = 0, None
        for limit in limits:
            interval = limit.interval_ns
            burst = limit.count * interval
            stored = self._get(limit.key)
            ahead = 0 if stored is None else max(0, int(stored) - now)
            free_i = max(0, (burst - ahead) // interval)
            free = free_i if free is None else min(free, free_i)
            wait = min(ahead + interval * max(1, limit.cost) - burst, MAX_WAIT_NS)
            if not force and wait > 0:
                if wait > retry:
                    retry, refused_by = wait, limit.key
                continue
            charged = ahead + interval * limit.cost
            if force:
                charged = min(charged, max(burst, MAX_AHEAD_NS))
            after.append(charged)
            left_i = max(0, (burst - charged) // interval)
            left = left_i if left is None else min(left, left_i)
        if refused_by is not None:
            return RateResult(False, free or 0, retry / 1e9, refused_by)
        for limit, charged in zip(limits, after, strict=True):
            if limit.cost > 0:
                tat = now + charged
                self._values[limit.key] = (tat, tat / 1e9)
                self._wrote()
        return RateResult(True, left or 0, 0.0)

    async def incr(self, key: str, ttl: float) -> int:
        current = self._get(key)
        if current is None:
            self._values[key] = (1, self._clock() + ttl)
            self._wrote()
            return 1
        expires = self._values[key][1]
        self._values[key] = (current + 1, expires)
        return int(current + 1)

    async def get_int(self, key: str) -> int:
        value = self._get(key)
        return int(value) if value is not None else 0

    async def ttl(self, key: str) -> float:
        if self._get(key) is not None:
            return max(0.0, self._values[key][1] - self._clock())
        if await self.get_text(key) is not None:  # one key space, as in Redis
            return max(0.0, self._texts[key][1] - self._clock())
        return 0.0

    async def delete(self, *keys: str) -> None:
        for key in keys:
            self._values.pop(key, None)
            self._texts.pop(key, None)

    async def get_text(self, key: str) -> str | None:
        item = self._texts.get(key)
        if item is None or item[1] <= self._clock():
            self._texts.pop(key, None)
            return None
        return item[0]

    async def set_text(self, key: str, value: str, ttl: float) -> None:
        self._values.pop(key, None)  # one key space, as in Redis: SET replaces whatever was there
        self._texts[key] = (value, self._clock() + ttl)
        self._wrote()

    async def set_text_if_absent(self, key: str, value: str, ttl: float) -> bool:
        if self._get(key) is not None or await self.get_text(key) is not None:  # one key space
            return False
        await self.set_text(key, value, ttl)
        return True

    async def delete_if_equal(self, key: str, value: str) -> bool:
        if await self.get_text(key) != value:
            return False
        self._texts.pop(key, None)
        return True

    async def take_text(self, key: str) -> str | None:
        value = await self.get_text(key)
        self._texts.pop(key, None)
        return value

    def versions_now(self) -> Versions:
        v = self._versions
        return (v[NAMES[0]], v[NAMES[1]], v[NAMES[2]])

    async def versions(self) -> Versions:
        return self.versions_now()

    async def bump(self, name: str) -> int:
        self._versions[name] += 1
        return self._versions[name]

    async def get_text_versioned(self, key: str, name: str) -> tuple[str | None, int]:
        return await self.get_text(key), self._versions[name]

    async def set_text_if_version(self, key: str, value: str, ttl: float, name: str, version: int) -> bool:
        if self._versions[name] != version:
            return False
        await self.set_text(key, value, ttl)
        return True

    async def publish(self, channel: str, message: str) -> None:
        for queue in self._subscribers.get(channel, ()):
            queue.put_nowait((channel, message))

    async def subscribe(self, *channels: str) -> AsyncIterator[tuple[str, str]]:
        queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        for channel in channels:
            self._subscribers.setdefault(channel, set()).add(queue)
        try:
            yield "", SUBSCRIBED
            while True:
                yield await queue.get()
        finally:
            for channel in channels:
                self._subscribers.get(channel, set()).discard(queue)

    async def close(self) -> None:
        self._values.clear()
