"""After a Redis restart the service answers again at once.

Connections the pool kept from before the restart are dead. One the event loop has seen closed is
replaced when it is taken from the pool; one whose close is seen only after the command was written
(a busy worker) fails on the reply, and the call is retried once on a fresh connection when running it
twice is safe (reads, SET, DEL, sessions, the quota scripts — idempotent by hold id or ref), never for a
rate-limit charge. The tests run a redis-server of their own (tests/redis_server.py) and restart it:
over HTTP with the app's loop running (the first requests after it are 200, not 503), and with the loop
blocked during the restart (the retry itself, and that each quota call counts exactly once).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from backend.base import BackendUnavailable
from backend.redis import RedisBackend
from tests.conftest import _Databases, fresh_database
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user, make_config, serve
from tests.quota.env import build, consume_log
from tests.redis_server import own_redis

MOD = "omni-moderation-latest"
CALLERS = 12  # more than one pooled connection is in use before the restart


async def _moderate(client: httpx.AsyncClient, key: str) -> httpx.Response:
    return await client.post("/v1/moderations", json={"input": "hello"}, headers={"Authorization": key})


async def _login(running: Running) -> httpx.AsyncClient:
    client = httpx.AsyncClient(base_url=running.url, timeout=30)
    response = await client.post("/api/user/login", json={"username": "alice", "password": "password123"})
    assert response.status_code == 200, response.text
    client.headers["New-Api-User"] = str(response.json()["data"]["id"])
    return client


async def test_the_first_requests_after_a_redis_restart_succeed(databases: _Databases, tmp_path: Path,
                                                                openai_fake: FakeOpenAI) -> None:
    url = await fresh_database(databases, "mariadb")
    with own_redis(tmp_path / "redis") as redis:
        config = make_config(url, tmp_path, redis.url, "twtest:restart:")
        async with serve(config) as app:
            uid = await add_user(app.state, "alice", quota=1_000_000)
            _, key = await seed_key(app.state, uid, unlimited=True)
            await seed_channel(app.state, type=1, base_url=openai_fake.url, models=MOD)
            await app.state.options.put("ModelPrice", f'{{"{MOD}": 0.001}}')
            async with httpx.AsyncClient(base_url=app.url, timeout=30,
                                         limits=httpx.Limits(max_connections=2 * CALLERS)) as calls:
                before = await asyncio.gather(*(_moderate(calls, key) for _ in range(CALLERS)))
                assert [r.status_code for r in before] == [200] * CALLERS
                admin = await _login(app)
                try:
                    assert (await admin.get("/api/user/self")).status_code == 200

                    # The event loop keeps running while Redis is down and comes back (a thread does it).
                    await asyncio.to_thread(redis.restart)

                    # The sessions are gone with Redis's data: logging in again is the first request.
                    again = await admin.post("/api/user/login",
                                             json={"username": "alice", "password": "password123"})
                    assert again.status_code == 200, again.text
                    me = await asyncio.gather(*(admin.get("/api/user/self") for _ in range(CALLERS)))
                    assert [r.status_code for r in me] == [200] * CALLERS, [r.text for r in me]
                    after = await asyncio.gather(*(_moderate(calls, key) for _ in range(CALLERS)))
                    assert [r.status_code for r in after] == [200] * CALLERS, [r.text for r in after]
                finally:
                    await admin.aclose()


# ---- the backend, when the worker's event loop did not see the connections close ------------------------

async def test_a_broken_connection_is_retried_only_for_calls_that_may_run_twice(tmp_path: Path) -> None:
    """A busy worker: Redis restarts while the event loop is blocked, so the pooled connections look alive
    when taken and the command is written before the close is seen. The reply then fails with "closed by
    server", and the backend cannot know whether the command ran: an idempotent call is run again on a
    fresh connection, a rate-limit charge is not (it could count twice) and answers BackendUnavailable."""
    with own_redis(tmp_path / "redis") as redis:
        backend = RedisBackend(redis.url, "twtest:retry:")
        try:
            async def stale_pool() -> None:
                await asyncio.gather(*(backend.set_text("k", "v", 60) for _ in range(4)))
                await backend.delete_if_equal("absent", "v")  # a script: the scripts' own connection too
                redis.restart()  # deliberately blocking: the loop sees nothing until the next call

            await stale_pool()
            await backend.set_text("k", "after", 60)
            assert await backend.get_text("k") == "after"

            await stale_pool()
            assert await backend.get_text("k") is None  # restarted without persistence: empty

            await stale_pool()
            with pytest.raises(BackendUnavailable):
                await backend.gcra("g", 10, 60.0)
            assert (await backend.gcra("g", 10, 60.0)).remaining == 9  # the failed charge never ran
        finally:
            await backend.close()


async def test_quota_calls_survive_a_restart_the_loop_did_not_see(databases: _Databases,
                                                                  tmp_path: Path) -> None:
    """The quota scripts are idempotent (by hold id, by adjustment ref), so they are retried too; with an
    append-only Redis the balances come back, and each call counted exactly once."""
    url = await fresh_database(databases, "mariadb")
    with own_redis(tmp_path / "redis", appendonly=True) as redis:
        env = build(url, redis.url, "twtest:retry:")
        try:
            uid = await env.add_user(10_000)
            key = await env.add_key(uid, remain=5_000)
            first = await env.engine.reserve(uid, 100, key_id=key, key_limited=True)
            await env.engine.settle(first, 40, log=consume_log(user_id=uid, quota=40))
            redis.restart()  # blocking, as above
            second = await env.engine.reserve(uid, 300, key_id=key, key_limited=True)
            assert (second.user_balance, second.key_balance) == (10_000 - 40 - 300, 5_000 - 40 - 300)
            redis.restart()
            assert (await env.engine.settle(second, 250)).applied
            redis.restart()
            await env.engine.credit("user", uid, 1_000, ref="after-restart")
            assert await env.engine.balance("user", uid) == 10_000 - 40 - 250 + 1_000
            assert await env.engine.balance("key", key, owner=uid) == 5_000 - 40 - 250
            await env.sync.drain()
            row = await env.user_row(uid)
            assert (row.quota, row.used_quota, row.request_count) == (10_000 - 290 + 1_000, 290, 2)
        finally:
            await env.close()
