"""Money on the model-call routes (docs/api/gateway.md#billing): exactly the logged cost is charged to the
user and the key, a key that runs dry is exhausted (401, status 4 persisted), a shortfall charges nothing,
concurrent calls never overdraw, and with Redis the hot path runs no SQL statement at all."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from sqlalchemy import event, select

from models.keys import ApiKey
from models.logs import Log
from models.tables import User
from tests.conftest import Stack
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user, make_config, serve

TTS = "gemini-2.5-flash-preview-tts"
MOD = "omni-moderation-latest"


async def consume_logs(app: Running) -> list[Log]:
    await app.state.quota_sync.drain()
    async with app.state.db.transaction() as tx:
        return list((await tx.scalars(select(Log).where(Log.type == 2))).all())


async def priced_moderation(app: Running, fake: FakeOpenAI, usd: float = 0.001) -> None:
    await seed_channel(app.state, type=1, base_url=fake.url, models=MOD)
    await app.state.options.put("ModelPrice", f'{{"{MOD}": {usd}}}')  # 500 points a call


async def moderate(client: httpx.AsyncClient, key: str) -> httpx.Response:
    return await client.post("/v1/moderations", json={"input": "hello"}, headers={"Authorization": key})


async def test_balances_equal_start_minus_the_logged_costs(app: Running, gemini_fake: FakeGemini,
                                                           openai_fake: FakeOpenAI) -> None:
    uid = await add_user(app.state, "alice", quota=1_000_000)
    key_id, key = await seed_key(app.state, uid, remain=300_000)
    await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS)
    await priced_moderation(app, openai_fake)
    body = {"contents": [{"parts": [{"text": "Say hi to the world"}]}],
            "generationConfig": {"responseModalities": ["AUDIO"]}}
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
        for n in range(3):
            gemini_fake.audio_tokens = 100 * (n + 1)
            r = await client.post(f"/v1beta/models/{TTS}:generateContent", json=body,
                                  headers={"x-goog-api-key": key})
            assert r.status_code == 200, r.text
            assert (await moderate(client, key)).status_code == 200
        gemini_fake.fail("500")
        assert (await client.post(f"/v1beta/models/{TTS}:generateContent", json=body,
                                  headers={"x-goog-api-key": key})).status_code == 503
    logs = await consume_logs(app)
    assert len(logs) == 6
    spent = sum(log.quota for log in logs)
    assert sorted(log.quota for log in logs if log.model_name == MOD) == [500, 500, 500]
    assert await app.state.quota.balance("user", uid) == 1_000_000 - spent
    assert await app.state.quota.balance("key", key_id, owner=uid) == 300_000 - spent
    async with app.state.db.transaction() as tx:
        user = await tx.get(User, uid)
        api_key = await tx.get(ApiKey, key_id)
    assert user is not None and api_key is not None
    assert (user.quota, user.used_quota, user.request_count) == (1_000_000 - spent, spent, 6)
    assert (api_key.remain_quota, api_key.used_quota) == (300_000 - spent, spent)


async def test_a_key_that_runs_dry_is_exhausted(app: Running, openai_fake: FakeOpenAI) -> None:
    uid = await add_user(app.state, "bob", quota=1_000_000)
    key_id, key = await seed_key(app.state, uid, remain=1000)
    await priced_moderation(app, openai_fake)
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
        assert (await moderate(client, key)).status_code == 200
        assert (await moderate(client, key)).status_code == 200  # remain now 0 → status 4
        refused = await moderate(client, key)
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "token_exhausted"
    async with app.state.db.transaction() as tx:
        assert (await tx.get(ApiKey, key_id)).status == 4  # type: ignore[union-attr]
    assert len(openai_fake.received) == 2


async def test_a_shortfall_is_429_and_charges_nothing(app: Running, openai_fake: FakeOpenAI) -> None:
    uid = await add_user(app.state, "carol", quota=499)
    _, key = await seed_key(app.state, uid, unlimited=True)
    await priced_moderation(app, openai_fake)
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
        response = await moderate(client, key)
    assert response.status_code == 429
    assert response.headers["x-should-retry"] == "false"
    assert response.json()["error"]["type"] == "insufficient_quota"
    assert openai_fake.received == [] and await consume_logs(app) == []
    assert await app.state.quota.balance("user", uid) == 499


async def test_a_free_call_needs_no_balance_but_a_key_with_quota_left(app: Running, openai_fake: FakeOpenAI
                                                                    ) -> None:
    uid = await add_user(app.state, "gail", quota=0)
    _, unlimited = await seed_key(app.state, uid, unlimited=True)
    _, empty = await seed_key(app.state, uid, remain=0)
    await seed_channel(app.state, type=1, base_url=openai_fake.url, models=MOD)  # built-in price: free
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
        free = await moderate(client, unlimited)
        dry = await moderate(client, empty)
    assert free.status_code == 200, free.text
    assert dry.status_code == 401 and dry.json()["error"]["code"] == "token_exhausted"
    logs = await consume_logs(app)
    assert [(log.quota, log.user_id) for log in logs] == [(0, uid)]
    assert await app.state.quota.balance("user", uid) == 0


async def test_concurrent_calls_never_overdraw(app: Running, openai_fake: FakeOpenAI) -> None:
    uid = await add_user(app.state, "dave", quota=5000)  # exactly 10 calls of 500
    _, key = await seed_key(app.state, uid, unlimited=True)
    await priced_moderation(app, openai_fake)
    async with httpx.AsyncClient(base_url=app.url, timeout=30,
                                 limits=httpx.Limits(max_connections=40)) as client:
        results = await asyncio.gather(*(moderate(client, key) for _ in range(30)))
    statuses = sorted(r.status_code for r in results)
    assert statuses.count(200) == 10 and statuses.count(429) == 20
    assert await app.state.quota.balance("user", uid) == 0
    assert len(await consume_logs(app)) == 10


async def test_the_hot_path_runs_no_sql_with_redis(databases: object, redis_prefix: str, tmp_path: Path,
                                                   openai_fake: FakeOpenAI, gemini_fake: FakeGemini) -> None:
    from tests.conftest import _Databases, fresh_database
    from tests.services import REDIS_URL

    assert isinstance(databases, _Databases)
    url = await fresh_database(databases, "mariadb")
    # the readiness task's round (SQL, once a READY_INTERVAL) is no part of a call: kept out of the window
    config = make_config(url, tmp_path, REDIS_URL, redis_prefix, quota_sync_in_server=False,
                         ready_interval=60.0)
    async with serve(config) as app:
        uid = await add_user(app.state, "erin", quota=1_000_000)
        _, key = await seed_key(app.state, uid, remain=1_000_000)
        await priced_moderation(app, openai_fake)
        await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS)
        for name, value in (("ModelRequestRateLimitEnabled", "true"), ("ModelRequestRateLimitCount", "1000"),
                            ("ModelRequestRateLimitSuccessCount", "1000")):  # carried by reserve / settle
            await app.state.options.put(name, value)
        statements: list[str] = []

        def count(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
            statements.append(statement)

        body = {"contents": [{"parts": [{"text": "hi"}]}],
                "generationConfig": {"responseModalities": ["AUDIO"]}}
        async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
            assert (await moderate(client, key)).status_code == 200  # first use loads key, user, balances
            await asyncio.sleep(1.1)  # past the in-process memo: the next calls read the shared caches
            event.listen(app.state.db.engine.sync_engine, "before_cursor_execute", count)
            try:
                assert (await moderate(client, key)).status_code == 200
                r = await client.post(f"/v1beta/models/{TTS}:generateContent", json=body,
                                      headers={"x-goog-api-key": key})
                assert r.status_code == 200
                r = await client.post(f"/v1beta/models/{TTS}:streamGenerateContent?alt=sse", json=body,
                                      headers={"x-goog-api-key": key})
                assert r.status_code == 200
            finally:
                event.remove(app.state.db.engine.sync_engine, "before_cursor_execute", count)
        assert statements == []
        assert len(await consume_logs(app)) == 4


async def test_settlement_is_exact_on_embedded_and_server_stacks(stack: Stack, tmp_path: Path,
                                                                 openai_fake: FakeOpenAI) -> None:
    """The same calls on a second app sharing the stack see the same balance (Redis or SQL)."""
    config = make_config(stack.database_url, tmp_path, stack.redis_url, stack.prefix)
    async with serve(config) as app:
        uid = await add_user(app.state, "fay", quota=10_000)
        _, key = await seed_key(app.state, uid, unlimited=True)
        await priced_moderation(app, openai_fake, usd=0.0021)  # 1050 points
        async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
            for _ in range(4):
                assert (await moderate(client, key)).status_code == 200
        logs = await consume_logs(app)
        assert [log.quota for log in logs] == [1050] * 4
        assert await app.state.quota.balance("user", uid) == 10_000 - 4200
