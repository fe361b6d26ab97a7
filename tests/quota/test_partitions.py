"""The quota state in partitions (quota/partitions.py) on the real Redis: every script the store runs
touches the keys of one hash slot (so it can run on a Redis Cluster), a key account lives in its owner's
partition, and the number of partitions is fixed once per store."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from redis.crc import key_slot

from backend.base import Limit
from backend.redis import LuaScript, RedisBackend
from quota.backends.redis_quota import RedisQuotaStore
from quota.partitions import PartitionCountChanged, partition_of
from quota.ratelimit import ModelRateLimiter, UserPolicy
from quota.types import Reservation
from server.config import ConfigError, load
from tests.services import REDIS_URL

SCRIPTS = ("_reserve", "_settle", "_release", "_renew", "_adjust", "_load", "_synced", "_read")


class Recorded:
    """A store script that notes the keys of each call, then runs it on Redis as before."""

    def __init__(self, name: str, script: LuaScript, calls: list[tuple[str, list[str]]]) -> None:
        self.name, self.script, self.calls = name, script, calls

    async def __call__(self, keys: Sequence[str], args: Sequence[Any]) -> Any:
        self.calls.append((self.name, list(keys)))
        return await self.script(keys=keys, args=args)


async def test_every_script_call_of_the_store_touches_one_slot(redis_prefix: str) -> None:
    backend = RedisBackend(REDIS_URL, redis_prefix)
    store = RedisQuotaStore(backend)
    calls: list[tuple[str, list[str]]] = []
    for name in SCRIPTS:
        setattr(store, name, Recorded(name, getattr(store, name), calls))
    try:
        for user in (3, 20):  # two partitions, each with a limited key of the user
            key = 100 + user
            await store.read(store.partition(user), "0-0", 1)  # no epoch yet: read.lua creates it
            await store.load_locked("user", user, 10_000, "0-0")
            await store.load_locked("key", key, 5_000, "0-0", owner=user)
            epoch = await store.epoch(store.partition(user))
            assert epoch is not None
            await store.load("user", user + 16, 50, "0-0", epoch)  # the same partition, unlocked
            policy = UserPolicy(60.0, 100, 100)
            p = store.partition(user)
            limits = ModelRateLimiter.admission_limits(user_id=user, key_id=key, key_rpm=10, key_tpm=1000,
                                                       user_policy=policy, partition=p)
            charges = ModelRateLimiter.usage_charges(user_id=user, key_id=key, key_tpm=1000, tokens=5,
                                                     success=True, user_policy=policy, partition=p)
            held = await store.reserve(f"h{user}a", user, key, True, 100, 60_000, limits)
            assert held[0]
            refused = await store.reserve(f"h{user}b", user, key, True, 10**9, 60_000, limits)
            assert not refused[0]  # the balance refused after the limits were charged: the marker
            hold = Reservation(f"h{user}a", user, key, True, 100, 0, 0)
            assert await store.renew(hold, 60_000)
            assert (await store.settle(hold, 1, 80, {"type": 2}, charges))[0]
            await store.reserve(f"h{user}c", user, key, True, 10, 1, [Limit(f"rl:{{p{p}}}:x", 100, 60.0)])
            await store.reserve(f"h{user}d", user, key, True, 10, 60_000)
            assert await store.release(Reservation(f"h{user}d", user, key, True, 10, 0, 0))
            await store.adjust("user", user, "add", 5, f"c{user}", None, False)
            await store.adjust("key", key, "set", 7, f"s{user}", {"content": "{before}"}, False, owner=user)
            _, entries = await store.read(p, "0-0", 100)
            await store.synced(p, entries[-1].id)
        await asyncio.sleep(0.01)
        assert await store.sweep() == 2  # the holds of 1 ms lease: one per partition
    finally:
        await backend.close()
    assert {name for name, _ in calls} == set(SCRIPTS), "a script of the store was not exercised"
    for name, keys in calls:
        slots = {key_slot(k.encode()) for k in keys}
        assert len(slots) == 1, f"{name} touches {len(slots)} slots: {keys}"
    partitions = {key_slot(keys[0].encode()) for _, keys in calls}
    assert len(partitions) == 2  # and the two users' partitions are two slots


async def test_a_key_account_lives_in_its_owners_partition(redis_prefix: str) -> None:
    backend = RedisBackend(REDIS_URL, redis_prefix)
    store = RedisQuotaStore(backend)
    try:
        owner, key = 5, 6  # the key's own id would put it in another partition
        assert partition_of(owner, 16) != partition_of(key, 16)
        await store.load_locked("user", owner, 1_000, "0-0")
        await store.load_locked("key", key, 300, "0-0", owner=owner)
        ok, _, user_live, key_live, _, _ = await store.reserve("h1", owner, key, True, 100, 60_000)
        assert (ok, user_live, key_live) == (True, 900, 200)
        assert await store.live("key", [key], [owner]) == {key: 200}
        with pytest.raises(ValueError, match="owner"):
            await store.live("key", [key])
    finally:
        await backend.close()


async def test_the_number_of_partitions_is_fixed_once_per_store(redis_prefix: str) -> None:
    backend = RedisBackend(REDIS_URL, redis_prefix)
    try:
        await RedisQuotaStore(backend).setup("a-deployment")
        await RedisQuotaStore(backend).setup("a-deployment")  # the same count: accepted
        eight = RedisBackend(REDIS_URL, redis_prefix, partitions=8)
        with pytest.raises(PartitionCountChanged) as refused:
            await RedisQuotaStore(eight).setup("a-deployment")
        await eight.close()
        assert (refused.value.stored, refused.value.configured) == (16, 8)
    finally:
        await backend.close()


def test_quota_partitions_is_a_bounded_integer_and_the_prefix_has_no_hash_tag() -> None:
    base = {"SECRET_KEY": "k" * 64}
    assert load(base, dotenv_path=None).quota_partitions == 16
    assert load(base | {"QUOTA_PARTITIONS": "64"}, dotenv_path=None).quota_partitions == 64
    for bad in ("0", "257", "x"):
        with pytest.raises(ConfigError, match="QUOTA_PARTITIONS"):
            load(base | {"QUOTA_PARTITIONS": bad}, dotenv_path=None)
    with pytest.raises(ConfigError, match="REDIS_KEY_PREFIX"):
        load(base | {"REDIS_KEY_PREFIX": "a{b}:"}, dotenv_path=None)
