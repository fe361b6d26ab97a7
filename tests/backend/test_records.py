"""The shared record cache: loads from the loader once, serves from the shared copy and the memo, and an
invalidation on one worker is seen by every other worker within a second (in-process and on Redis)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from backend.base import Backend
from backend.broadcasts import Broadcasts
from backend.memory import MemoryBackend
from backend.records import RecordCache
from backend.redis import RedisBackend
from tests.redis_cluster import cluster_backend
from tests.services import REDIS_URL


@pytest.fixture(params=["memory", "redis", "cluster"])
async def backends(request: pytest.FixtureRequest, redis_prefix: str
                   ) -> AsyncIterator[tuple[Backend, Backend]]:
    """Two workers' views of one store."""
    if request.param == "memory":
        one = MemoryBackend()
        yield one, one
        return
    if request.param == "cluster":
        a, b = cluster_backend(request), cluster_backend(request)
    else:
        a, b = RedisBackend(REDIS_URL, redis_prefix), RedisBackend(REDIS_URL, redis_prefix)
    yield a, b
    await a.close()
    await b.close()


def cache(backend: Backend, memo_ttl: float = 30.0) -> RecordCache[dict[str, Any]]:
    return RecordCache(backend, "thing", encode=lambda v: v, decode=lambda d: d, memo_ttl=memo_ttl)


async def listen(backend: Backend, c: RecordCache[Any]) -> None:
    broadcasts = Broadcasts(backend)
    c.listen(broadcasts)
    await broadcasts.listen()


async def test_a_record_is_loaded_once_and_then_shared(backends: tuple[Backend, Backend]) -> None:
    a, b = backends
    calls = 0

    async def load() -> dict[str, Any]:
        nonlocal calls
        calls += 1
        return {"status": 1}

    assert await cache(a).get(7, load) == {"status": 1}
    assert await cache(b).get(7, load) == {"status": 1}  # the other worker finds the shared copy
    assert calls == 1


async def test_absent_records_are_cached_until_invalidated(backends: tuple[Backend, Backend]) -> None:
    a, _ = backends
    c = cache(a)
    value: dict[str, Any] | None = None
    calls = 0

    async def load() -> dict[str, Any] | None:
        nonlocal calls
        calls += 1
        return value

    assert await c.get("k", load) is None
    assert await c.get("k", load) is None
    assert calls == 1
    value = {"status": 1}
    await c.invalidate("k")  # what creating the record does
    assert await c.get("k", load) == {"status": 1}


async def test_an_invalidation_reaches_another_worker_within_a_second(
        backends: tuple[Backend, Backend]) -> None:
    a, b = backends
    here, there = cache(a), cache(b)
    current = {"status": 1}

    async def load() -> dict[str, Any]:
        return dict(current)

    listener = asyncio.create_task(listen(b, there))
    await asyncio.sleep(0.2)  # subscribed
    try:
        assert await there.get(1, load) == {"status": 1}  # memoized for 30 s on the other worker
        current["status"] = 2
        await here.invalidate(1)
        for _ in range(20):
            if await there.get(1, load) == {"status": 2}:
                break
            await asyncio.sleep(0.05)
        assert await there.get(1, load) == {"status": 2}
    finally:
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)


async def test_a_read_racing_an_invalidation_does_not_keep_the_stale_value(
        backends: tuple[Backend, Backend]) -> None:
    a, _ = backends
    c = cache(a)
    gate = asyncio.Event()

    async def slow_stale() -> dict[str, Any]:
        await gate.wait()
        return {"status": 1}  # read before the change committed

    reader = asyncio.create_task(c.get(3, slow_stale))
    await asyncio.sleep(0.05)
    await c.invalidate(3)  # the change commits while the read is in flight
    gate.set()
    assert await reader == {"status": 1}

    async def fresh() -> dict[str, Any]:
        return {"status": 2}

    assert await c.get(3, fresh) == {"status": 2}
