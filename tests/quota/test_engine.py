"""One shared suite for the quota engine, run on the in-process store (with SQLite) and on Redis (with
MariaDB and with PostgreSQL): reservations, settlement, release, adjustments, loading, sweeping, and the
exactly-once sync into SQL."""

from __future__ import annotations

import asyncio

import pytest

from quota.store import CursorMoved
from quota.types import InsufficientQuota, SubtractTooLarge
from tests.quota.env import QuotaEnv, consume_log


async def test_reserve_holds_on_the_live_balance(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(1000)
    r = await quota_env.engine.reserve(uid, 300)
    assert r.user_balance == 700
    assert await quota_env.engine.balance("user", uid) == 700
    assert (await quota_env.user_row(uid)).quota == 1000  # holds never touch SQL


async def test_a_reservation_that_does_not_fit_changes_nothing(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(100)
    with pytest.raises(InsufficientQuota) as refused:
        await quota_env.engine.reserve(uid, 101)
    assert refused.value.account == "user" and refused.value.available == 100
    assert await quota_env.engine.balance("user", uid) == 100
    assert await quota_env.store.pending() == 0


async def test_a_zero_hold_fits_any_balance_and_settles_once(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(0)
    key = await quota_env.add_key(uid, remain=0)
    r = await quota_env.engine.reserve(uid, 0, key_id=key, key_limited=True)
    assert (r.user_balance, r.key_balance) == (0, 0)
    await quota_env.engine.debit("user", uid, 5, ref="below-zero", allow_negative=True)
    r2 = await quota_env.engine.reserve(uid, 0)
    assert r2.user_balance == -5
    assert (await quota_env.engine.settle(r2, 0, log={"type": 2})).applied
    assert not (await quota_env.engine.settle(r2, 0, log={"type": 2})).applied
    with pytest.raises(InsufficientQuota):
        await quota_env.engine.reserve(uid, 1)


async def test_the_key_quota_is_held_too_unless_unlimited(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(10_000)
    limited = await quota_env.add_key(uid, remain=50)
    unlimited = await quota_env.add_key(uid, remain=0, unlimited=True)
    with pytest.raises(InsufficientQuota) as refused:
        await quota_env.engine.reserve(uid, 60, key_id=limited, key_limited=True)
    assert refused.value.account == "key"
    assert await quota_env.engine.balance("user", uid) == 10_000
    r = await quota_env.engine.reserve(uid, 40, key_id=limited, key_limited=True)
    assert (r.user_balance, r.key_balance) == (9_960, 10)
    r2 = await quota_env.engine.reserve(uid, 500, key_id=unlimited, key_limited=False)
    assert r2.key_balance == -1 and r2.user_balance == 9_460


async def test_settle_charges_the_actual_cost_once_and_syncs_it_exactly_once(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(1000)
    kid = await quota_env.add_key(uid, remain=500)
    r = await quota_env.engine.reserve(uid, 300, key_id=kid, key_limited=True)
    first = await quota_env.engine.settle(r, 120, channel_id=7, log=consume_log(request_id="abc"))
    again = await quota_env.engine.settle(r, 120, channel_id=7, log=consume_log(request_id="abc"))
    assert first.applied and (first.user_balance, first.key_balance) == (880, 380)
    assert not again.applied
    assert await quota_env.engine.balance("user", uid) == 880
    await quota_env.sync.drain()
    await quota_env.sync.drain()
    user = await quota_env.user_row(uid)
    key = await quota_env.key_row(kid)
    assert (user.quota, user.used_quota, user.request_count) == (880, 120, 1)
    assert (key.remain_quota, key.used_quota) == (380, 120)
    logs = await quota_env.logs(user_id=uid)
    assert len(logs) == 1
    assert (logs[0].quota, logs[0].channel, logs[0].token_id, logs[0].request_id) == (120, 7, kid, "abc")
    assert logs[0].ref == r.hold_id


async def test_settling_above_the_hold_may_overdraw_by_the_excess_only(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(100)
    r = await quota_env.engine.reserve(uid, 100)
    settled = await quota_env.engine.settle(r, 130, log=consume_log())
    assert settled.user_balance == -30
    with pytest.raises(InsufficientQuota):
        await quota_env.engine.reserve(uid, 1)


async def test_release_returns_the_hold_once_and_blocks_a_later_settle(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(1000)
    kid = await quota_env.add_key(uid, remain=400)
    r = await quota_env.engine.reserve(uid, 300, key_id=kid, key_limited=True)
    assert await quota_env.engine.release(r) is True
    assert await quota_env.engine.release(r) is False
    assert (await quota_env.engine.settle(r, 50, log=consume_log())).applied is False
    assert await quota_env.engine.balance("user", uid) == 1000
    assert await quota_env.engine.balance("key", kid, owner=uid) == 400
    await quota_env.sync.drain()
    assert await quota_env.logs(user_id=uid) == []


async def test_adjustments_apply_once_per_reference(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(1000)
    log = {"type": 3, "content": "add: {before} -> {after}", "quota": 500}
    a = await quota_env.engine.credit("user", uid, 500, ref="req-1", log=log)
    b = await quota_env.engine.credit("user", uid, 500, ref="req-1", log=log)
    assert a.applied and (a.before, a.after, a.delta) == (1000, 1500, 500)
    assert not b.applied and (b.before, b.after) == (1000, 1500)
    d = await quota_env.engine.debit("user", uid, 200, ref="req-2")
    assert d.after == 1300
    with pytest.raises(SubtractTooLarge):
        await quota_env.engine.debit("user", uid, 5000, ref="req-3")
    assert await quota_env.engine.balance("user", uid) == 1300
    await quota_env.sync.drain()
    assert (await quota_env.user_row(uid)).quota == 1300
    logs = await quota_env.logs(user_id=uid)
    assert [(x.type, x.content, x.quota) for x in logs] == [(3, "add: 1000 -> 1500", 500)]


async def test_override_is_a_delta_so_calls_in_flight_and_unsynced_usage_still_count(
        quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(1000)
    synced = await quota_env.engine.reserve(uid, 100)
    await quota_env.engine.settle(synced, 100, log=consume_log())  # unsynced usage
    in_flight = await quota_env.engine.reserve(uid, 200)
    over = await quota_env.engine.set("user", uid, 5000, ref="override-1")
    assert over.after == 4800  # 5000 minus the 200 still held
    await quota_env.engine.settle(in_flight, 150, log=consume_log())
    assert await quota_env.engine.balance("user", uid) == 4850  # X minus what the call cost
    await quota_env.sync.drain()
    user = await quota_env.user_row(uid)
    assert user.quota == 4850
    assert await quota_env.consumed(uid) == (250, 2)  # nothing lost from the logs


async def test_a_missing_live_balance_loads_from_sql_plus_unsynced_entries(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(1000)
    r = await quota_env.engine.reserve(uid, 10)
    await quota_env.engine.settle(r, 10, log=consume_log())
    await quota_env.engine.credit("user", uid, 5, ref="c1")
    # the durable value is behind by the two unsynced entries; a fresh load must account for them
    durable = await quota_env.engine.source.durable("user", uid, quota_env.engine.partition(uid))
    assert durable is not None and durable[:2] == (1000, "0-0")
    other = await quota_env.add_user(0)
    assert await quota_env.engine.balance("user", other) == 0
    assert await quota_env.engine.balance("user", uid) == 995


async def test_load_refuses_a_stale_cursor(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(1000)
    await quota_env.sync.run_once()  # publishes the cursor 0-0 and the epoch
    r = await quota_env.engine.reserve(uid, 10)
    await quota_env.engine.settle(r, 10, log=consume_log())
    await quota_env.sync.drain()  # the cursor of uid's partition moved past 0-0
    other = await quota_env.add_user(50)
    while quota_env.engine.partition(other) != quota_env.engine.partition(uid):
        other = await quota_env.add_user(50)
    epoch = await quota_env.store.epoch(quota_env.engine.partition(uid))
    assert epoch is not None
    with pytest.raises(CursorMoved):
        await quota_env.store.load("user", other, 50, "0-0", epoch)
    assert await quota_env.engine.balance("user", other) == 50


async def test_expired_holds_are_swept_and_a_late_settle_charges_in_full(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(1000)
    quota_env.engine.lease_ms = 50
    dead = await quota_env.engine.reserve(uid, 300)
    await asyncio.sleep(0.2)
    assert await quota_env.engine.sweep() == 1
    assert await quota_env.engine.balance("user", uid) == 1000
    late = await quota_env.engine.settle(dead, 120, log=consume_log())
    assert late.applied and late.user_balance == 880
    await quota_env.sync.drain()
    assert (await quota_env.user_row(uid)).quota == 880


async def test_a_late_settlement_run_again_charges_once(quota_env: QuotaEnv) -> None:
    """The settle of a swept hold (charged in full) whose reply was lost is run again: it changes nothing,
    and a release after it neither."""
    uid = await quota_env.add_user(1000)
    quota_env.engine.lease_ms = 50
    dead = await quota_env.engine.reserve(uid, 300)
    await asyncio.sleep(0.2)
    assert await quota_env.engine.sweep() == 1
    assert (await quota_env.engine.settle(dead, 120, log=consume_log())).applied
    assert not (await quota_env.engine.settle(dead, 120, log=consume_log())).applied
    assert await quota_env.engine.release(dead) is False
    assert await quota_env.engine.balance("user", uid) == 880
    await quota_env.sync.drain()
    assert await quota_env.consumed(uid) == (120, 1)


async def test_a_settled_hold_is_not_renewed_back_to_life(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(1000)
    quota_env.engine.lease_ms = 50
    r = await quota_env.engine.reserve(uid, 300)
    assert await quota_env.engine.renew(r) is True
    assert (await quota_env.engine.settle(r, 100)).applied
    assert await quota_env.engine.renew(r) is False
    await asyncio.sleep(0.2)
    assert await quota_env.engine.sweep() == 0
    assert await quota_env.engine.balance("user", uid) == 900
    assert await quota_env.engine.holds_in_flight() == 0


async def test_a_released_hold_stays_released_after_a_settle_was_refused(quota_env: QuotaEnv) -> None:
    """A settle refused because the hold was released, run again (its reply lost), is refused again."""
    uid = await quota_env.add_user(1000)
    kid = await quota_env.add_key(uid, remain=400)
    r = await quota_env.engine.reserve(uid, 300, key_id=kid, key_limited=True)
    assert await quota_env.engine.release(r) is True
    for _ in range(2):
        assert not (await quota_env.engine.settle(r, 50, log=consume_log())).applied
        assert await quota_env.engine.release(r) is False
    assert await quota_env.engine.balance("user", uid) == 1000
    assert await quota_env.engine.balance("key", kid, owner=uid) == 400


async def test_renewed_holds_are_not_swept(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(1000)
    quota_env.engine.lease_ms = 300
    r = await quota_env.engine.reserve(uid, 100)
    quota_env.engine.lease_ms = 60_000
    assert await quota_env.engine.renew(r)
    await asyncio.sleep(0.4)
    assert await quota_env.engine.sweep() == 0
    assert await quota_env.engine.balance("user", uid) == 900


async def test_replaying_a_committed_batch_applies_nothing(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(1000)
    for _ in range(3):
        r = await quota_env.engine.reserve(uid, 10)
        await quota_env.engine.settle(r, 10, log=consume_log())
    partition = quota_env.engine.partition(uid)
    epoch, entries = await quota_env.store.read(partition, "0-0", 100)
    assert len(entries) == 3

    async def current() -> bool:
        return True

    cursor = await quota_env.sync.sink.apply(partition, entries, epoch, current)
    # a crash here (after the commit, before the store learned the cursor) replays the same batch
    assert await quota_env.sync.sink.apply(partition, entries, epoch, current) == cursor
    await quota_env.sync.drain()
    user = await quota_env.user_row(uid)
    assert (user.quota, user.used_quota, user.request_count) == (970, 30, 3)
    assert len(await quota_env.logs(user_id=uid)) == 3


async def test_concurrent_sync_workers_apply_each_entry_once(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(100_000)
    for _ in range(40):
        r = await quota_env.engine.reserve(uid, 10)
        await quota_env.engine.settle(r, 7, log=consume_log())
    await asyncio.gather(*(quota_env.sync.run_once() for _ in range(4)))
    await quota_env.sync.drain()
    user = await quota_env.user_row(uid)
    assert (user.quota, user.used_quota, user.request_count) == (100_000 - 280, 280, 40)
    assert await quota_env.consumed(uid) == (280, 40)


async def test_losing_the_store_reloads_from_sql_and_loses_only_unsynced_usage(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(1000)
    r = await quota_env.engine.reserve(uid, 100)
    await quota_env.engine.settle(r, 100, log=consume_log())
    await quota_env.sync.drain()
    r = await quota_env.engine.reserve(uid, 50)
    await quota_env.engine.settle(r, 50, log=consume_log())  # settled, not yet synced
    await quota_env.forget_live_state()
    assert await quota_env.engine.balance("user", uid) == 900  # the unsynced 50 is the bounded loss
    r = await quota_env.engine.reserve(uid, 10)
    await quota_env.engine.settle(r, 10, log=consume_log())
    await quota_env.sync.drain()
    assert (await quota_env.user_row(uid)).quota == 890
    assert await quota_env.consumed(uid) == (110, 2)


async def test_a_settlement_repeated_after_a_store_loss_is_applied_to_sql_once(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(1000)
    r = await quota_env.engine.reserve(uid, 100)
    await quota_env.engine.settle(r, 60, log=consume_log())
    await quota_env.sync.drain()
    await quota_env.forget_live_state()  # the hold is gone with the store, and so is what settled it
    await quota_env.engine.balance("user", uid)  # reloaded from SQL: a new incarnation of the store
    assert (await quota_env.engine.settle(r, 60, log=consume_log())).applied
    assert not (await quota_env.engine.settle(r, 60, log=consume_log())).applied  # and once only
    await quota_env.sync.drain()  # must neither stall on the unique log reference nor charge twice
    assert await quota_env.store.pending() <= 1
    assert (await quota_env.user_row(uid)).quota == 940
    assert await quota_env.consumed(uid) == (60, 1)


async def test_a_settle_run_again_changes_nothing_and_leaves_no_marker(quota_env: QuotaEnv) -> None:
    """A settle whose reply was lost is run again (Redis calls are retried on a fresh connection): the hold
    it removed is what makes the repeat a no-op. On Redis it writes no marker key: a key per call, kept
    an hour, would be millions of keys at thousands of calls a second."""
    uid = await quota_env.add_user(1000)
    key = await quota_env.add_key(uid, remain=500)
    r = await quota_env.engine.reserve(uid, 300, key_id=key, key_limited=True)
    assert (await quota_env.engine.settle(r, 100, log=consume_log())).applied
    again = await quota_env.engine.settle(r, 100, log=consume_log())
    assert not again.applied
    if quota_env.redis is not None:
        client, prefix = quota_env.redis.client, quota_env.redis.prefix
        assert [k async for k in client.scan_iter(match=f"{prefix}q:*:d:*", count=1000)] == []
    assert await quota_env.engine.release(r) is False
    assert await quota_env.engine.balance("user", uid) == 900
    assert await quota_env.engine.balance("key", key, owner=uid) == 400
    await quota_env.sync.drain()
    assert await quota_env.consumed(uid) == (100, 1)


async def test_a_reserve_run_again_with_its_hold_id_holds_once(quota_env: QuotaEnv) -> None:
    """A reserve whose reply was lost is run again with the same hold id (Redis calls are retried on a
    fresh connection): it must not hold twice."""
    uid = await quota_env.add_user(1000)
    key = await quota_env.add_key(uid, remain=500)
    r = await quota_env.engine.reserve(uid, 300, key_id=key, key_limited=True)
    again = await quota_env.store.reserve(r.hold_id, uid, key, True, 300, 60_000)
    assert again[:4] == (True, "", 700, 200)
    assert await quota_env.engine.balance("user", uid) == 700
    assert await quota_env.engine.balance("key", key, owner=uid) == 200
    assert (await quota_env.engine.settle(r, 100)).applied
    assert await quota_env.engine.balance("user", uid) == 900
    assert await quota_env.engine.balance("key", key, owner=uid) == 400
