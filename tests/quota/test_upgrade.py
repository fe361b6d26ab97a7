"""An upgrade from the layout before partitions (one stream `q:stream` with its cursor, unpartitioned keys),
on the real Redis and SQL: the usage and adjustments queued under the old keys reach SQL exactly once (even
across a crash between the commit and the cursor's publication), no account is loaded before they did,
balances are reloaded from SQL with them, a credit applied before the upgrade stays applied once, and the
old layout's keys are retired. And stream entries in the format before the one-field entries (a field per
value) are still read by the sync and counted by a load, and a hold of the layout before holds were zset
members (a hash) is still swept."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from quota.backends.redis_quota import RedisQuotaStore
from quota.partitions import LEGACY
from quota.store import CursorMoved
from tests.conftest import _Databases, fresh_database
from tests.quota.env import QuotaEnv, build, consume_log
from tests.services import REDIS_URL


@pytest.fixture(params=["mariadb", "postgres"])
async def env(request: pytest.FixtureRequest, databases: _Databases, redis_prefix: str
              ) -> AsyncIterator[QuotaEnv]:
    built = build(await fresh_database(databases, request.param), REDIS_URL, redis_prefix)
    try:
        yield built
    finally:
        await built.close()


class OldLayout:
    """The previous version's key layout, driven by the same Lua scripts (unchanged by the partitions)."""

    def __init__(self, store: RedisQuotaStore) -> None:
        self.s, self.k = store, store.k
        self.held: dict[str, int] = {}

    async def load(self, field: str, account_id: int, durable: int) -> None:
        await self.s._load(keys=[self.k(f"q:{field}:{account_id}"), self.k(f"q:{field}h:{account_id}"),
                                 self.k("q:stream"), self.k("q:cursor"), self.k("q:epoch")],
                           args=[durable, "0-0", field, account_id, 1, "old-epoch"])

    def _hold_keys(self, hold: str, uid: int, kid: int) -> list[str]:
        k = self.k
        return [k("q:holds"), k(f"q:d:{hold}"), k(f"q:u:{uid}"), k(f"q:t:{kid}"), k(f"q:uh:{uid}"),
                k(f"q:th:{kid}")]

    async def reserve(self, hold: str, uid: int, kid: int, amount: int) -> None:
        k = self.k
        self.held[hold] = amount
        res = await self.s._reserve(keys=[k(f"q:u:{uid}"), k(f"q:t:{kid}"), k("q:holds"), k(f"q:uh:{uid}"),
                                          k(f"q:th:{kid}"), k("ver"), k("q:epoch")],
                                    args=[amount, f"{hold} {uid} {kid} 1 {amount}", 60_000, 1])
        assert int(res[0]) == 1

    async def settle(self, hold: str, uid: int, kid: int, actual: int) -> None:
        amount = self.held[hold]
        res = await self.s._settle(keys=[*self._hold_keys(hold, uid, kid), self.k("q:stream"),
                                         self.k("q:epoch")],
                                   args=[f"{hold} {uid} {kid} 1 {amount}", actual, 1, 3600,
                                         f"{uid} {kid} 1 0 {actual} {hold}", json.dumps(consume_log()),
                                         amount, "old-epoch"])
        assert int(res[0]) == 1

    async def credit(self, uid: int, amount: int, ref: str) -> None:
        res = await self.s._adjust(keys=[self.k(f"q:i:{ref}"), self.k(f"q:u:{uid}"), self.k(f"q:uh:{uid}"),
                                         self.k("q:stream")],
                                   args=["add", amount, "u", uid, ref, "", 86_400, 0])
        assert int(res[0]) == 1


async def test_usage_queued_under_the_old_layout_is_synced_once_and_balances_reload(env: QuotaEnv) -> None:
    store = env.store
    assert isinstance(store, RedisQuotaStore) and env.redis is not None
    uid = await env.add_user(10_000)
    kid = await env.add_key(uid, remain=5_000)
    old = OldLayout(store)
    await old.load("u", uid, 10_000)
    await old.load("t", kid, 5_000)
    await old.reserve("h1", uid, kid, 300)
    await old.settle("h1", uid, kid, 100)
    # the old sync moved that one (the legacy SQL cursor and Redis cursor are past it) …
    epoch, synced = await store.read(LEGACY, "0-0", 100)

    async def current() -> bool:
        return True

    cursor = await env.sync.sink.apply(LEGACY, synced, epoch, current)
    assert cursor is not None
    await store.synced(LEGACY, cursor)
    # … then more was queued, and an old worker stopped with a hold open
    await old.reserve("h2", uid, kid, 400)
    await old.settle("h2", uid, kid, 250)
    await old.credit(uid, 1_000, "c1")
    await old.reserve("h3", uid, kid, 700)  # never settled: the upgrade stopped its worker

    # the new version: no account loads while the old stream may hold unsynced usage
    assert await store.legacy_pending()
    durable = await env.engine.source.durable("user", uid, store.partition(uid))
    assert durable is not None and durable[0] == 10_000 - 100
    with pytest.raises(CursorMoved):
        await store.load("user", uid, *durable)
    # a sync commits the old batch and dies before Redis learned its cursor: the next one skips it
    epoch, waiting = await store.read(LEGACY, cursor, 100)
    assert len(waiting) == 2
    assert await env.sync.sink.apply(LEGACY, waiting, epoch, current) == waiting[-1].id
    await env.sync.run_once()  # drains nothing new, retires the old layout
    assert not await store.legacy_pending()
    leftovers = [n async for n in env.redis.client.scan_iter(match=f"{env.redis.prefix}q:[utihdr]*")]
    assert leftovers == []
    assert not await env.redis.client.exists(*(env.redis.key(n) for n in ("q:stream", "q:cursor",
                                                                          "q:epoch", "q:holds")))

    user, key = await env.user_row(uid), await env.key_row(kid)
    assert user.quota == 10_000 - 100 - 250 + 1_000  # each entry once; the open hold h3 is forgotten
    assert (user.used_quota, user.request_count) == (350, 2)
    assert (key.remain_quota, key.used_quota) == (5_000 - 350, 350)
    assert await env.consumed(uid) == (350, 2)
    assert await env.engine.balance("user", uid) == user.quota  # reloaded from SQL
    assert await env.engine.balance("key", kid, owner=uid) == key.remain_quota
    again = await env.engine.credit("user", uid, 1_000, ref="c1")  # a replay of the credit: applied already
    assert not again.applied
    r = await env.engine.reserve(uid, 100, key_id=kid, key_limited=True)
    await env.engine.settle(r, 40, log=consume_log())
    await env.sync.drain()
    user = await env.user_row(uid)
    assert user.quota == 10_000 - 100 - 250 + 1_000 - 40
    assert await env.consumed(uid) == (390, 3)


async def test_entries_of_the_field_per_value_format_are_read_and_counted(env: QuotaEnv) -> None:
    store = env.store
    assert isinstance(store, RedisQuotaStore) and env.redis is not None
    uid = await env.add_user(10_000)
    kid = await env.add_key(uid, remain=5_000)
    p = store.partition(uid)
    raw = env.redis.client
    await raw.xadd(store.streams[p], {"k": "use", "u": uid, "t": kid, "l": 1, "c": 3, "q": 120, "r": "h-old",
                                      "g": json.dumps(consume_log())})
    await raw.xadd(store.streams[p], {"k": "adj", "u": uid, "t": 0, "l": 1, "c": 0, "q": 500,
                                      "r": "credit old", "g": ""})
    live, _ = await store.load_locked("user", uid, 10_000, "0-0")
    assert live == 10_000 - 120 + 500
    key_live, _ = await store.load_locked("key", kid, 5_000, "0-0", owner=uid)
    assert key_live == 5_000 - 120
    await env.engine.credit("user", uid, 7, ref="a ref with spaces")  # written in the one-field format
    _, entries = await store.read(p, "0-0", 10)
    assert [(e.kind, e.user_id, e.key_id, e.key_limited, e.channel_id, e.amount, e.ref, e.log)
            for e in entries] == [("use", uid, kid, True, 3, 120, "h-old", consume_log()),
                                  ("adj", uid, 0, True, 0, 500, "credit old", None),
                                  ("adj", uid, 0, True, 0, 7, "a ref with spaces", None)]


async def test_a_hold_kept_in_a_hash_by_the_previous_version_is_swept(env: QuotaEnv) -> None:
    store = env.store
    assert isinstance(store, RedisQuotaStore) and env.redis is not None
    uid = await env.add_user(10_000)
    kid = await env.add_key(uid, remain=5_000)
    assert await env.engine.balance("user", uid) == 10_000
    assert await env.engine.balance("key", kid, owner=uid) == 5_000
    p = store.partition(uid)
    q = env.redis.key(f"q:{{p{p}}}:")
    raw = env.redis.client
    # what the previous reserve.lua left for a hold of 300 whose lease has passed (its worker was stopped)
    await raw.hset(f"{q}h:old1", mapping={"u": uid, "t": kid, "l": 1, "a": 300, "e": 1})
    await raw.zadd(store.holds[p], {"old1": 1})
    for name, held in ((f"u:{uid}", -300), (f"t:{kid}", -300), (f"uh:{uid}", 300), (f"th:{kid}", 300)):
        await raw.incrby(f"{q}{name}", held)
    assert await store.sweep() == 1
    assert await env.engine.balance("user", uid) == 10_000
    assert await env.engine.balance("key", kid, owner=uid) == 5_000
    assert [int(await raw.get(f"{q}{held}")) for held in (f"uh:{uid}", f"th:{kid}")] == [0, 0]
    assert not await raw.exists(f"{q}h:old1")
    assert await store.open_holds() == 0
