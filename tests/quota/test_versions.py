"""Version counters of the cached shared state (backend/versions.py), one suite over both backends: they
only grow (also after Redis lost them), the reservation returns them, a shared record copy read before a
change cannot be stored after it, and a worker's tracker reloads exactly what is behind, once. A broadcast
is only a hint (the tracker reads the counters and never adopts the message's number), a store restored
from an older snapshot is followed after the resubscription, and two deployments on other databases of
one Redis server do not hear each other's broadcasts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from backend.base import SUBSCRIBED, Backend
from backend.broadcasts import CHANNEL, Broadcasts
from backend.memory import MemoryBackend
from backend.records import RecordCache
from backend.redis import RedisBackend
from backend.versions import CHANNELS, NAMES, OPTIONS, RECORDS, Versions, VersionTracker
from quota.backends.memory_quota import MemoryQuotaStore
from quota.backends.redis_quota import RedisQuotaStore
from quota.store import QuotaStore
from tests.redis_cluster import cluster_backend
from tests.services import REDIS_URL, redis_db_url

HANG = 30.0  # seconds; bounds a hang only


def _backend(request: pytest.FixtureRequest, prefix: str) -> Backend:
    if request.param == "memory":
        return MemoryBackend()
    if request.param == "cluster":
        return cluster_backend(request)
    return RedisBackend(REDIS_URL, prefix)


@pytest.fixture(params=["memory", "redis", "cluster"])
async def backend(request: pytest.FixtureRequest, redis_prefix: str) -> AsyncIterator[Backend]:
    """Each backend; Redis and the Redis Cluster under the test's fresh key prefix (purged by the
    `redis_prefix` and `cluster_prefix` fixtures)."""
    chosen = _backend(request, redis_prefix)
    yield chosen
    await chosen.close()


@pytest.fixture(params=["memory", "redis"])
async def store_backend(request: pytest.FixtureRequest, redis_prefix: str) -> AsyncIterator[Backend]:
    """`backend` for the tests that run the quota store too: not on a cluster yet (its keys are not
    partitioned by account: issue 26)."""
    chosen = _backend(request, redis_prefix)
    yield chosen
    await chosen.close()


def store_for(backend: Backend) -> QuotaStore:
    if isinstance(backend, RedisBackend):
        return RedisQuotaStore(backend)
    assert isinstance(backend, MemoryBackend)
    return MemoryQuotaStore(versions=backend.versions_now)


async def test_bump_counts_up_and_versions_reads_all(backend: Backend) -> None:
    start = await backend.versions()
    first = await backend.bump(CHANNELS)
    second = await backend.bump(CHANNELS)
    options = await backend.bump(OPTIONS)
    assert second == first + 1
    now = await backend.versions()
    assert now[0] == second and now[1] == options and now[2] >= start[2]
    assert now[0] > start[0] and now[1] > start[1]


async def test_counters_never_fall_back_after_redis_lost_them(redis_prefix: str) -> None:
    redis = RedisBackend(REDIS_URL, redis_prefix)
    try:
        before = max([await redis.bump(name) for name in NAMES])
        await redis.client.delete(redis.versions_key)  # what a restart without persistence does
        assert await redis.versions() == (0, 0, 0)  # nothing newer than what a worker holds: no reload
        after = await redis.bump(RECORDS)
        assert after > before
        assert all(v > before for v in await redis.versions())  # every counter restarted above
    finally:
        await redis.close()


async def test_the_reservation_returns_the_counters(store_backend: Backend) -> None:
    backend = store_backend
    store = store_for(backend)
    await store.load_locked("user", 1, 1_000, "0-0")
    await store.load_locked("key", 2, 1_000, "0-0", owner=1)
    await backend.bump(CHANNELS)
    await backend.bump(RECORDS)
    ok, _, _, _, versions, _ = await store.reserve("h1", 1, 2, True, 10, 60_000)
    assert ok and versions == await backend.versions()
    refused, _, _, _, _, _ = await store.reserve("h2", 1, 2, True, 10**9, 60_000)
    assert not refused


async def copies(redis: RedisBackend) -> list[Versions]:
    out = []
    for copy in redis.version_copies:
        v = await redis.client.hmget(copy, list(NAMES))
        out.append((int(v[0] or 0), int(v[1] or 0), int(v[2] or 0)))
    return out


async def test_a_bump_reaches_the_reservations_of_every_partition(redis_prefix: str) -> None:
    """Each partition's reservations read its own copy of the counters (no extra round trip, one slot);
    a writer's bump raises every copy before it answers: read-your-writes in every partition."""
    redis = RedisBackend(REDIS_URL, redis_prefix)
    store = RedisQuotaStore(redis)
    try:
        users = list(range(1, store.partitions + 1))
        assert {store.partition(u) for u in users} == set(range(store.partitions))
        for user in users:
            await store.load_locked("user", user, 10**6, "0-0")
        for round_ in range(3):
            await redis.bump(NAMES[round_])
            current = await redis.versions()
            for user in users:
                ok, _, _, _, seen, _ = await store.reserve(f"h{round_}-{user}", user, 0, False, 1, 60_000)
                assert ok and seen == current
    finally:
        await redis.close()


async def test_concurrent_bumps_leave_every_copy_at_the_counters(redis_prefix: str) -> None:
    redis = RedisBackend(REDIS_URL, redis_prefix)
    try:
        await asyncio.gather(*(redis.bump(NAMES[n % 3]) for n in range(30)))
        assert await copies(redis) == [await redis.versions()] * redis.partitions
        await redis.client.delete(redis.versions_key)  # the counters lost (a partial restore, say)
        await redis.bump(OPTIONS)
        assert await copies(redis) == [await redis.versions()] * redis.partitions  # raised above
    finally:
        await redis.close()


async def test_a_copy_read_before_a_change_is_not_stored_after_it(backend: Backend) -> None:
    text, version = await backend.get_text_versioned("rec:x:1", RECORDS)
    assert text is None
    assert await backend.set_text_if_version("rec:x:1", "fresh", 30, RECORDS, version)
    assert await backend.get_text("rec:x:1") == "fresh"
    await backend.delete("rec:x:1")
    _, version = await backend.get_text_versioned("rec:x:1", RECORDS)
    await backend.bump(RECORDS)  # another worker changed a record meanwhile
    assert not await backend.set_text_if_version("rec:x:1", "stale", 30, RECORDS, version)
    assert await backend.get_text("rec:x:1") is None


async def test_a_record_loaded_while_another_worker_changes_it_is_not_shared(backend: Backend) -> None:
    """Worker A reads SQL (old row); worker B commits, drops the shared copy, bumps; A's old row must not
    become the shared copy that B's next read (or any worker's) would trust for minutes."""
    row = {"v": "old"}
    a: RecordCache[dict[str, Any]] = RecordCache(backend, "thing", encode=dict, decode=dict, memo_ttl=0)
    b: RecordCache[dict[str, Any]] = RecordCache(backend, "thing", encode=dict, decode=dict, memo_ttl=0)

    async def slow_old_read() -> dict[str, Any]:
        seen = dict(row)
        row["v"] = "new"  # B's change commits while A still holds the old row …
        await b.invalidate(1)  # … and B announces it
        return seen

    assert await a.get(1, slow_old_read) == {"v": "old"}  # A's own answer was taken before the change

    async def fresh_read() -> dict[str, Any]:
        return dict(row)

    assert await b.get(1, fresh_read) == {"v": "new"}


async def primed(backend: Backend) -> None:
    """Counters that exist (the first bump on an empty Redis starts all three above zero at once)."""
    for name in NAMES:
        await backend.bump(name)


class Recorder:
    def __init__(self, delay: float = 0.0) -> None:
        self.calls = 0
        self.delay = delay
        self.fail = False

    async def __call__(self) -> None:
        self.calls += 1
        await asyncio.sleep(self.delay)
        if self.fail:
            raise RuntimeError("database down")


async def test_the_tracker_reloads_only_what_is_behind_and_once(backend: Backend) -> None:
    await primed(backend)
    tracker = VersionTracker(backend)
    channels, options, records = Recorder(0.05), Recorder(), Recorder()
    tracker.register(CHANNELS, channels)
    tracker.register(OPTIONS, options)
    tracker.register(RECORDS, records)
    await tracker.start()
    assert (channels.calls, options.calls, records.calls) == (1, 1, 1)
    basis = tracker.held()
    await backend.bump(CHANNELS)
    seen = await backend.versions()
    assert tracker.newer(seen, basis)
    results = await asyncio.gather(*(tracker.catch_up(seen) for _ in range(10)))
    assert all(results)
    assert (channels.calls, options.calls, records.calls) == (2, 1, 1)  # ten callers, one reload
    assert tracker.held() == seen and not tracker.newer(seen, tracker.held())


async def test_refresh_reports_a_change_made_after_the_decision_even_if_already_reloaded(
        backend: Backend) -> None:
    """The race the basis exists for: a decision taken on the old table, the broadcast's reload finishes
    before the check — comparing with what the worker holds by then would call the decision current."""
    await primed(backend)
    tracker = VersionTracker(backend)
    tracker.register(CHANNELS, Recorder())
    await tracker.start()
    basis = tracker.held()  # the decision is taken here, on the old table
    await backend.bump(CHANNELS)
    await tracker.hinted()  # the broadcast's reload completes first
    assert await tracker.refresh(since=basis) is True
    assert await tracker.refresh() is False


async def test_a_failed_reload_keeps_the_old_version_and_is_retried_later(backend: Backend) -> None:
    await primed(backend)
    clock = [100.0]
    tracker = VersionTracker(backend, clock=lambda: clock[0])
    channels = Recorder()
    tracker.register(CHANNELS, channels)
    await tracker.start()
    held = tracker.held()
    channels.fail = True
    await backend.bump(CHANNELS)
    assert await tracker.refresh() is True
    assert tracker.held() == held and channels.calls == 2
    await tracker.refresh()  # within a second of the failure: not hammered
    assert channels.calls == 2
    channels.fail = False
    clock[0] += 1.5
    await tracker.refresh()
    assert channels.calls == 3 and tracker.held() == await backend.versions()


async def test_a_broadcast_is_a_hint_and_its_number_is_never_adopted(backend: Backend) -> None:
    """On a version broadcast the tracker reads the counters and catches up to those. A forged one with a
    huge number (or another deployment's) must not stop it from seeing its own later changes; one with a
    meaningless small number must not stop it from seeing the change it announces."""
    await primed(backend)
    tracker = VersionTracker(backend)
    channels, options = Recorder(), Recorder()
    tracker.register(CHANNELS, channels)
    tracker.register(OPTIONS, options)
    broadcasts = Broadcasts(backend)
    tracker.listen(broadcasts)
    await tracker.start()
    assert await broadcasts.dispatch(f"options:{10**18}")
    assert await broadcasts.dispatch(f"channels:{10**18}")
    assert tracker.held() == await backend.versions()  # what the store says, not what was heard
    for _ in range(3):
        await backend.bump(OPTIONS)  # another worker's change; its broadcast is lost
        calls = options.calls
        assert await tracker.refresh() is True
        assert options.calls == calls + 1
        await backend.bump(CHANNELS)  # another worker's change, and its hint with a number that means nothing
        calls = channels.calls
        assert await broadcasts.dispatch("channels:1")
        assert channels.calls == calls + 1
        assert tracker.held() == await backend.versions()


async def test_a_store_restored_from_an_older_snapshot_is_followed_after_the_resubscription(
        redis_prefix: str) -> None:
    """Redis comes back with the counters of an older snapshot: after the resubscription's resync the
    worker holds those, so the changes made from then on (numbered from the snapshot) are seen."""
    redis = RedisBackend(REDIS_URL, redis_prefix)
    try:
        await primed(redis)
        snapshot = await redis.versions()
        tracker = VersionTracker(redis)
        options = Recorder()
        tracker.register(OPTIONS, options)
        await tracker.start()
        for _ in range(5):
            await tracker.changed(OPTIONS)  # this worker's changes after the snapshot was taken
        await redis.client.hset(redis.versions_key, mapping=dict(zip(NAMES, map(str, snapshot), strict=True)))
        await tracker.resync()  # what the listener runs once it has subscribed again
        assert tracker.held() == snapshot
        await redis.bump(OPTIONS)  # another worker's change after the restart
        calls = options.calls
        assert await tracker.refresh() is True
        assert options.calls == calls + 1 and tracker.held() == await redis.versions()
    finally:
        await redis.close()


async def test_deployments_on_other_databases_of_one_server_do_not_hear_each_other(redis_prefix: str) -> None:
    """Redis pub/sub ignores the database number: the channel's name must carry it. Two deployments with
    the same key prefix in databases 13 and 14 (publishing creates no keys: nothing to clean there)."""
    one = RedisBackend(redis_db_url(13), redis_prefix)
    two = RedisBackend(redis_db_url(14), redis_prefix)
    heard = one.subscribe(CHANNEL)
    try:
        assert await anext(heard) == ("", SUBSCRIBED)

        for _ in range(int(HANG / 0.05)):  # the server has taken the subscription (bounds a hang only)
            if await one.client.pubsub_channels(f"{redis_prefix}*"):
                break
            await asyncio.sleep(0.05)
        await two.publish(CHANNEL, f"options:{10**18}")  # the other deployment's broadcast
        await one.publish(CHANNEL, "options:1")  # ours, published after it
        assert await asyncio.wait_for(anext(heard), HANG) == (CHANNEL, "options:1")
    finally:
        await heard.aclose()  # type: ignore[attr-defined]
        await one.close()
        await two.close()
