"""How the sync reads a partition's stream (quota/backends/redis_quota.py `read`): with the partition's epoch
in place, a plain XRANGE between two reads of the epoch, no script; a partition without an epoch goes
through `read.lua`, which creates it. On a Redis of the test's own, so that INFO commandstats counts only
this test's commands."""

from __future__ import annotations

import secrets
from pathlib import Path

import redis.asyncio as aioredis

from backend.redis import RedisBackend
from quota.backends.redis_quota import RedisQuotaStore
from tests.redis_server import own_redis


async def calls(client: aioredis.Redis, command: str) -> int:
    stats = await client.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


async def test_a_batch_is_read_without_a_script_once_the_epoch_exists(tmp_path: Path) -> None:
    with own_redis(tmp_path / "redis") as server:
        store = RedisQuotaStore(RedisBackend(server.url, f"t:{secrets.token_hex(4)}:"))
        probe = aioredis.Redis.from_url(server.url)
        try:
            user = 7
            partition = store.partition(user)
            assert await store.epoch(partition) is None
            epoch, entries = await store.read(partition, "0-0", 100)  # no epoch yet: read.lua makes it
            assert entries == [] and await store.epoch(partition) == epoch

            await store.load_locked("user", user, 1_000, "0-0")
            for n in range(3):
                await store.adjust("user", user, "add", 10 + n, f"ref-{n}", None, False)
            scripts, ranges = await calls(probe, "evalsha"), await calls(probe, "xrange")
            read_epoch, entries = await store.read(partition, "0-0", 100)
            assert await calls(probe, "evalsha") == scripts  # no script ran
            assert await calls(probe, "xrange") == ranges + 1
            assert read_epoch == epoch
            assert [(e.kind, e.user_id, e.amount, e.ref) for e in entries] == [
                ("adj", user, 10, "ref-0"), ("adj", user, 11, "ref-1"), ("adj", user, 12, "ref-2")]
            _, rest = await store.read(partition, entries[0].id, 100)  # after a cursor: the rest only
            assert [e.ref for e in rest] == ["ref-1", "ref-2"]

            await probe.delete(store.epochs[partition])  # the partition's data is lost: a new epoch
            new_epoch, _ = await store.read(partition, "0-0", 100)
            assert new_epoch != epoch and await store.epoch(partition) == new_epoch
        finally:
            await probe.aclose()
            await store.r.aclose()
