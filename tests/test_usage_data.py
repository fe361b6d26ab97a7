"""Usage data (docs/api/logs.md#usage-data) on every stack (SQLite, MariaDB + Redis, PostgreSQL + Redis), over
HTTP against the real app with real model calls.

Proved here:
- the quota sync adds each consume log to its (user, model, hour) bucket — count, tokens and quota equal
  the logs' sums — and nothing else writes one; with `DataExportEnabled` off no bucket grows;
- `GET /api/data/self` answers the caller's own buckets oldest first; `GET /api/data/` with `username`
  one user's buckets, without it every user's summed per (model, hour) with `user_id` 0;
  `GET /api/data/users` (admin) every user's summed per (username, hour), every model together;
- the window defaults to the last 7 days; a start after the end is a 400 on both, a span over 30 days a
  400 on `/self`, and bad numbers are 400s naming the parameter.
"""

from __future__ import annotations

import json

import httpx
from sqlalchemy import func, select

from models.logs import Log
from models.quota_data import QuotaData
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Api, Running, add_user, data_of, fails, logged_in

MOD = "omni-moderation-latest"
MOD_2 = "text-moderation-latest"
HOUR = 3600


async def calls(app: Running, key: str, n: int, model: str = MOD) -> None:
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
        for _ in range(n):
            r = await client.post("/v1/moderations", json={"input": "hello world!", "model": model},
                                  headers={"Authorization": key})
            assert r.status_code == 200, r.text


async def setup(app: Running, openai_fake: FakeOpenAI) -> tuple[int, str, int, str, Api, Api]:
    await seed_channel(app.state, type=1, base_url=openai_fake.url, models=MOD)
    await app.state.options.put("ModelPrice", json.dumps({MOD: 0.001}))  # 500 points a call
    alice = await add_user(app.state, "alice", quota=10_000_000)
    bob = await add_user(app.state, "bob", quota=10_000_000)
    _, alice_key = await seed_key(app.state, alice, unlimited=True)
    _, bob_key = await seed_key(app.state, bob, unlimited=True)
    await add_user(app.state, "admin1", role=10)
    return alice, alice_key, bob, bob_key, await logged_in(app, "alice"), await logged_in(app, "admin1")


async def test_buckets_follow_the_logs(app: Running, openai_fake: FakeOpenAI) -> None:
    alice, alice_key, bob, bob_key, alice_api, admin = await setup(app, openai_fake)
    app.clock.shift(HOUR - app.clock.now_s() % HOUR + 10)  # 10 s into an hour
    hour1 = app.clock.now_s() // HOUR * HOUR
    await calls(app, alice_key, 3)
    await calls(app, bob_key, 1)
    app.clock.shift(HOUR)
    await calls(app, alice_key, 2)
    await app.state.quota_sync.drain()
    own = data_of(await alice_api.get("/api/data/self"))
    assert [(r["created_at"], r["count"], r["quota"], r["model_name"]) for r in own] == [
        (hour1, 3, 1500, MOD), (hour1 + HOUR, 2, 1000, MOD)]
    assert {r["user_id"] for r in own} == {alice} and {r["username"] for r in own} == {"alice"}
    async with app.state.db.transaction() as tx:
        tokens = await tx.scalar(select(func.sum(Log.prompt_tokens + Log.completion_tokens))
                                 .where(Log.user_id == alice, Log.type == 2))
    assert sum(r["token_used"] for r in own) == tokens
    summed = data_of(await admin.get("/api/data/"))
    assert [(r["created_at"], r["count"], r["user_id"], r["username"]) for r in summed] == [
        (hour1, 4, 0, ""), (hour1 + HOUR, 2, 0, "")]
    bobs = data_of(await admin.get("/api/data/", params={"username": "bob"}))
    assert [(r["user_id"], r["count"], r["quota"]) for r in bobs] == [(bob, 1, 500)]
    assert data_of(await admin.get("/api/data/", params={"username": "nobody"})) == []
    window = data_of(await alice_api.get("/api/data/self", params={"start_timestamp": hour1 + 1}))
    assert [r["created_at"] for r in window] == [hour1 + HOUR]
    app.clock.shift(8 * 86400)  # the default window is the last 7 days
    assert data_of(await alice_api.get("/api/data/self")) == []
    assert len(data_of(await alice_api.get("/api/data/self", params={"start_timestamp": hour1}))) == 2


async def test_the_per_user_sums_add_every_model_of_a_user_per_hour(app: Running, openai_fake: FakeOpenAI
                                                                    ) -> None:
    alice, alice_key, _, bob_key, alice_api, admin = await setup(app, openai_fake)
    await seed_channel(app.state, type=1, base_url=openai_fake.url, models=MOD_2)
    await app.state.options.put("ModelPrice", json.dumps({MOD: 0.001, MOD_2: 0.002}))  # 500, 1000 points
    app.clock.shift(HOUR - app.clock.now_s() % HOUR + 10)
    hour1 = app.clock.now_s() // HOUR * HOUR
    await calls(app, alice_key, 2)
    await calls(app, alice_key, 1, MOD_2)
    await calls(app, bob_key, 1)
    app.clock.shift(HOUR)
    await calls(app, alice_key, 1, MOD_2)
    await app.state.quota_sync.drain()
    summed = data_of(await admin.get("/api/data/users"))
    assert [(r["created_at"], r["username"], r["count"], r["quota"]) for r in summed] == [
        (hour1, "alice", 3, 2000), (hour1, "bob", 1, 500), (hour1 + HOUR, "alice", 1, 1000)]
    assert {(r["id"], r["user_id"], r["model_name"]) for r in summed} == {(0, 0, "")}
    async with app.state.db.transaction() as tx:
        tokens = await tx.scalar(select(func.sum(Log.prompt_tokens + Log.completion_tokens))
                                 .where(Log.user_id == alice, Log.type == 2, Log.created_at < hour1 + HOUR))
    assert summed[0]["token_used"] == tokens
    later = data_of(await admin.get("/api/data/users", params={"start_timestamp": hour1 + 1}))
    assert [(r["created_at"], r["username"]) for r in later] == [(hour1 + HOUR, "alice")]
    fails(await admin.get("/api/data/users", params={"start_timestamp": hour1 + 1, "end_timestamp": hour1}),
          400, "start_timestamp", prefix=True)
    fails(await alice_api.get("/api/data/users"), 403)


async def test_export_off_writes_no_bucket(app: Running, openai_fake: FakeOpenAI) -> None:
    _, alice_key, _, _, alice_api, _ = await setup(app, openai_fake)
    await app.state.options.put("DataExportEnabled", "false")
    await calls(app, alice_key, 2)
    await app.state.quota_sync.drain()
    async with app.state.db.transaction() as tx:
        assert await tx.scalar(select(func.count()).select_from(QuotaData)) == 0
    assert data_of(await alice_api.get("/api/data/self")) == []
    await app.state.options.put("DataExportEnabled", "true")
    await calls(app, alice_key, 1)
    await app.state.quota_sync.drain()
    assert [r["count"] for r in data_of(await alice_api.get("/api/data/self"))] == [1]


async def test_window_rules(app: Running) -> None:
    await add_user(app.state, "carol")
    await add_user(app.state, "admin2", role=10)
    carol, admin = await logged_in(app, "carol"), await logged_in(app, "admin2")
    now = app.clock.now_s()
    for api, path in ((carol, "/api/data/self"), (admin, "/api/data/")):
        fails(await api.get(path, params={"start_timestamp": now, "end_timestamp": now - 1}), 400,
              "start_timestamp", prefix=True)
        fails(await api.get(path, params={"start_timestamp": "x"}), 400, "start_timestamp", prefix=True)
        fails(await api.get(path, params={"end_timestamp": -1}), 400, "end_timestamp", prefix=True)
    fails(await carol.get("/api/data/self", params={"start_timestamp": now - 2592001, "end_timestamp": now}),
          400, "end_timestamp", prefix=True)
    assert data_of(await carol.get("/api/data/self", params={"start_timestamp": now - 2592000,
                                                             "end_timestamp": now})) == []
    assert data_of(await admin.get("/api/data/", params={"start_timestamp": 1, "end_timestamp": now})) == []
