"""The quota sync's partition leases (quota/leases.py) on the real Redis and on a Redis Cluster (the leases
of the partitions live in as many slots): the live syncs share the partitions fairly and never hold one
twice, a stopped sync's partitions are taken over at once, a dead one's after its leases time out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from backend.base import BackendUnavailable
from backend.redis import RedisBackend
from quota.leases import PartitionLeases
from tests.redis_cluster import cluster_backend
from tests.services import REDIS_URL
from tests.test_e2e_serve import free_port

HANG = 30.0  # seconds; bounds a hang only


@pytest.fixture(params=["redis", "cluster"])
def chosen(request: pytest.FixtureRequest) -> RedisBackend:
    """The one Redis under the test's `redis_prefix`, or the session's cluster under its `cluster_prefix`
    (a plain fixture: an async one cannot ask for the async `redis_prefix` by name)."""
    if request.param == "cluster":
        return cluster_backend(request)
    return RedisBackend(REDIS_URL, request.getfixturevalue("redis_prefix"))


@pytest.fixture
async def backend(chosen: RedisBackend) -> AsyncIterator[RedisBackend]:
    yield chosen
    await chosen.close()


async def settle(*syncs: PartitionLeases) -> list[list[int]]:
    """Refresh each sync in turn until none changes its holding (a few passes); what each holds."""
    held = [await s.refresh() for s in syncs]
    async with asyncio.timeout(HANG):
        while True:
            again = [await s.refresh() for s in syncs]
            if again == held:
                return held
            held = again


async def test_two_syncs_share_the_partitions_and_never_hold_one_twice(backend: RedisBackend) -> None:
    a, b = PartitionLeases(backend), PartitionLeases(backend)
    assert await a.refresh() == list(range(16))  # alone: every partition
    mine, theirs = await settle(a, b)
    assert len(mine) == len(theirs) == 8 and not set(mine) & set(theirs)
    holders = await a.holders()
    assert {p for p, t in holders.items() if t == a.token} == set(mine)
    assert {p for p, t in holders.items() if t == b.token} == set(theirs)
    c = PartitionLeases(backend)
    shares = await settle(a, b, c)
    assert all(len(s) <= 6 for s in shares)  # ceil(16 / 3) at most each …
    assert sorted(p for s in shares for p in s) == list(range(16))  # … and each partition once
    await c.release()
    await a.release()  # stopped: gives its leases back and leaves the heartbeat set
    assert (await settle(b))[0] == list(range(16))


async def test_a_dead_syncs_partitions_are_taken_over_after_its_leases_time_out(backend: RedisBackend
                                                                                 ) -> None:
    dead, survivor = PartitionLeases(backend, lease_seconds=0.5), PartitionLeases(backend, lease_seconds=0.5)
    await dead.refresh()
    lost, kept = await settle(dead, survivor)
    assert len(lost) == len(kept) == 8
    # `dead` stops renewing (killed): its beat and leases expire, and the survivor claims them
    async with asyncio.timeout(HANG):
        while len(await survivor.refresh()) < 16:
            await asyncio.sleep(0.05)
    assert set(await survivor.holders()) == set(range(16))
    assert set((await survivor.holders()).values()) == {survivor.token}
    assert await dead.refresh() == []  # its renewals find the leases gone; all are held


async def test_a_failed_lease_call_is_told_to_the_backends_error_observer() -> None:
    """The leases' Redis calls are bounded and counted by their backend, like the store's: a server that
    refuses the connection is BackendUnavailable, and the backend's `on_error` hears of it."""
    seen: list[str] = []
    backend = RedisBackend(f"redis://127.0.0.1:{free_port()}/0", "t:leases-down:", timeout=1.0,
                           on_error=seen.append)
    try:
        with pytest.raises(BackendUnavailable):
            await PartitionLeases(backend).refresh()
        assert seen == ["connection"]
    finally:
        await backend.close()
