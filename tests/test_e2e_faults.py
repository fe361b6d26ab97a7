"""Faults under load, end to end: the books stay exact through a worker killed by the OS and a Redis
restart.

The real `tollway serve --workers 2` on MariaDB and a redis-server of the test's own (on a free port,
never the shared one). Root funds itself and a limited API key, then six callers make paid calls (OpenAI
moderation at a fixed price, Gemini speech priced by its audio tokens) through the local fakes while:

1. one worker is killed with SIGKILL — it must be replaced (two workers serve again);
2. the Redis is restarted (SHUTDOWN NOSAVE, then started again on the same port).

Calls may fail during the faults (503, or a connection dropped by the killed worker). Afterwards the
worker count is 2, and once the sweeper has returned the holds of the killed worker's calls and the quota
sync has drained: every call answered 200 has exactly one consume log (none uncharged, none charged
twice), no log belongs to a call that did not happen, and the books conserve — user quota + consumed ==
initial, key remain + consumed == initial, `used_quota` == consumed for the user, the key and the
channels, `request_count` == the number of consume logs, and the live balances in Redis equal SQL.

The test Redis runs with `appendonly yes` and `appendfsync always` in a temporary directory, so it comes
back from the restart with every write it acknowledged: without persistence a Redis restart loses, by
design, the usage settled but not yet synced — charge and log together
(docs/PRODUCTION.md#quota-guarantees, 5) — and the balances could then not be compared with an initial value.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from sqlalchemy import func, select

from models.channels import Channel
from models.db import Database
from models.keys import ApiKey
from models.logs import Log
from models.tables import User
from quota.partitions import DEFAULT_PARTITIONS, partition_of, tag
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI
from tests.redis_server import own_redis
from tests.services import create_database, drop_database, unavailable
from tests.test_e2e_serve import ROOT_PASSWORD, clean_env, free_port, serving, setup_root
from tests.workers import server_workers, wait_for

pytestmark = pytest.mark.slow

TTS = "gemini-2.5-flash-preview-tts"
MOD = "omni-moderation-latest"
CALLERS = 6
STEP = 30  # successful calls between two phases
DEADLINE = 120.0  # seconds; bounds a hang only
PREFIX = "twtest:faults:"


@dataclass
class Calls:
    ok: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)  # answered, not 200
    dropped: set[str] = field(default_factory=set)  # no answer (the connection went with the worker)
    progress: asyncio.Event = field(default_factory=asyncio.Event)


async def _call(client: httpx.AsyncClient, key: str, n: int, calls: Calls) -> None:
    rid = secrets.token_hex(16)  # echoed by the server and stored in the consume log
    headers = {"X-Request-Id": rid}
    try:
        if n % 2:
            response = await client.post("/v1/moderations", json={"input": "hello"},
                                         headers={**headers, "Authorization": f"Bearer {key}"})
        else:
            body = {"contents": [{"parts": [{"text": "Say hi"}]}],
                    "generationConfig": {"responseModalities": ["AUDIO"]}}
            response = await client.post(f"/v1beta/models/{TTS}:generateContent", json=body,
                                         headers={**headers, "x-goog-api-key": key})
    except httpx.TransportError:
        calls.dropped.add(rid)
        await asyncio.sleep(0.05)
        return
    if response.status_code == 200:
        calls.ok.add(rid)
        calls.progress.set()
    else:
        assert response.status_code in (502, 503, 504), response.text  # a fault, never a 500 or a 4xx
        calls.failed.add(rid)
        await asyncio.sleep(0.05)


async def _load(base_url: str, key: str, calls: Calls, stop: asyncio.Event) -> None:
    async def caller(i: int) -> None:
        async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
            n = i
            while not stop.is_set():
                await _call(client, key, n, calls)
                n += 1

    await asyncio.gather(*(caller(i) for i in range(CALLERS)))


async def _until(calls: Calls, count: int) -> None:
    async def wait() -> None:
        while len(calls.ok) < count:
            calls.progress.clear()
            await calls.progress.wait()

    await asyncio.wait_for(wait(), DEADLINE)


def _ready(proc: Any, main_pid: int) -> Callable[[], bool]:
    def check() -> bool:
        workers = server_workers(main_pid)
        return len(workers) == 2 and all(f"Worker ready [{pid}]" in proc.stdout for pid in workers.values())
    return check


async def _settled(redis_url: str) -> None:
    """Wait until no hold is open and the sync has committed the whole stream."""
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        async def done() -> bool:
            for p in range(DEFAULT_PARTITIONS):
                q = f"{PREFIX}q:{tag(p)}:"
                if await client.zcard(f"{q}holds"):
                    return False
                last = await client.xrevrange(f"{q}stream", count=1)
                if last and await client.get(f"{q}cursor") != last[0][0]:
                    return False
            return True

        for _ in range(int(DEADLINE * 10)):
            if await done():
                return
            await asyncio.sleep(0.1)
        raise AssertionError("the holds were not swept or the sync did not drain")
    finally:
        await client.aclose()


async def _live(redis_url: str, name: str) -> int:
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        return int(await client.get(f"{PREFIX}{name}") or 0)
    finally:
        await client.aclose()


async def _set_up(base_url: str, gemini: FakeGemini, oai: FakeOpenAI) -> tuple[int, str]:
    """Root, two priced channels, a funded root and a limited key; returns (root id, key)."""
    await asyncio.to_thread(setup_root, base_url, "mysql")
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as admin:
        login = await admin.post("/api/user/login", json={"username": "root", "password": ROOT_PASSWORD})
        assert login.status_code == 200, login.text
        uid = int(login.json()["data"]["id"])
        admin.headers["New-Api-User"] = str(uid)
        for channel in ({"name": "gemini", "type": 24, "key": "g-key", "base_url": gemini.url, "models": TTS,
                         "group": "default"},
                        {"name": "openai", "type": 1, "key": "o-key", "base_url": oai.url, "models": MOD,
                         "group": "default"}):
            created = await admin.post("/api/channel/", json={"mode": "single", "channel": channel})
            assert created.status_code == 200, created.text
        priced = await admin.put("/api/option/", json={"key": "ModelPrice", "value": f'{{"{MOD}": 0.001}}'})
        assert priced.status_code == 200, priced.text
        topped = await admin.post("/api/user/manage", json={"id": uid, "action": "add_quota", "mode": "add",
                                                             "value": 50_000_000})
        assert topped.status_code == 200, topped.text
        made = await admin.post("/api/token/", json={"name": "load", "remain_quota": 20_000_000})
        assert made.status_code == 200, made.text
        return uid, str(made.json()["data"]["key"])


async def _books(db_url: str, uid: int) -> dict[str, Any]:
    db = Database(db_url, pool_size=1)
    try:
        async with db.transaction() as tx:
            user = await tx.scalar(select(User).where(User.id == uid))
            key = await tx.scalar(select(ApiKey).where(ApiKey.user_id == uid))
            logs = list((await tx.scalars(select(Log).where(Log.user_id == uid, Log.type == 2))).all())
            channels = int(await tx.scalar(select(func.coalesce(func.sum(Channel.used_quota), 0))) or 0)
        assert user is not None and key is not None
        return {"quota": user.quota, "used": user.used_quota, "requests": user.request_count,
                "key_id": key.id, "remain": key.remain_quota, "key_used": key.used_quota,
                "channels_used": channels, "logs": logs}
    finally:
        await db.dispose()


async def test_paid_calls_through_a_worker_kill_and_a_redis_restart_keep_the_books(tmp_path: Path) -> None:
    try:
        db_url = await asyncio.to_thread(create_database, "mariadb")
    except Exception as exc:
        unavailable("mariadb", exc)
        raise
    try:
        with own_redis(tmp_path / "redis", appendonly=True) as redis:
            env = clean_env(DATABASE_URL=db_url, REDIS_URL=redis.url, REDIS_KEY_PREFIX=PREFIX,
                            SECRET_KEY=secrets.token_hex(32), DATA_DIR=str(tmp_path / "data"),
                            HOST="127.0.0.1", PORT=str(free_port()), GLOBAL_API_RATE_LIMIT="0",
                            CRITICAL_RATE_LIMIT="0", QUOTA_HOLD_TIMEOUT="2", QUOTA_SYNC_INTERVAL="0.2",
                            UPSTREAM_ALLOW_PRIVATE="127.0.0.1/32")  # the fake upstreams are on loopback
            async with FakeGemini() as gemini, FakeOpenAI() as oai:
                with serving(tmp_path, env, "--workers", "2") as (proc, base_url):
                    await _faults(proc, base_url, db_url, redis.url, redis.restart, gemini, oai)
    finally:
        await asyncio.to_thread(drop_database, "mariadb", db_url)


async def _faults(proc: Any, base_url: str, db_url: str, redis_url: str, restart_redis: Callable[[], None],
                  gemini: FakeGemini, oai: FakeOpenAI) -> None:
    main_pid = proc.popen.pid
    uid, key = await _set_up(base_url, gemini, oai)
    await asyncio.to_thread(wait_for, _ready(proc, main_pid), DEADLINE, "two ready workers")
    await _settled(redis_url)
    start = await _books(db_url, uid)
    assert start["logs"] == [] and start["remain"] == 20_000_000

    calls = Calls()
    stop = asyncio.Event()
    load = asyncio.create_task(_load(base_url, key, calls, stop))
    try:
        await _until(calls, STEP)
        victim = sorted(server_workers(main_pid).values())[0]
        os.kill(victim, signal.SIGKILL)
        await asyncio.to_thread(wait_for, lambda: victim not in server_workers(main_pid).values()
                                and _ready(proc, main_pid)(), DEADLINE, f"the killed worker replaced\n"
                                f"{proc.output()}")
        await _until(calls, len(calls.ok) + STEP)
        await asyncio.to_thread(restart_redis)
        await _until(calls, len(calls.ok) + STEP)  # served again after the restart
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(load, DEADLINE)
    load.result()  # a caller that failed an assertion fails the test

    assert len(server_workers(main_pid)) == 2
    await _settled(redis_url)
    end = await _books(db_url, uid)
    logs: list[Log] = end["logs"]
    logged = [log.request_id for log in logs]
    assert len(logged) == len(set(logged)), "a call was charged twice"
    assert calls.ok <= set(logged), f"{len(calls.ok - set(logged))} successful calls were not charged"
    assert set(logged) <= calls.ok | calls.failed | calls.dropped
    consumed = sum(log.quota for log in logs)
    assert consumed > 0 and all(log.quota > 0 for log in logs)
    assert end["quota"] + consumed == start["quota"]
    assert end["remain"] + consumed == start["remain"]
    assert end["used"] == end["key_used"] == end["channels_used"] == consumed
    assert end["requests"] == len(logs)
    q = f"q:{tag(partition_of(uid, DEFAULT_PARTITIONS))}:"
    assert await _live(redis_url, f"{q}u:{uid}") == end["quota"]
    assert await _live(redis_url, f"{q}t:{end['key_id']}") == end["remain"]
    assert f"(pid {victim}) was killed by SIGKILL" in proc.stderr
