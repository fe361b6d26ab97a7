"""The gateway honours the caller's own settings (docs/api/accounts.md#your-settings) on every stack:

- `record_ip_log`: the consume log carries the client IP only while the owner asked for it;
- `accept_unset_model_ratio_model`: a model without any price is refused (400 `model_price_error`) until
  the owner allows it, then charged at the default ratio 37.5 (as self-use mode), and refused again once
  the setting is turned off — each change applying from the very next call (the cached user state is
  dropped when the setting is saved).
"""

from __future__ import annotations

import json
import math

import httpx
from sqlalchemy import select

from models.logs import Log
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user, data_of, logged_in

MOD = "omni-moderation-latest"


async def consume_logs(app: Running, user_id: int) -> list[Log]:
    await app.state.quota_sync.drain()
    async with app.state.db.transaction() as tx:
        rows = await tx.scalars(select(Log).where(Log.type == 2, Log.user_id == user_id).order_by(Log.id))
        return list(rows.all())


async def moderate(client: httpx.AsyncClient, key: str, model: str = MOD) -> httpx.Response:
    return await client.post("/v1/moderations", json={"input": "hello world!", "model": model},
                             headers={"Authorization": key})


async def test_record_ip_log(app: Running, openai_fake: FakeOpenAI) -> None:
    uid = await add_user(app.state, "ipuser", quota=1_000_000)
    _, key = await seed_key(app.state, uid, unlimited=True)
    await seed_channel(app.state, type=1, base_url=openai_fake.url, models=MOD)
    await app.state.options.put("ModelPrice", json.dumps({MOD: 0.001}))
    owner = await logged_in(app, "ipuser")
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
        assert (await moderate(client, key)).status_code == 200
        data_of(await owner.put("/api/user/setting", json={"record_ip_log": True}))
        assert (await moderate(client, key)).status_code == 200
        data_of(await owner.put("/api/user/setting", json={"record_ip_log": False}))
        assert (await moderate(client, key)).status_code == 200
    assert [log.ip for log in await consume_logs(app, uid)] == ["", "127.0.0.1", ""]


async def test_accept_unset_model_ratio_model(app: Running, openai_fake: FakeOpenAI) -> None:
    uid = await add_user(app.state, "unset", quota=1_000_000)
    _, key = await seed_key(app.state, uid, unlimited=True)
    await seed_channel(app.state, type=1, base_url=openai_fake.url, models="custom-moderator")
    owner = await logged_in(app, "unset")
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
        refused = await moderate(client, key, "custom-moderator")
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "model_price_error"
        data_of(await owner.put("/api/user/setting", json={"accept_unset_model_ratio_model": True}))
        allowed = await moderate(client, key, "custom-moderator")
        assert allowed.status_code == 200, allowed.text
        data_of(await owner.put("/api/user/setting", json={"accept_unset_model_ratio_model": False}))
        again = await moderate(client, key, "custom-moderator")
        assert again.status_code == 400 and again.json()["error"]["code"] == "model_price_error"
    [log] = await consume_logs(app, uid)
    assert log.model_name == "custom-moderator" and log.prompt_tokens > 0
    assert log.quota == math.ceil(log.prompt_tokens * 37.5)
    assert json.loads(log.other)["model_ratio"] == 37.5
    assert await app.state.quota.balance("user", uid) == 1_000_000 - log.quota
