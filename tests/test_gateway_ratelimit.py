"""The per-user model request limit on the model-call routes (docs/api/gateway.md#gateway-admission-order,
step 6): admitted and charged by the reservation's own step, yet still answered before the refusals of steps
7–12, charged for refused calls as a separate admission would be, and its success count charged exactly once
with the settlement."""

from __future__ import annotations

import httpx

from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user

MOD = "omni-moderation-latest"


async def _limit(app: Running, *, total: int, success: int) -> None:
    for name, value in (("ModelRequestRateLimitEnabled", "true"),
                        ("ModelRequestRateLimitDurationMinutes", "1"),
                        ("ModelRequestRateLimitCount", str(total)),
                        ("ModelRequestRateLimitSuccessCount", str(success))):
        await app.state.options.put(name, value)


async def _setup(app: Running, fake: FakeOpenAI, *, quota: int = 1_000_000) -> str:
    uid = await add_user(app.state, "rita", quota=quota)
    _, key = await seed_key(app.state, uid, remain=1_000_000)
    await seed_channel(app.state, type=1, base_url=fake.url, models=MOD)
    await app.state.options.put("ModelPrice", f'{{"{MOD}": 0.001}}')  # 500 points a call
    return key


async def _moderate(client: httpx.AsyncClient, key: str, body: object = None) -> httpx.Response:
    return await client.post("/v1/moderations", json={"input": "hello"} if body is None else body,
                             headers={"Authorization": key})


async def test_over_the_limit_is_a_429_before_any_later_refusal(app: Running, openai_fake: FakeOpenAI
                                                                ) -> None:
    key = await _setup(app, openai_fake)
    await _limit(app, total=2, success=0)
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
        assert (await _moderate(client, key)).status_code == 200
        assert (await _moderate(client, key, {"input": 5})).status_code == 400  # refused: still counted
        for body in (None, {"input": 5}, {"input": "hi", "model": "no-such-model"}):
            refused = await _moderate(client, key, body)
            assert refused.status_code == 429, (body, refused.text)
            assert refused.json()["error"]["code"] == "rate_limit_exceeded"
            assert int(refused.headers["Retry-After"]) >= 1


async def test_success_limit_counts_only_settled_calls(app: Running, openai_fake: FakeOpenAI) -> None:
    key = await _setup(app, openai_fake)
    await _limit(app, total=0, success=2)
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
        for _ in range(3):  # refusals use no success
            assert (await _moderate(client, key, {"input": 5})).status_code == 400
        openai_fake.fail("500", times=1)  # a failed call uses none either
        assert (await _moderate(client, key)).status_code == 503
        assert (await _moderate(client, key)).status_code == 200
        assert (await _moderate(client, key)).status_code == 200
        refused = await _moderate(client, key)
        assert refused.status_code == 429, refused.text


async def test_a_balance_refusal_still_counts_against_the_limit(app: Running, openai_fake: FakeOpenAI
                                                                ) -> None:
    key = await _setup(app, openai_fake, quota=100)  # below one call's 500
    await _limit(app, total=2, success=0)
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
        for _ in range(2):
            short = await _moderate(client, key)
            assert short.status_code == 429 and short.json()["error"]["code"] == "insufficient_quota"
        limited = await _moderate(client, key)
        assert limited.status_code == 429 and limited.json()["error"]["code"] == "rate_limit_exceeded"
