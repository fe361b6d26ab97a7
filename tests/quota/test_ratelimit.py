"""The rate-limit strategy: GCRA over several limits at once (`gcra_many`), forced charges
(`gcra_charge`), the per-user policy from the options (`user_policy`) and `ModelRateLimiter`.

One suite, run against both backends like tests/backend/test_backends.py: `MemoryBackend` on an injected
clock the tests move, `RedisBackend` on the real Redis under the test's key prefix, where time passes for
real (short periods and `asyncio.sleep`). Nothing asserts on elapsed wall time: a test only waits long
enough for the behaviour it names to become due, and bounds on Redis allow for the time that passed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from backend.base import MAX_AHEAD_NS, MAX_WAIT_NS, NO_LIMIT, Limit
from backend.memory import MemoryBackend
from backend.redis import RedisBackend
from quota.partitions import partition_of
from quota.ratelimit import NO_USER_LIMIT, ModelRateLimiter, UserPolicy, user_policy
from tests.backend.test_backends import FakeClock, Subject
from tests.redis_cluster import cluster_backend
from tests.services import REDIS_URL


def sixteen_partitions(user_id: int) -> int:  # as a deployment with the default 16 partitions
    return partition_of(user_id, 16)


EPS = 1e-6


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
    # on the cluster, the suite's keys share a slot: one call's limits must (RedisBackend._run_gcra)
    backend = (cluster_backend(request, one_slot=True) if kind == "cluster"
               else RedisBackend(REDIS_URL, prefix))
    try:
        yield Subject(kind, backend)
    finally:
        await backend.close()


# ---- gcra_many -------------------------------------------------------------------------------------------

async def test_admits_count_per_period_then_refuses(subject: Subject) -> None:
    b = subject.backend
    limits = [Limit("a", 3, 60), Limit("b", 10, 60)]
    results = [await b.gcra_many(limits) for _ in range(3)]
    assert [(r.allowed, r.remaining) for r in results] == [(True, 2), (True, 1), (True, 0)]
    assert all(r.retry_after == 0 and r.refused_by is None for r in results)

    refused = await b.gcra_many(limits)
    assert refused.allowed is False and refused.remaining == 0
    assert refused.refused_by == "a"
    assert 20 - 1 < refused.retry_after <= 20 + EPS  # one unit of 3 per minute frees up every 20 s


async def test_admits_again_once_the_wait_is_over(subject: Subject) -> None:
    b = subject.backend
    limits = [Limit("a", 2, 1), Limit("b", 100, 60)]
    assert all([(await b.gcra_many(limits)).allowed for _ in range(2)])
    refused = await b.gcra_many(limits)
    assert not refused.allowed and 0 < refused.retry_after <= 0.5 + EPS
    await subject.wait(refused.retry_after + 0.05)
    again = await b.gcra_many(limits)
    assert again.allowed and again.remaining == 0
    assert not (await b.gcra_many(limits)).allowed


async def test_remaining_is_the_minimum_and_retry_after_the_longest_wait(subject: Subject) -> None:
    b = subject.backend
    first = await b.gcra_many([Limit("wide", 10, 60), Limit("narrow", 4, 60)])
    assert first.allowed and first.remaining == 3

    await b.gcra_many([Limit("slow", 1, 100)])
    await b.gcra_many([Limit("fast", 1, 10)])
    refused = await b.gcra_many([Limit("fast", 1, 10), Limit("wide", 10, 60), Limit("slow", 1, 100)])
    assert refused.allowed is False and refused.remaining == 0
    assert refused.refused_by == "slow"
    assert 100 - 1 < refused.retry_after <= 100 + EPS


async def test_a_refusal_by_one_limit_charges_none_of_them(subject: Subject) -> None:
    b = subject.backend
    assert (await b.gcra_many([Limit("B", 1, 60)])).allowed  # B is now full
    for order in ([Limit("A", 5, 60), Limit("B", 1, 60)], [Limit("B", 1, 60), Limit("A", 5, 60)]):
        for _ in range(3):
            refused = await b.gcra_many(order)
            assert refused.allowed is False and refused.refused_by == "B"
            assert 60 - 1 < refused.retry_after <= 60 + EPS
    assert await b.ttl("A") == 0  # A was never written
    peek = await b.gcra_many([Limit("A", 5, 60, cost=0)])
    assert peek.allowed and peek.remaining == 5
    alone = await b.gcra_many([Limit("A", 5, 60)])
    assert alone.allowed and alone.remaining == 4


async def test_refused_remaining_counts_what_is_free_now(subject: Subject) -> None:
    b = subject.backend
    await b.gcra_many([Limit("A", 5, 60, cost=2)])
    await b.gcra_many([Limit("B", 1, 60)])
    refused = await b.gcra_many([Limit("A", 5, 60, cost=2), Limit("C", 4, 60), Limit("B", 1, 60)])
    assert not refused.allowed and refused.remaining == 0  # B has nothing free
    refused = await b.gcra_many([Limit("A", 5, 60, cost=4), Limit("C", 4, 60)])
    assert not refused.allowed and refused.refused_by == "A"
    assert refused.remaining == 3  # A: 3 free (nothing charged), C: 4
    assert 12 - 1 < refused.retry_after <= 12 + EPS


async def test_peeks_never_consume(subject: Subject) -> None:
    b = subject.backend
    for _ in range(10):
        peek = await b.gcra_many([Limit("k", 2, 60, cost=0)])
        assert peek.allowed and peek.remaining == 2
    assert await b.ttl("k") == 0  # a peek creates nothing

    assert (await b.gcra_many([Limit("k", 2, 60)])).remaining == 1
    assert (await b.gcra_many([Limit("k", 2, 60, cost=0)])).remaining == 1
    assert (await b.gcra_many([Limit("k", 2, 60)])).remaining == 0

    first = await b.gcra_many([Limit("k", 2, 60, cost=0)])  # exhausted: the peek refuses
    assert first.allowed is False and first.remaining == 0 and first.refused_by == "k"
    assert 30 - 1 < first.retry_after <= 30 + EPS
    second = await b.gcra_many([Limit("k", 2, 60, cost=0), Limit("other", 5, 60)])
    assert second.allowed is False and second.retry_after <= first.retry_after
    assert await b.ttl("other") == 0


async def test_a_peek_next_to_charged_limits_leaves_its_key_alone(subject: Subject) -> None:
    b = subject.backend
    await b.gcra_charge(Limit("tpm", 100, 60, cost=40))
    result = await b.gcra_many([Limit("rpm", 3, 60), Limit("tpm", 100, 60, cost=0)])
    assert result.allowed and result.remaining == 2  # min(rpm 2 left, tpm 60 left)
    after = await b.gcra_many([Limit("tpm", 100, 60, cost=0)])
    # unchanged by the admission (61 on Redis if 0.6 s passed meanwhile)
    assert after.allowed and 60 <= after.remaining <= 61


async def test_limits_without_a_count_are_skipped(subject: Subject) -> None:
    b = subject.backend
    none = await b.gcra_many([Limit("zero", 0, 60), Limit("negative", -1, 0)])
    assert none.allowed and none.remaining == NO_LIMIT and none.retry_after == 0
    assert (await b.gcra_many([])).allowed
    for _ in range(3):
        assert (await b.gcra_many([Limit("zero", 0, 60), Limit("one", 1, 60, cost=0)])).allowed
    assert (await b.gcra_many([Limit("zero", 0, 60), Limit("one", 1, 60)])).allowed
    refused = await b.gcra_many([Limit("zero", 0, 60), Limit("one", 1, 60)])
    assert not refused.allowed and refused.refused_by == "one"
    await b.gcra_charge(Limit("zero", 0, 60, cost=500))
    assert await b.ttl("zero") == 0 and await b.ttl("negative") == 0


async def test_cost_above_the_count_is_refused_and_charges_nothing(subject: Subject) -> None:
    b = subject.backend
    refused = await b.gcra_many([Limit("a", 3, 60, cost=4), Limit("b", 10, 60)])
    assert refused.allowed is False and refused.refused_by == "a"
    absurd = await b.gcra_many([Limit("a", 1, 60, cost=10**15)])
    assert absurd.allowed is False and absurd.retry_after == MAX_WAIT_NS / 1e9
    assert (await b.gcra_many([Limit("a", 3, 60, cost=3), Limit("b", 10, 60)])).remaining == 0


async def test_invalid_limits_are_rejected(subject: Subject) -> None:
    b = subject.backend
    with pytest.raises(ValueError, match="twice"):
        await b.gcra_many([Limit("same", 1, 60), Limit("same", 2, 60)])
    with pytest.raises(ValueError, match="cost"):
        Limit("k", 1, 60, cost=-1)
    with pytest.raises(ValueError, match="period"):
        Limit("k", 1, 0)
    Limit("k", 0, 0)  # no limit: the period does not matter


# ---- gcra_charge -----------------------------------------------------------------------------------------

async def test_a_charge_can_push_a_limit_past_its_count(subject: Subject) -> None:
    b = subject.backend
    assert (await b.gcra_many([Limit("tpm", 100, 60, cost=0)])).allowed
    await b.gcra_charge(Limit("tpm", 100, 60, cost=150))  # 150 tokens of 100/min: 50 over
    refused = await b.gcra_many([Limit("tpm", 100, 60, cost=0)])
    assert refused.allowed is False and refused.remaining == 0
    # 50 tokens over (30 s) and then one token (0.6 s) must drain
    assert 30.6 - 1 < refused.retry_after <= 30.6 + EPS
    # the key lives as long as its theoretical arrival time: 150 × 0.6 s
    assert 89 < await b.ttl("tpm") <= 90


async def test_charges_add_up_and_extend_the_expiry(subject: Subject) -> None:
    b = subject.backend
    await b.gcra_charge(Limit("tpm", 100, 60, cost=30))
    assert 17 < await b.ttl("tpm") <= 18
    await b.gcra_charge(Limit("tpm", 100, 60, cost=30), Limit("ok", 2, 60, cost=1))
    assert 35 < await b.ttl("tpm") <= 36
    assert 29 < await b.ttl("ok") <= 30
    peek = await b.gcra_many([Limit("tpm", 100, 60, cost=0), Limit("ok", 2, 60, cost=0)])
    assert peek.allowed and peek.remaining == 1


async def test_an_overcharged_limit_drains(subject: Subject) -> None:
    b = subject.backend
    await b.gcra_charge(Limit("tpm", 100, 1, cost=150))  # 100 tokens per second
    refused = await b.gcra_many([Limit("tpm", 100, 1, cost=0)])
    assert not refused.allowed and 0 < refused.retry_after <= 0.51 + EPS
    await subject.wait(refused.retry_after + 0.05)
    assert (await b.gcra_many([Limit("tpm", 100, 1, cost=0)])).allowed


async def test_a_huge_charge_is_capped(subject: Subject) -> None:
    b = subject.backend
    await b.gcra_charge(Limit("tpm", 1, 60, cost=10**12))
    refused = await b.gcra_many([Limit("tpm", 1, 60, cost=0)])
    assert not refused.allowed
    assert refused.retry_after <= MAX_AHEAD_NS / 1e9 + EPS
    assert MAX_AHEAD_NS / 1e9 - 60 < await b.ttl("tpm") <= MAX_AHEAD_NS / 1e9


async def test_exact_with_the_injected_clock() -> None:
    clock = FakeClock()
    b = MemoryBackend(clock=clock)
    await b.gcra_charge(Limit("tpm", 100, 60, cost=150))
    refused = await b.gcra_many([Limit("tpm", 100, 60, cost=0), Limit("rpm", 2, 60)])
    assert refused.retry_after == pytest.approx(30.6) and refused.refused_by == "tpm"
    clock.advance(30.5)
    assert not (await b.gcra_many([Limit("tpm", 100, 60, cost=0), Limit("rpm", 2, 60)])).allowed
    clock.advance(0.1)
    result = await b.gcra_many([Limit("tpm", 100, 60, cost=0), Limit("rpm", 2, 60)])
    assert result.allowed and result.remaining == 1


async def test_redis_keys_live_under_the_prefix_as_nanoseconds(redis_prefix: str) -> None:
    backend = RedisBackend(REDIS_URL, redis_prefix)
    raw = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        (before_s, before_us) = await raw.time()
        await backend.gcra_many([Limit("rpm", 5, 60), Limit("tpm", 100, 60, cost=0)])
        await backend.gcra_charge(Limit("ok", 3, 60))
        (after_s, after_us) = await raw.time()
        keys = sorted([k async for k in raw.scan_iter(match=f"{redis_prefix}*")])
        assert keys == [f"{redis_prefix}ok", f"{redis_prefix}rpm"]
        tat = await raw.get(f"{redis_prefix}rpm")
        assert tat is not None and tat.isdigit() and len(tat) == 19
        # one interval (12 s) ahead of the server's clock at the call, whenever the (loaded) call ran
        assert before_s + before_us / 1e6 + 12 <= int(tat) / 1e9 <= after_s + after_us / 1e6 + 12
        assert 11_000 < await raw.pttl(f"{redis_prefix}rpm") <= 12_000
    finally:
        await raw.aclose()
        await backend.close()


# ---- user_policy -----------------------------------------------------------------------------------------

def test_user_policy_is_off_unless_enabled() -> None:
    assert user_policy({}, "default") == NO_USER_LIMIT
    disabled = {"ModelRequestRateLimitEnabled": False, "ModelRequestRateLimitCount": 5,
                "ModelRequestRateLimitGroup": {"default": [1, 1]}}
    assert user_policy(disabled, "default") == NO_USER_LIMIT
    assert not NO_USER_LIMIT.limited


def test_user_policy_defaults_when_enabled() -> None:
    policy = user_policy({"ModelRequestRateLimitEnabled": True}, "default")
    assert policy == UserPolicy(period=60, total=0, success=1000)
    assert policy.limited


def test_user_policy_reads_duration_and_counts() -> None:
    options = {
        "ModelRequestRateLimitEnabled": True,
        "ModelRequestRateLimitDurationMinutes": 5,
        "ModelRequestRateLimitCount": 30,
        "ModelRequestRateLimitSuccessCount": 0,
        "ModelRequestRateLimitGroup": {},
    }
    assert user_policy(options, "default") == UserPolicy(period=300, total=30, success=0)
    none = {**options, "ModelRequestRateLimitCount": 0}
    assert user_policy(none, "default") == UserPolicy(period=300, total=0, success=0)
    assert not user_policy(none, "default").limited


def test_user_policy_group_override() -> None:
    options = {
        "ModelRequestRateLimitEnabled": True,
        "ModelRequestRateLimitDurationMinutes": 2,
        "ModelRequestRateLimitCount": 10,
        "ModelRequestRateLimitSuccessCount": 8,
        "ModelRequestRateLimitGroup": {"vip": [100, 50], "free": [0, 3], "off": [0, 0]},
    }
    assert user_policy(options, "vip") == UserPolicy(period=120, total=100, success=50)
    assert user_policy(options, "free") == UserPolicy(period=120, total=0, success=3)
    assert user_policy(options, "off") == UserPolicy(period=120, total=0, success=0)
    assert user_policy(options, "default") == UserPolicy(period=120, total=10, success=8)
    assert user_policy(options, "") == UserPolicy(period=120, total=10, success=8)


def test_user_policy_tolerates_text_values() -> None:
    options = {
        "ModelRequestRateLimitEnabled": "true",
        "ModelRequestRateLimitDurationMinutes": "3",
        "ModelRequestRateLimitCount": "7",
        "ModelRequestRateLimitSuccessCount": "not a number",
        "ModelRequestRateLimitGroup": '{"g": [4, 2], "bad": [1]}',
    }
    assert user_policy(options, "g") == UserPolicy(period=180, total=4, success=2)
    assert user_policy(options, "bad") == UserPolicy(period=180, total=7, success=1000)
    assert user_policy({"ModelRequestRateLimitEnabled": "false"}, "g") == NO_USER_LIMIT


# ---- ModelRateLimiter ------------------------------------------------------------------------------------

async def admit(limiter: ModelRateLimiter, *, user_id: int = 1, key_id: int = 7, key_rpm: int = 0,
                key_tpm: int = 0, policy: UserPolicy = NO_USER_LIMIT) -> bool:
    result = await limiter.admit(user_id=user_id, key_id=key_id, key_rpm=key_rpm, key_tpm=key_tpm,
                                 user_policy=policy)
    return result.allowed


async def test_limiter_key_rpm(subject: Subject) -> None:
    limiter = ModelRateLimiter(subject.backend, sixteen_partitions)
    assert [await admit(limiter, key_rpm=3) for _ in range(4)] == [True, True, True, False]
    refused = await limiter.admit(user_id=1, key_id=7, key_rpm=3, key_tpm=0, user_policy=NO_USER_LIMIT)
    assert refused.refused_by == "rl:{p1}:key:7:rpm"
    assert 20 - 1 < refused.retry_after <= 20 + EPS
    assert await admit(limiter, key_id=8, key_rpm=3)  # another key has its own budget
    assert await admit(limiter, key_rpm=0)  # no RPM on the key: nothing to refuse


async def test_limiter_key_tpm(subject: Subject) -> None:
    limiter = ModelRateLimiter(subject.backend, sixteen_partitions)
    assert await admit(limiter, key_rpm=5, key_tpm=100)
    await limiter.record(user_id=1, key_id=7, key_tpm=100, tokens=150, success=True,
                         user_policy=NO_USER_LIMIT)
    refused = await limiter.admit(user_id=1, key_id=7, key_rpm=5, key_tpm=100, user_policy=NO_USER_LIMIT)
    assert refused.allowed is False and refused.refused_by == "rl:{p1}:key:7:tpm"
    assert 30.6 - 1 < refused.retry_after <= 30.6 + EPS  # 50 tokens over, then one more, at 100/min
    # the refusal did not use the key's RPM: 5 − 1 admitted − this one
    rpm_only = await limiter.admit(user_id=1, key_id=7, key_rpm=5, key_tpm=0, user_policy=NO_USER_LIMIT)
    assert rpm_only.allowed and rpm_only.remaining == 3


async def test_limiter_key_tpm_drains(subject: Subject) -> None:
    """6000 tokens per minute drain at 100 per second: 50 tokens over are gone in half a second."""
    limiter = ModelRateLimiter(subject.backend, sixteen_partitions)
    assert await admit(limiter, key_rpm=100, key_tpm=6000)
    await limiter.record(user_id=1, key_id=7, key_tpm=6000, tokens=5000, success=True,
                         user_policy=NO_USER_LIMIT)
    assert await admit(limiter, key_rpm=100, key_tpm=6000)  # 1000 tokens left
    await limiter.record(user_id=1, key_id=7, key_tpm=6000, tokens=1050, success=True,
                         user_policy=NO_USER_LIMIT)
    refused = await limiter.admit(user_id=1, key_id=7, key_rpm=100, key_tpm=6000, user_policy=NO_USER_LIMIT)
    assert refused.allowed is False and 0 < refused.retry_after <= 0.51 + EPS
    await subject.wait(refused.retry_after + 0.05)
    assert await admit(limiter, key_rpm=100, key_tpm=6000)


async def test_limiter_user_success_cap(subject: Subject) -> None:
    limiter = ModelRateLimiter(subject.backend, sixteen_partitions)
    policy = UserPolicy(period=60, total=0, success=2)

    async def call(success: bool) -> bool:
        if not await admit(limiter, policy=policy):
            return False
        await limiter.record(user_id=1, key_id=7, key_tpm=0, tokens=10, success=success,
                             user_policy=policy)
        return True

    assert [await call(False) for _ in range(5)] == [True] * 5  # failures do not count
    assert await call(True) and await call(True)
    refused = await limiter.admit(user_id=1, key_id=7, key_rpm=0, key_tpm=0, user_policy=policy)
    assert refused.allowed is False and refused.refused_by == "rl:{p1}:user:1:ok"
    assert 30 - 1 < refused.retry_after <= 30 + EPS
    assert await admit(limiter, user_id=2, policy=policy)  # per user


async def test_limiter_user_success_cap_frees_up(subject: Subject) -> None:
    limiter = ModelRateLimiter(subject.backend, sixteen_partitions)
    policy = UserPolicy(period=1, total=0, success=2)  # a short window, as no option can set
    for _ in range(2):
        assert await admit(limiter, policy=policy)
        await limiter.record(user_id=1, key_id=7, key_tpm=0, tokens=0, success=True, user_policy=policy)
    refused = await limiter.admit(user_id=1, key_id=7, key_rpm=0, key_tpm=0, user_policy=policy)
    assert not refused.allowed
    await subject.wait(refused.retry_after + 0.05)
    assert await admit(limiter, policy=policy)


async def test_limiter_user_total_counts_every_admitted_call(subject: Subject) -> None:
    limiter = ModelRateLimiter(subject.backend, sixteen_partitions)
    policy = user_policy({"ModelRequestRateLimitEnabled": True, "ModelRequestRateLimitDurationMinutes": 2,
                          "ModelRequestRateLimitCount": 2}, "default")
    assert await admit(limiter, key_rpm=5, policy=policy)
    await limiter.record(user_id=1, key_id=7, key_tpm=0, tokens=0, success=False, user_policy=policy)
    assert await admit(limiter, key_id=9, key_rpm=5, policy=policy)  # the user's limit spans their keys
    refused = await limiter.admit(user_id=1, key_id=7, key_rpm=5, key_tpm=0, user_policy=policy)
    assert refused.allowed is False and refused.refused_by == "rl:{p1}:user:1:total"
    assert 60 - 1 < refused.retry_after <= 60 + EPS  # 2 per 2 minutes: one frees up every minute
    # the refusal did not use the key's RPM: 5 − 1 admitted − this one
    alone = await limiter.admit(user_id=1, key_id=7, key_rpm=5, key_tpm=0, user_policy=NO_USER_LIMIT)
    assert alone.allowed and alone.remaining == 3


async def test_limiter_without_any_limit(subject: Subject) -> None:
    limiter = ModelRateLimiter(subject.backend, sixteen_partitions)
    disabled = user_policy({"ModelRequestRateLimitEnabled": False}, "default")
    for _ in range(20):
        result = await limiter.admit(user_id=1, key_id=7, key_rpm=0, key_tpm=0, user_policy=disabled)
        assert result.allowed and result.remaining == NO_LIMIT
        await limiter.record(user_id=1, key_id=7, key_tpm=0, tokens=1000, success=True, user_policy=disabled)
    for key in ("rl:{p1}:key:7:rpm", "rl:{p1}:key:7:tpm", "rl:{p1}:user:1:total", "rl:{p1}:user:1:ok"):
        assert await subject.backend.ttl(key) == 0


def test_the_gcra_arithmetic_is_written_once_in_lua() -> None:
    """gcra_multi, reserve and settle take the arithmetic from the gcra.lua prelude; no script keeps a copy
    of it (a copy drifted from the others is how two scripts would come to disagree on a limit)."""
    from importlib.resources import files

    from backend import lua as shared
    from quota import lua

    folders = (files(shared.__name__), files(lua.__name__))
    scripts = {p.name: p.read_text(encoding="utf-8") for folder in folders
               for p in folder.iterdir() if p.name.endswith(".lua")}
    assert {"gcra.lua", "gcra_multi.lua", "reserve.lua", "settle.lua"} <= scripts.keys()
    copies = [name for name, text in scripts.items()
              if name != "gcra.lua" and ("%d%09d" in text or "math.floor((burst" in text)]
    assert copies == []
    for name in ("gcra_multi", "reserve", "settle"):
        text = lua.load(name, "gcra")
        assert text.startswith(scripts["gcra.lua"]) and "gcra_now()" in text
