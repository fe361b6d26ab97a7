"""The short-lived keys of account security (`KeyValue`): one suite over every store that serves them —
Redis, the in-process backend, and SQL (`models/kv.py`: SQLite, MariaDB, PostgreSQL) for a deployment
without Redis.

Proves on each: texts and counters expire after their time to live; `take_text` gives a value to one of
20 concurrent takers; `set_text_if_absent` lets one of 10 concurrent writers in, and a writer after the
expiry; `delete_if_equal` deletes only the value it names; 20 concurrent increments count 1…20 and a
counter starts again after its expiry. SQL only: the keys outlive the process (a new store on the same
database sees them), and the expired rows are purged. End to end: embedded mode keeps a login lockout
across a restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from backend.base import KeyValue
from backend.memory import MemoryBackend
from backend.redis import RedisBackend
from models.db import Database
from models.kv import KvRow, SqlKeyValue
from tests.conftest import REDIS_URL, fresh_database
from tests.harness import add_user, make_config, serve
from tests.redis_cluster import cluster_backend


class FakeTime:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Subject:
    kv: KeyValue
    advance: Callable[[float], Awaitable[None]]  # let `seconds` pass for the store


@pytest.fixture(params=["memory", "redis", "cluster", "sqlite", "mariadb", "postgres"])
async def subject(request: pytest.FixtureRequest, databases: Any, redis_prefix: str
                  ) -> AsyncIterator[Subject]:
    time = FakeTime()

    async def shift(seconds: float) -> None:
        time.now += seconds

    if request.param == "memory":
        yield Subject(MemoryBackend(clock=time), shift)
    elif request.param in ("redis", "cluster"):
        backend = (cluster_backend(request) if request.param == "cluster"
                   else RedisBackend(REDIS_URL, redis_prefix))
        try:
            yield Subject(backend, asyncio.sleep)  # Redis keeps its own time: the TTLs below are short
        finally:
            await backend.close()
    else:
        db = Database(await fresh_database(databases, request.param))
        try:
            yield Subject(SqlKeyValue(db, now=time), shift)
        finally:
            await db.dispose()


async def test_texts_and_counters_expire_after_their_time_to_live(subject: Subject) -> None:
    kv = subject.kv
    assert (await kv.get_text("t"), await kv.ttl("t")) == (None, 0)
    await kv.set_text("t", "one", 1)
    await kv.set_text("t", "two", 1)  # replaces
    assert await kv.incr("n", 1) == 1
    assert await kv.get_text("t") == "two" and 0 < await kv.ttl("t") <= 1
    await subject.advance(1.2)
    assert (await kv.get_text("t"), await kv.ttl("t"), await kv.take_text("t")) == (None, 0, None)
    assert await kv.incr("n", 60) == 1  # counts again from one
    await kv.set_text("d", "x", 60)
    await kv.delete("d", "n", "absent")
    assert (await kv.get_text("d"), await kv.incr("n", 60)) == (None, 1)


async def test_one_of_many_concurrent_takers_gets_the_text(subject: Subject) -> None:
    kv = subject.kv
    await kv.set_text("code", "secret", 60)
    taken = await asyncio.gather(*(kv.take_text("code") for _ in range(20)))
    assert taken.count("secret") == 1 and taken.count(None) == 19
    assert await kv.get_text("code") is None


async def test_set_if_absent_lets_one_writer_in_and_one_after_the_expiry(subject: Subject) -> None:
    kv = subject.kv
    won = await asyncio.gather(*(kv.set_text_if_absent("lock", f"w{n}", 1) for n in range(10)))
    assert won.count(True) == 1
    holder = f"w{won.index(True)}"
    assert await kv.get_text("lock") == holder
    assert not await kv.delete_if_equal("lock", "someone else")
    assert await kv.get_text("lock") == holder
    await subject.advance(1.2)
    assert not await kv.delete_if_equal("lock", holder)  # expired: nothing to delete
    assert await kv.set_text_if_absent("lock", "later", 60)
    assert await kv.delete_if_equal("lock", "later") and await kv.get_text("lock") is None


async def test_concurrent_increments_count_each_once(subject: Subject) -> None:
    counts = await asyncio.gather(*(subject.kv.incr("fails", 60) for _ in range(20)))
    assert sorted(counts) == list(range(1, 21))


@pytest.mark.parametrize("kind", ["sqlite", "mariadb", "postgres"])
async def test_sql_keys_outlive_the_store_and_expired_rows_are_purged(kind: str, databases: Any) -> None:
    db = Database(await fresh_database(databases, kind))
    try:
        time = FakeTime()
        kv = SqlKeyValue(db, now=time)
        await kv.set_text("reset", "token", 900)
        await kv.incr("login_fail", 900)
        again = SqlKeyValue(db, now=time)  # another process on the same database
        assert await again.get_text("reset") == "token" and await again.incr("login_fail", 900) == 2
        time.now += 901
        assert await again.purge_expired() == 2
        async with db.transaction() as tx:
            assert await tx.scalar(select(func.count()).select_from(KvRow)) == 0
    finally:
        await db.dispose()


async def test_embedded_mode_keeps_a_login_lockout_across_a_restart(databases: Any, tmp_path: Path) -> None:
    config = make_config(await fresh_database(databases, "sqlite"), tmp_path)
    async with serve(config) as first:
        await add_user(first.state, "alice")
        for _ in range(10):
            assert (await first.client().login("alice", "wrong-password")).status_code == 401
        assert (await first.client().login("alice", "password123")).status_code == 429
    async with serve(config) as second:  # a restart: no Redis, the counter was in SQL
        assert (await second.client().login("alice", "password123")).status_code == 429
