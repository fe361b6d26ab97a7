"""Rate limits folded into the quota steps: `reserve(limits=…)` admits and holds in one atomic step,
`settle(charges=…)` charges usage with the settlement, exactly once.

Run on every store (`quota_env`: in process over SQLite, Redis over MariaDB and PostgreSQL, a Redis
Cluster). The limits are per minute, so nothing frees up while a test runs; what a limit has left is read
by charging it through the same limiter (`gcra_many`), as a separate admission would.
"""

from __future__ import annotations

import secrets

import pytest

from backend.base import Limit
from quota.partitions import tag
from quota.types import InsufficientQuota, RateLimited
from tests.quota.env import QuotaEnv, consume_log


def per_minute(env: QuotaEnv, uid: int, count: int) -> Limit:
    """A fresh limit of user `uid`: in its partition (`rl:{p<n>}:…`), as the gateway's limits are, so that
    on a Redis Cluster it shares the slot of the user's quota keys."""
    return Limit(f"rl:{tag(env.store.partition(uid))}:test:{secrets.token_hex(4)}", count, 60.0, 1)


async def admissions_left(env: QuotaEnv, limit: Limit) -> int:
    """How many more calls of cost 1 the limit admits now (each one is charged)."""
    n = 0
    while (await env.limiter.gcra_many([Limit(limit.key, limit.count, limit.period, 1)])).allowed:
        n += 1
        assert n <= limit.count
    return n


async def test_a_reserve_with_limits_charges_them_with_the_hold(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(1000)
    limit = per_minute(quota_env, uid, 3)
    first = await quota_env.engine.reserve(uid, 100, limits=[limit])
    await quota_env.engine.reserve(uid, 100, limits=[limit])
    assert await quota_env.engine.balance("user", uid) == 800
    assert await admissions_left(quota_env, limit) == 1
    await quota_env.engine.release(first)
    assert await quota_env.engine.balance("user", uid) == 900


async def test_a_refusal_by_a_limit_holds_nothing_and_charges_no_limit(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(1000)
    roomy, full = per_minute(quota_env, uid, 10), per_minute(quota_env, uid, 1)
    await quota_env.engine.reserve(uid, 100, limits=[roomy, full])
    with pytest.raises(RateLimited) as refused:
        await quota_env.engine.reserve(uid, 100, limits=[roomy, full])
    assert refused.value.refused_by == full.key
    assert refused.value.remaining == 0
    alone = await quota_env.limiter.gcra_many([full])  # the same arithmetic as a separate admission
    assert not alone.allowed
    assert 0 < refused.value.retry_after <= 60.0
    assert abs(alone.retry_after - refused.value.retry_after) < 1.0
    assert await quota_env.engine.balance("user", uid) == 900  # only the first hold
    assert await admissions_left(quota_env, roomy) == 9  # the refused call charged neither limit


async def test_limits_stay_charged_when_the_balance_refuses(quota_env: QuotaEnv) -> None:
    """As a separate admission before the reservation would: the call was admitted, then refused."""
    uid = await quota_env.add_user(100)
    limit = per_minute(quota_env, uid, 3)
    with pytest.raises(InsufficientQuota):
        await quota_env.engine.reserve(uid, 300, limits=[limit])
    assert await quota_env.engine.balance("user", uid) == 100
    assert await admissions_left(quota_env, limit) == 2


async def test_a_rerun_for_the_same_hold_id_charges_the_limits_once(quota_env: QuotaEnv) -> None:
    """A reserve whose reply was lost is run again with its hold id: whether it held or was refused by
    the balance, the limits are not charged twice."""
    uid = await quota_env.add_user(100)
    await quota_env.engine.balance("user", uid)  # loaded
    store, limit = quota_env.store, per_minute(quota_env, uid, 3)
    for hold_id, amount in (("held-" + secrets.token_hex(4), 50), ("short-" + secrets.token_hex(4), 500)):
        for _ in range(2):
            ok, *_ = await store.reserve(hold_id, uid, 0, False, amount, 60_000, [limit])
            assert ok == (amount == 50)
    assert await admissions_left(quota_env, limit) == 1


async def test_a_free_call_is_still_rate_limited(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(0)
    limit = per_minute(quota_env, uid, 1)
    await quota_env.engine.reserve(uid, 0, limits=[limit])
    with pytest.raises(RateLimited):
        await quota_env.engine.reserve(uid, 0, limits=[limit])


async def test_limits_without_a_count_change_nothing(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(1000)
    r = await quota_env.engine.reserve(uid, 100, limits=[Limit("rl:none", 0, 60.0, 1)])
    assert r.user_balance == 900


async def test_settle_charges_the_usage_once(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(1000)
    success = per_minute(quota_env, uid, 5)
    r = await quota_env.engine.reserve(uid, 300)
    charge = Limit(success.key, success.count, success.period, 2)
    assert (await quota_env.engine.settle(r, 100, log=consume_log(), charges=[charge])).applied
    assert not (await quota_env.engine.settle(r, 100, log=consume_log(), charges=[charge])).applied
    assert await admissions_left(quota_env, success) == 3  # 2 charged, once
    await quota_env.sync.drain()
    assert await quota_env.consumed(uid) == (100, 1)


async def test_a_forced_charge_goes_past_the_count(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(1000)
    limit = per_minute(quota_env, uid, 2)
    r = await quota_env.engine.reserve(uid, 10)
    await quota_env.engine.settle(r, 10, charges=[Limit(limit.key, limit.count, limit.period, 5)])
    with pytest.raises(RateLimited):  # usage that happened counts, whatever the limit said
        await quota_env.engine.reserve(uid, 10, limits=[limit])
