"""One shared suite for the engine's storage backends, run against both implementations.

`MemoryBackend` (embedded mode) runs on an injected clock that the tests move; `RedisBackend` runs on the
real Redis at 127.0.0.1:6379 (and on a Redis Cluster of the test's own: tests/redis_cluster.py) under
the test's key prefix, where time passes for real (short periods and
`asyncio.sleep`). Nothing asserts on elapsed wall time: a test only waits long enough for the behaviour
it names to become due.

Covered: GCRA (burst of `limit`, refusal with `retry_after` ≈ period/limit, `remaining` counting down,
the `cost` argument, independent keys, replenishment), counters with a time to live (expiry set only on
creation, `ttl`, `get_int`, `delete`), text values with a time to live, "set if absent" and
"delete if equal" with the cluster lock built on them (`backend.locks.exclusive`), and publish/subscribe.
GCRA over several limits at once (`gcra_many`, `gcra_charge`) has its own two-backend suite in
test_ratelimit.py.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import redis.asyncio as aioredis

from backend.base import SUBSCRIBED, Backend, BackendUnavailable
from backend.locks import Busy, exclusive
from backend.memory import MemoryBackend
from backend.redis import RedisBackend
from tests.redis_cluster import cluster_backend
from tests.services import REDIS_URL

EPS = 1e-6  # Redis counts whole microseconds


class FakeClock:
    """A monotonic clock the tests move by hand."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Subject:
    """A backend under test, and how to let time pass for it."""

    name: str
    backend: Backend
    clock: FakeClock | None = None

    @property
    def real_time(self) -> bool:
        return self.clock is None

    async def wait(self, seconds: float) -> None:
        if self.clock is not None:
            self.clock.advance(seconds)
        else:
            await asyncio.sleep(seconds)


@pytest.fixture(params=["memory", "redis", "cluster"])
def backend_kind(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    """Which backend, and for Redis the test's key prefix (from the `redis_prefix` fixture; on the
    session's Redis Cluster, `cluster_prefix`)."""
    if request.param == "redis":
        prefix: str = request.getfixturevalue("redis_prefix")
        return "redis", prefix
    if request.param == "cluster":
        return "cluster", request.getfixturevalue("cluster_prefix")
    return "memory", None


@pytest.fixture
async def subject(backend_kind: tuple[str, str | None], request: pytest.FixtureRequest
                  ) -> AsyncIterator[Subject]:
    kind, prefix = backend_kind
    if kind == "memory":
        clock = FakeClock()
        memory = MemoryBackend(clock=clock)
        yield Subject("memory", memory, clock)
        await memory.close()
        return
    assert prefix is not None
    backend = cluster_backend(request) if kind == "cluster" else RedisBackend(REDIS_URL, prefix)
    try:
        yield Subject(kind, backend)
    finally:
        await backend.close()


# ---- GCRA --------------------------------------------------------------------------------------------

async def test_gcra_admits_the_burst_then_refuses(subject: Subject) -> None:
    b = subject.backend
    results = [await b.gcra("k", 5, 60) for _ in range(5)]
    assert [r.allowed for r in results] == [True] * 5
    assert [r.remaining for r in results] == [4, 3, 2, 1, 0]
    assert all(r.retry_after == 0 for r in results)

    refused = await b.gcra("k", 5, 60)
    assert refused.allowed is False
    assert refused.remaining == 0
    # the next unit frees up one emission interval (60 s / 5) after the first admission
    assert 12 - 1 < refused.retry_after <= 12 + EPS


async def test_gcra_refusal_does_not_consume(subject: Subject) -> None:
    b = subject.backend
    for _ in range(2):
        assert (await b.gcra("k", 2, 60)).allowed
    first = await b.gcra("k", 2, 60)
    second = await b.gcra("k", 2, 60)
    assert not first.allowed and not second.allowed
    assert second.retry_after <= first.retry_after  # refusals do not push the next admission back
    assert 30 - 1 < second.retry_after <= 30 + EPS


@pytest.mark.parametrize(("limit", "period"), [(3, 1), (3, 100), (7, 100), (180, 180), (20, 1200)])
async def test_gcra_fractional_intervals_admit_exactly_the_burst(subject: Subject, limit: int,
                                                                 period: float) -> None:
    """period / limit need not be a whole number of milliseconds (1 s / 3, 100 s / 7)."""
    b = subject.backend
    for key in ("a", "b", "c"):
        results = [await b.gcra(key, limit, period) for _ in range(limit)]
        assert all(r.allowed for r in results), (key, results)
        assert [r.remaining for r in results] == list(range(limit - 1, -1, -1))
        refused = await b.gcra(key, limit, period)
        assert not refused.allowed and refused.remaining == 0
        assert 0 < refused.retry_after <= period / limit + EPS


async def test_gcra_cost_takes_several_units(subject: Subject) -> None:
    b = subject.backend
    assert [(r.allowed, r.remaining) for r in [await b.gcra("k", 10, 100, cost=3) for _ in range(3)]] == [
        (True, 7), (True, 4), (True, 1),
    ]
    refused = await b.gcra("k", 10, 100, cost=3)
    assert refused.allowed is False and refused.remaining == 1
    # two more units must drain (2 × 10 s) before a cost of 3 fits
    assert 20 - 1 < refused.retry_after <= 20 + EPS
    last = await b.gcra("k", 10, 100, cost=1)
    assert last.allowed is True and last.remaining == 0


async def test_gcra_cost_above_the_limit_is_never_admitted(subject: Subject) -> None:
    result = await subject.backend.gcra("k", 3, 60, cost=4)
    assert result.allowed is False
    # and it consumed nothing
    assert (await subject.backend.gcra("k", 3, 60, cost=3)).allowed


async def test_gcra_keys_are_independent(subject: Subject) -> None:
    b = subject.backend
    for _ in range(2):
        assert (await b.gcra("one", 2, 60)).allowed
    assert not (await b.gcra("one", 2, 60)).allowed
    other = await b.gcra("two", 2, 60)
    assert other.allowed and other.remaining == 1


async def test_gcra_replenishes_one_unit_per_interval(subject: Subject) -> None:
    b = subject.backend
    for _ in range(2):
        assert (await b.gcra("k", 2, 1)).allowed
    refused = await b.gcra("k", 2, 1)
    assert not refused.allowed
    await subject.wait(refused.retry_after + 0.05)
    again = await b.gcra("k", 2, 1)
    assert again.allowed and again.remaining == 0
    assert not (await b.gcra("k", 2, 1)).allowed


async def test_gcra_full_burst_is_back_after_the_period(subject: Subject) -> None:
    b = subject.backend
    for _ in range(3):
        assert (await b.gcra("k", 3, 1)).allowed
    await subject.wait(1.1)
    results = [await b.gcra("k", 3, 1) for _ in range(3)]
    assert [(r.allowed, r.remaining) for r in results] == [(True, 2), (True, 1), (True, 0)]


async def test_gcra_on_memory_is_exact_with_the_injected_clock() -> None:
    clock = FakeClock()
    b = MemoryBackend(clock=clock)
    for _ in range(4):
        assert (await b.gcra("k", 4, 60)).allowed
    refused = await b.gcra("k", 4, 60)
    assert refused.retry_after == pytest.approx(15)
    clock.advance(14.9)
    assert not (await b.gcra("k", 4, 60)).allowed
    clock.advance(0.1)
    assert (await b.gcra("k", 4, 60)).allowed


# ---- counters ----------------------------------------------------------------------------------------

async def test_incr_counts_up_from_one(subject: Subject) -> None:
    b = subject.backend
    assert await b.get_int("c") == 0
    assert [await b.incr("c", 60) for _ in range(3)] == [1, 2, 3]
    assert await b.get_int("c") == 3
    assert await b.get_int("other") == 0


async def test_incr_sets_the_expiry_on_creation_only(subject: Subject) -> None:
    b = subject.backend
    assert await b.ttl("c") == 0
    await b.incr("c", 60)
    assert 59 < await b.ttl("c") <= 60 + EPS
    await subject.wait(0.5)
    await b.incr("c", 3600)  # an existing counter keeps its first expiry
    assert 58 < await b.ttl("c") < 60
    await b.incr("d", 3600)
    assert 3599 < await b.ttl("d") <= 3600 + EPS


async def test_counter_expires_and_starts_again(subject: Subject) -> None:
    b = subject.backend
    assert await b.incr("c", 0.3) == 1
    assert await b.incr("c", 0.3) == 2
    await subject.wait(0.5)
    assert await b.get_int("c") == 0
    assert await b.ttl("c") == 0
    assert await b.incr("c", 60) == 1
    assert 59 < await b.ttl("c") <= 60 + EPS


async def test_delete_removes_counters(subject: Subject) -> None:
    b = subject.backend
    await b.incr("a", 60)
    await b.incr("b", 60)
    await b.incr("keep", 60)
    await b.delete("a", "b", "missing")
    await b.delete()
    assert await b.get_int("a") == 0 and await b.get_int("b") == 0
    assert await b.ttl("a") == 0
    assert await b.get_int("keep") == 1
    assert await b.incr("a", 60) == 1


async def test_delete_resets_a_rate_limit(subject: Subject) -> None:
    b = subject.backend
    assert (await b.gcra("k", 1, 60)).allowed
    assert not (await b.gcra("k", 1, 60)).allowed
    await b.delete("k")
    assert (await b.gcra("k", 1, 60)).allowed


async def test_text_values_round_trip_and_expire(subject: Subject) -> None:
    b = subject.backend
    assert await b.get_text("t") is None
    await b.set_text("t", "hello · wörld", 60)
    assert await b.get_text("t") == "hello · wörld"
    assert 59 < await b.ttl("t") <= 60 + EPS
    await b.set_text("t", "replaced", 0.3)  # a set replaces the value and its expiry
    assert await b.get_text("t") == "replaced"
    assert 0 < await b.ttl("t") <= 0.3 + EPS
    await subject.wait(0.5)
    assert await b.get_text("t") is None
    assert await b.ttl("t") == 0
    await b.set_text("u", "x", 60)
    await b.delete("u")
    assert await b.get_text("u") is None


async def test_a_text_replaces_a_counter_of_the_same_key(subject: Subject) -> None:
    b = subject.backend
    await b.incr("k", 60)
    await b.set_text("k", "text", 30)
    assert await b.get_text("k") == "text"
    assert 29 < await b.ttl("k") <= 30 + EPS


async def test_set_if_absent_takes_a_free_key_only_and_expires(subject: Subject) -> None:
    b = subject.backend
    assert await b.set_text_if_absent("lock", "mine", 0.3)
    assert not await b.set_text_if_absent("lock", "theirs", 60)  # held: nothing changes
    assert await b.get_text("lock") == "mine"
    await subject.wait(0.5)
    assert await b.set_text_if_absent("lock", "theirs", 60)  # expired: free again
    await b.incr("counter", 60)
    assert not await b.set_text_if_absent("counter", "x", 60)  # one key space, as in Redis


async def test_delete_if_equal_deletes_only_its_own_value(subject: Subject) -> None:
    b = subject.backend
    await b.set_text("lock", "mine", 60)
    assert not await b.delete_if_equal("lock", "theirs")
    assert await b.get_text("lock") == "mine"
    assert await b.delete_if_equal("lock", "mine")
    assert await b.get_text("lock") is None
    assert not await b.delete_if_equal("lock", "mine")  # nothing left to delete


async def test_take_text_gives_the_value_to_exactly_one_of_many_takers(subject: Subject) -> None:
    b = subject.backend
    await b.set_text("secret", "s3", 60)
    taken = await asyncio.gather(*(b.take_text("secret") for _ in range(20)))
    assert taken.count("s3") == 1 and taken.count(None) == 19
    assert await b.get_text("secret") is None
    await b.set_text("short", "x", 0.2)
    await subject.wait(0.5)
    assert await b.take_text("short") is None  # expired: nothing to take


async def test_exclusive_admits_one_holder_and_releases_only_its_own(subject: Subject) -> None:
    b = subject.backend
    async with exclusive(b, "job", ttl=60):
        with pytest.raises(Busy):
            async with exclusive(b, "job", ttl=60):
                pass  # pragma: no cover - never entered
        async with exclusive(b, "other-job", ttl=60):
            pass  # another name is another lock
    async with exclusive(b, "job", ttl=0.3):  # released: free again
        await subject.wait(0.5)  # outlived its time to live: someone else takes it
        assert await b.set_text_if_absent("job", "someone-else", 60)
    assert await b.get_text("job") == "someone-else"  # the late release left their lock alone
    with pytest.raises(RuntimeError, match="boom"):
        async with exclusive(b, "job2", ttl=60):
            raise RuntimeError("boom")
    assert await b.get_text("job2") is None  # released on an error too


async def test_ping(subject: Subject) -> None:
    await subject.backend.ping()


# ---- publish / subscribe -----------------------------------------------------------------------------

class Listener:
    """Collects the messages a subscription yields, in a background task (the SUBSCRIBED markers are
    counted apart)."""

    def __init__(self, backend: Backend, *channels: str) -> None:
        self.received: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self.subscriptions = 0
        self._task = asyncio.get_running_loop().create_task(self._run(backend, channels))

    async def _run(self, backend: Backend, channels: tuple[str, ...]) -> None:
        async for item in backend.subscribe(*channels):
            if item == ("", SUBSCRIBED):
                self.subscriptions += 1
                continue
            await self.received.put(item)

    async def next(self, timeout: float = 5.0) -> tuple[str, str]:
        return await asyncio.wait_for(self.received.get(), timeout)

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def until_subscribed(backend: Backend, listener: Listener, channel: str) -> None:
    """A subscription starts asynchronously: publish a probe until the listener hears it."""
    async with asyncio.timeout(5):
        while True:
            await backend.publish(channel, "probe")
            with contextlib.suppress(TimeoutError):
                assert await listener.next(timeout=0.1) == (channel, "probe")
                break
    with contextlib.suppress(TimeoutError):  # drop probes still in flight
        while True:
            await listener.next(timeout=0.2)


async def test_publish_reaches_a_subscriber_in_order(subject: Subject) -> None:
    b = subject.backend
    listener = Listener(b, "news")
    try:
        await until_subscribed(b, listener, "news")
        for message in ("one", "two", "user:42"):
            await b.publish("news", message)
        assert [await listener.next() for _ in range(3)] == [
            ("news", "one"), ("news", "two"), ("news", "user:42"),
        ]
    finally:
        await listener.stop()


async def test_subscriber_hears_only_its_channels(subject: Subject) -> None:
    b = subject.backend
    listener = Listener(b, "a", "b")
    try:
        await until_subscribed(b, listener, "a")
        await until_subscribed(b, listener, "b")
        await b.publish("elsewhere", "not for you")
        await b.publish("b", "to b")
        await b.publish("a", "to a")
        # (in any order: on a cluster, messages of two channels may come through two nodes)
        assert {await listener.next(), await listener.next()} == {("b", "to b"), ("a", "to a")}
        with pytest.raises(TimeoutError):
            await listener.next(timeout=0.3)
    finally:
        await listener.stop()


async def test_every_subscriber_receives_the_message(subject: Subject) -> None:
    b = subject.backend
    first, second = Listener(b, "news"), Listener(b, "news")
    try:
        await until_subscribed(b, first, "news")
        await until_subscribed(b, second, "news")
        with contextlib.suppress(TimeoutError):  # probes meant for `second` also reached `first`
            while True:
                await first.next(timeout=0.2)
        await b.publish("news", "hello")
        assert await first.next() == ("news", "hello")
        assert await second.next() == ("news", "hello")
    finally:
        await first.stop()
        await second.stop()


# ---- Redis specifics: shared store, prefix, failures ---------------------------------------------------

async def test_redis_workers_on_one_prefix_share_state(redis_prefix: str) -> None:
    one, two = RedisBackend(REDIS_URL, redis_prefix), RedisBackend(REDIS_URL, redis_prefix)
    other = RedisBackend(REDIS_URL, redis_prefix + "other:")
    try:
        assert (await one.gcra("k", 2, 60)).allowed
        assert (await two.gcra("k", 2, 60)).allowed
        assert not (await one.gcra("k", 2, 60)).allowed
        assert (await other.gcra("k", 2, 60)).allowed  # another prefix is another namespace
        await one.incr("c", 60)
        assert await two.get_int("c") == 1
        assert await other.get_int("c") == 0

        listener = Listener(two, "invalidate")
        try:
            await until_subscribed(one, listener, "invalidate")
            await one.publish("invalidate", "options")
            assert await listener.next() == ("invalidate", "options")
        finally:
            await listener.stop()
    finally:
        for backend in (one, two, other):
            await backend.close()


async def test_redis_keys_live_under_the_prefix(redis_prefix: str) -> None:
    backend = RedisBackend(REDIS_URL, redis_prefix)
    raw = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        await backend.incr("counter", 60)
        await backend.gcra("rate", 5, 60)
        keys = sorted([k async for k in raw.scan_iter(match=f"{redis_prefix}*")])
        assert keys == [f"{redis_prefix}counter", f"{redis_prefix}rate"]
        assert await raw.get(f"{redis_prefix}counter") == "1"
    finally:
        await raw.aclose()
        await backend.close()


async def test_redis_unreachable_raises_backend_unavailable() -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    backend = RedisBackend(f"redis://127.0.0.1:{port}/0", "x:", timeout=0.5)
    try:
        async with asyncio.timeout(30):  # a hang guard, not a speed assertion
            with pytest.raises(BackendUnavailable):
                await backend.ping()
            with pytest.raises(BackendUnavailable):
                await backend.gcra("k", 1, 1)
            with pytest.raises(BackendUnavailable):
                await backend.incr("k", 1)
            with pytest.raises(BackendUnavailable):
                await backend.publish("c", "m")
    finally:
        await backend.close()


async def test_a_redis_that_never_answers_fails_the_call_at_the_deadline() -> None:
    """REDIS_TIMEOUT: a server that accepts the connection and never replies (a stuck Redis, a dead peer
    behind a live proxy) fails each call with BackendUnavailable once the backend's deadline passes —
    the scripts on the pipelined connection and the commands on redis-py's pool alike."""
    accepted: list[asyncio.StreamWriter] = []

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        while await reader.read(4096):
            pass

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    backend = RedisBackend(f"redis://127.0.0.1:{port}/0", "x:", timeout=0.3)
    try:
        async with asyncio.timeout(30):  # a hang guard, not a speed assertion
            with pytest.raises(BackendUnavailable, match="TimeoutError"):
                await backend.gcra("k", 1, 1)  # a Lua script: the pipelined connection
            with pytest.raises(BackendUnavailable, match="TimeoutError"):
                await backend.get_int("k")  # redis-py's pool
        assert accepted, "the backend never reached the silent server"
    finally:
        await backend.close()
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_a_subscription_announces_itself_before_any_message(subject: Subject) -> None:
    """Subscribers reload what they may have missed when they hear SUBSCRIBED (see server.context)."""
    listener = Listener(subject.backend, "news")
    try:
        await until_subscribed(subject.backend, listener, "news")
        assert listener.subscriptions == 1
    finally:
        await listener.stop()


async def test_lua_scripts_are_loaded_again_after_the_server_lost_them(redis_prefix: str) -> None:
    backend = RedisBackend(REDIS_URL, redis_prefix)
    try:
        assert await backend.incr("flush:n", 60) == 1
        await backend.client.script_flush()  # as after a Redis restart: no script is cached any more
        assert await backend.incr("flush:n", 60) == 2
        assert await backend.client.script_exists(backend._incr.sha) == [True]
    finally:
        await backend.close()


async def test_more_concurrent_calls_than_connections_wait_for_one(redis_prefix: str) -> None:
    backend = RedisBackend(REDIS_URL, redis_prefix, max_connections=2)
    try:
        results = await asyncio.gather(*(backend.incr("busy:n", 60) for _ in range(50)))
        assert sorted(results) == list(range(1, 51))  # none refused with MaxConnectionsError
    finally:
        await backend.close()
