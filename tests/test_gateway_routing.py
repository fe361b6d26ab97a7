"""Channel selection and failover (docs/api/channels.md#selection-and-retries) against real fake upstreams:
retries skip tried channels and descend priority tiers, a bad channel key disables the channel (or just that
key) with its reason, every channel failing is a 503 (504 after a timeout), a dropped connection or an answer
that is not HTTP is retried elsewhere, an upstream 400 passes through without retry, and mapping rewrites only
the upstream model name / the status the caller sees."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from sqlalchemy import select

from models.channels import Channel
from models.logs import Log
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user, make_config, serve

TTS = "gemini-2.5-flash-preview-tts"
SPEECH_BODY = {"contents": [{"parts": [{"text": "Say hi"}]}],
               "generationConfig": {"responseModalities": ["AUDIO"]}}


async def caller(app: Running, quota: int = 10_000_000) -> tuple[int, httpx.AsyncClient]:
    uid = await add_user(app.state, f"user{quota}", quota=quota)
    _, key = await seed_key(app.state, uid, unlimited=True)
    client = httpx.AsyncClient(base_url=app.url, headers={"x-goog-api-key": key,
                                                          "Authorization": f"Bearer {key}"}, timeout=30)
    return uid, client


async def speak(client: httpx.AsyncClient, model: str = TTS) -> httpx.Response:
    return await client.post(f"/v1beta/models/{model}:generateContent", json=SPEECH_BODY)


async def channel_row(app: Running, channel_id: int) -> Channel:
    async with app.state.db.transaction() as tx:
        row = await tx.get(Channel, channel_id)
        assert row is not None
        return row


async def logs(app: Running) -> list[Log]:
    await app.state.quota_sync.drain()
    async with app.state.db.transaction() as tx:
        return list((await tx.scalars(select(Log).where(Log.type == 2).order_by(Log.id))).all())


async def test_a_500_fails_over_to_the_next_channel(app: Running, gemini_fake: FakeGemini) -> None:
    async with FakeGemini() as second:
        first_id = await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS, priority=10)
        second_id = await seed_channel(app.state, type=24, base_url=second.url, models=TTS, priority=0)
        gemini_fake.fail("500")
        _, client = await caller(app)
        async with client:
            response = await speak(client)
        assert response.status_code == 200, response.text
        assert len(gemini_fake.received) == 1 and len(second.received) == 1
        rows = await logs(app)
        assert len(rows) == 1 and rows[0].channel == second_id
        assert json.loads(rows[0].other)["channels_tried"] == [first_id, second_id]
        assert (await channel_row(app, first_id)).status == 1  # a 500 never disables


async def test_a_bad_channel_key_disables_that_channel_and_another_serves(
        app: Running, gemini_fake: FakeGemini) -> None:
    async with FakeGemini() as good:
        bad_id = await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS, priority=5)
        await seed_channel(app.state, type=24, base_url=good.url, models=TTS)
        gemini_fake.fail("bad_key")  # Gemini's 400 API_KEY_INVALID counts as a 401
        _, client = await caller(app)
        async with client:
            assert (await speak(client)).status_code == 200
            row = await channel_row(app, bad_id)
            assert row.status == 3
            assert "API key not valid" in json.loads(row.other_info)["status_reason"]
            assert app.state.channels.get(bad_id).status == 3  # type: ignore[union-attr]
            gemini_fake.reset()
            assert (await speak(client)).status_code == 200
        assert len(gemini_fake.received) == 1  # never routed again
        assert len(good.received) == 2


async def test_a_bad_key_of_a_multi_key_channel_disables_only_that_key(
        app: Running, gemini_fake: FakeGemini) -> None:
    gemini_fake.valid_keys = {"good-key"}
    channel_id = await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS,
                                    key="bad-key\ngood-key", multi_key_mode="polling")
    _, client = await caller(app)
    async with client:
        # polling starts at key 0 (bad): that key is disabled, and the request has no other channel
        # left (retries skip the channel tried); from then on the good key serves
        statuses = [(await speak(client)).status_code for _ in range(4)]
    assert statuses == [503, 200, 200, 200]
    row = await channel_row(app, channel_id)
    info = json.loads(row.channel_info)
    assert info["multi_key_status_list"] == {"0": 3}
    assert row.status == 1
    assert [r.headers["x-goog-api-key"] for r in gemini_fake.received] == ["bad-key"] + ["good-key"] * 3


async def test_every_channel_failing_is_a_503_in_the_google_shape_and_costs_nothing(
        app: Running, gemini_fake: FakeGemini) -> None:
    await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS)
    gemini_fake.fail("500")
    uid, client = await caller(app)
    async with client:
        response = await speak(client)
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["status"] == "UNAVAILABLE" and error["details"][0]["reason"] == "upstream_failed"
    assert response.headers["x-request-id"] in error["message"]
    assert await logs(app) == []
    assert await app.state.quota.balance("user", uid) == 10_000_000


async def test_an_upstream_400_passes_through_without_retry(app: Running, gemini_fake: FakeGemini) -> None:
    async with FakeGemini() as second:
        await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS, priority=1)
        await seed_channel(app.state, type=24, base_url=second.url, models=TTS)
        gemini_fake.fail("400")
        uid, client = await caller(app)
        async with client:
            response = await speak(client)
        assert response.status_code == 400
        assert response.json()["error"]["status"] == "INVALID_ARGUMENT"
        assert second.received == []
        assert await app.state.quota.balance("user", uid) == 10_000_000


async def test_a_timeout_on_the_last_attempt_is_a_504(stack: object, tmp_path: Path,
                                                      gemini_fake: FakeGemini) -> None:
    from tests.conftest import Stack

    assert isinstance(stack, Stack)
    config = make_config(stack.database_url, tmp_path, stack.redis_url, stack.prefix, upstream_timeout=0.3)
    async with serve(config) as app:
        await app.state.options.put("RetryTimes", 0)
        await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS)
        gemini_fake.slow_seconds = 2
        gemini_fake.fail("slow")
        _, client = await caller(app)
        async with client:
            response = await speak(client)
        assert response.status_code == 504
        assert response.json()["error"]["status"] == "DEADLINE_EXCEEDED"


async def test_a_dropped_connection_is_retried_elsewhere(app: Running, gemini_fake: FakeGemini) -> None:
    async with FakeGemini() as second:
        await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS, priority=1)
        await seed_channel(app.state, type=24, base_url=second.url, models=TTS)
        gemini_fake.fail("drop")
        _, client = await caller(app)
        async with client:
            assert (await speak(client)).status_code == 200
        assert len(second.received) == 1


async def test_an_answer_that_is_not_http_is_retried_elsewhere(app: Running, gemini_fake: FakeGemini) -> None:
    """A `base_url` pointing at another service: a failed attempt like a drop (aiohttp's own error escaped
    the attempt step before, a 500)."""
    async with FakeGemini() as second:
        first = await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS, priority=1)
        await seed_channel(app.state, type=24, base_url=second.url, models=TTS)
        gemini_fake.fail("not_http")
        _, client = await caller(app)
        async with client:
            assert (await speak(client)).status_code == 200
        assert len(gemini_fake.received) == 1 and len(second.received) == 1
        assert (await channel_row(app, first)).status == 1  # a failure, no reason to disable


async def test_weight_zero_serves_only_after_the_weighted_channels_of_its_tier(
        app: Running, gemini_fake: FakeGemini) -> None:
    async with FakeGemini() as zero:
        await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS, weight=5)
        await seed_channel(app.state, type=24, base_url=zero.url, models=TTS, weight=0)
        _, client = await caller(app)
        async with client:
            for _ in range(5):
                assert (await speak(client)).status_code == 200
            assert len(zero.received) == 0
            gemini_fake.fail("429")
            assert (await speak(client)).status_code == 200
        assert len(zero.received) == 1


async def test_model_mapping_changes_only_the_upstream_path(app: Running, gemini_fake: FakeGemini) -> None:
    await seed_channel(app.state, type=24, base_url=gemini_fake.url, models="my-voice",
                       model_mapping=json.dumps({"my-voice": TTS}))
    await app.state.options.put("ModelRatio", '{"my-voice": 1}')
    await app.state.options.put("ModelCapabilities", '{"my-voice": {"speech_output": true}}')
    _, client = await caller(app)
    async with client:
        response = await speak(client, "my-voice")
    assert response.status_code == 200, response.text
    assert gemini_fake.received[-1].path == f"/v1beta/models/{TTS}:generateContent"
    row = (await logs(app))[0]
    assert row.model_name == "my-voice"
    other = json.loads(row.other)
    assert other["is_model_mapped"] is True and other["upstream_model_name"] == TTS


async def test_status_code_mapping_rewrites_only_what_the_caller_sees(
        app: Running, openai_fake: FakeOpenAI) -> None:
    await seed_channel(app.state, type=1, base_url=openai_fake.url, models="omni-moderation-latest",
                       status_code_mapping='{"400": "422"}')
    openai_fake.fail("400")
    _, client = await caller(app)
    async with client:
        response = await client.post("/v1/moderations", json={"input": "hello"})
    assert response.status_code == 422
    assert len(openai_fake.received) == 1


async def test_an_admin_disable_is_unroutable_at_once(app: Running, gemini_fake: FakeGemini) -> None:
    channel_id = await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS)
    _, client = await caller(app)
    async with client:
        assert (await speak(client)).status_code == 200
        async with app.state.db.transaction() as tx:
            row = await tx.get(Channel, channel_id)
            assert row is not None
            row.status = 2
        await app.state.channels.changed()
        response = await speak(client)
    assert response.status_code == 503
    assert response.json()["error"]["details"][0]["reason"] == "channel_unavailable"


async def test_an_auto_key_is_served_by_the_first_auto_group_with_a_channel(
        app: Running, gemini_fake: FakeGemini) -> None:
    await app.state.options.put("AutoGroups", '["vip", "svip", "default"]')  # svip: not user-usable
    await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS, group="default")
    uid = await add_user(app.state, "auto-user", quota=10_000_000)
    _, key = await seed_key(app.state, uid, unlimited=True, group="auto")
    async with httpx.AsyncClient(base_url=app.url, headers={"x-goog-api-key": key}, timeout=30) as client:
        served = await speak(client)
        unknown = await speak(client, "gemini-2.5-pro-preview-tts")
        vip_id = await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS, group="vip")
        assert (await speak(client)).status_code == 200
        await seed_channel(app.state, type=24, base_url=gemini_fake.url, models="svip-only", group="svip")
        listed = (await client.get("/v1beta/models")).json()["models"]
    assert [m["name"] for m in listed] == [f"models/{TTS}"]  # svip is not among the user's groups
    assert served.status_code == 200, served.text
    assert unknown.status_code == 404
    assert unknown.json()["error"]["details"][0]["reason"] == "model_not_found"
    rows = await logs(app)
    assert [row.group for row in rows] == ["default", "vip"]
    assert rows[1].channel == vip_id
