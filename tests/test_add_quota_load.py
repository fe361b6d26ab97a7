"""An admin's `add_quota` during model-call load keeps the books exact, across two real `tollway serve`
processes on one MariaDB and one Redis (docs/MONEY.md#the-invariants-and-their-proofs).

While one user's key makes paid calls concurrently on both processes (an OpenAI moderation at a fixed
price, through the local fake), an admin adds quota to that same user over and over, also on both
processes, each request its own adjustment. Once the quota syncs (one per process) have caught up:
final balance = initial + Σ added − Σ consume logs, `used_quota` = Σ consume logs, `request_count` = the
number of calls, one consume log per call and one manage log per addition (with its amount), and the live
balance each process shows equals SQL. Run with the logs in the main database and with the logs in a
separate PostgreSQL database (`LOG_DATABASE_URL`), where the main `logs` table then stays empty.
"""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from core.enums import LogType
from models.db import Database
from models.logs import Log
from models.tables import User
from tests.fakes.openai import FakeOpenAI
from tests.services import (
    REDIS_URL,
    create_database,
    drop_database,
    redis_ping,
    redis_purge,
    run_blocking,
    unavailable,
)
from tests.test_e2e_serve import ROOT_PASSWORD, clean_env, free_port, serving, setup_root

pytestmark = pytest.mark.slow

PASSWORD = "password-123"
MOD = "omni-moderation-latest"
PRICE = 1000  # points per call at 0.002 USD
INITIAL = 100_000
CALLS = 60
ADDS = 20
CONCURRENCY = 8
DEADLINE = 60.0  # seconds; bounds a hang only


def _data(reply: httpx.Response) -> Any:
    assert reply.status_code == 200, reply.text
    return reply.json()["data"]


async def _client(base_url: str, username: str, password: str = PASSWORD) -> httpx.AsyncClient:
    client = httpx.AsyncClient(base_url=base_url, timeout=60)
    reply = await client.post("/api/user/login", json={"username": username, "password": password})
    assert reply.status_code == 200, reply.text
    client.headers["New-Api-User"] = str(reply.json()["data"]["id"])
    return client


async def _books(db_url: str, logs_url: str, user_id: int) -> tuple[User, list[Log], int]:
    """The user's SQL row, the user's log rows (from the log database) and the main `logs` row count."""
    db = Database(db_url, pool_size=1)
    logs_db = Database(logs_url, pool_size=1) if logs_url != db_url else db
    try:
        async with db.transaction() as tx:
            user = await tx.get(User, user_id)
            main_rows = len((await tx.scalars(select(Log.id))).all())
        async with logs_db.transaction() as tx:
            logs = list((await tx.scalars(select(Log).where(Log.user_id == user_id))).all())
        assert user is not None
        return user, logs, main_rows
    finally:
        await db.dispose()
        if logs_db is not db:
            await logs_db.dispose()


async def _scenario(urls: tuple[str, str], db_url: str, logs_url: str, openai: FakeOpenAI) -> None:
    root = [await _client(url, "root", ROOT_PASSWORD) for url in urls]
    try:
        _data(await root[0].put("/api/option/", json={"key": "ModelPrice", "value": f'{{"{MOD}": 0.002}}'}))
        _data(await root[1].post("/api/channel/", json={"mode": "single", "channel": {
            "name": "mod", "type": 1, "key": "o-key", "base_url": openai.url, "models": MOD,
            "group": "default"}}))
        _data(await root[0].post("/api/user/", json={"username": "ula", "password": PASSWORD}))
        ula = [await _client(url, "ula") for url in urls]
        uid = int(ula[0].headers["New-Api-User"])
        _data(await root[1].post("/api/user/manage", json={"id": uid, "action": "add_quota", "mode": "add",
                                                           "value": INITIAL}))
        made = _data(await ula[0].post("/api/token/", json={"name": "calls", "unlimited_quota": True}))
        callers = [httpx.AsyncClient(base_url=url, timeout=60,
                                     headers={"Authorization": f"Bearer {made['key']}"}) for url in urls]
        gate = asyncio.Semaphore(CONCURRENCY)

        async def call(n: int) -> int:
            async with gate:
                reply = await callers[n % 2].post("/v1/moderations", json={"input": "hello"})
                return reply.status_code

        async def add(n: int) -> int:
            value = 1_000 + n
            reply = await root[n % 2].post("/api/user/manage", json={"id": uid, "action": "add_quota",
                                                                      "mode": "add", "value": value})
            assert reply.status_code == 200, reply.text
            return value

        async def adds() -> list[int]:
            added = []
            for n in range(ADDS):  # repeatedly, while the calls run
                added.append(await add(n))
                await asyncio.sleep(0.01)
            return added

        try:
            statuses, added = await asyncio.gather(
                asyncio.gather(*(call(n) for n in range(CALLS))), adds())
        finally:
            for caller in callers:
                await caller.aclose()
        assert list(statuses) == [200] * CALLS  # the initial balance covers every call
        total_added = INITIAL + sum(added)

        for _ in range(int(DEADLINE * 10)):  # until both processes' syncs have caught up
            user, logs, main_rows = await _books(db_url, logs_url, uid)
            live = [_data(await side.get("/api/user/self"))["quota"] for side in ula]
            if user.request_count == CALLS and all(value == user.quota for value in live) \
                    and sum(x.type == LogType.MANAGE for x in logs) == ADDS + 1:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the quota sync did not catch up")
        consume = [x for x in logs if x.type == LogType.CONSUME]
        manage = [x for x in logs if x.type == LogType.MANAGE]
        spent = sum(x.quota for x in consume)
        assert len(consume) == CALLS and spent == CALLS * PRICE
        assert sorted(x.quota for x in manage) == sorted([INITIAL, *added])
        assert user.quota == total_added - spent
        assert (user.used_quota, user.request_count) == (spent, CALLS)
        assert len({x.ref for x in logs}) == len(logs)
        if logs_url != db_url:
            assert main_rows == 0
        for side in ula:
            await side.aclose()
    finally:
        for client in root:
            await client.aclose()


@pytest.mark.parametrize("logs", ["main", "postgres"])
def test_add_quota_during_model_call_load_keeps_the_books_exact(tmp_path: Path, logs: str) -> None:
    try:
        run_blocking(redis_ping())
        db_url = create_database("mariadb")
        logs_url = create_database("postgres") if logs == "postgres" else db_url
    except Exception as exc:
        unavailable("mariadb, postgresql and redis", exc)
        raise
    prefix = f"twtest:addq:{secrets.token_hex(4)}:"
    shared = {"DATABASE_URL": db_url, "REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": prefix,
              "SECRET_KEY": secrets.token_hex(32), "HOST": "127.0.0.1", "GLOBAL_API_RATE_LIMIT": "0",
              "CRITICAL_RATE_LIMIT": "0", "QUOTA_SYNC_INTERVAL": "0.2",
              "UPSTREAM_ALLOW_PRIVATE": "127.0.0.1/32"}
    if logs_url != db_url:
        shared["LOG_DATABASE_URL"] = logs_url  # `tollway serve` migrates it at start-up
    env_one = clean_env(**shared, DATA_DIR=str(tmp_path / "one"), PORT=str(free_port()))
    env_two = clean_env(**shared, DATA_DIR=str(tmp_path / "two"), PORT=str(free_port()))

    async def run(url_one: str, url_two: str) -> None:
        async with FakeOpenAI() as openai:
            await _scenario((url_one, url_two), db_url, logs_url, openai)

    try:
        with serving(tmp_path, env_one) as (_, url_one):
            setup_root(url_one, "mysql")
            with serving(tmp_path, env_two) as (_, url_two):
                asyncio.run(run(url_one, url_two))
    finally:
        run_blocking(redis_purge(prefix))
        drop_database("mariadb", db_url)
        if logs_url != db_url:
            drop_database("postgres", logs_url)
