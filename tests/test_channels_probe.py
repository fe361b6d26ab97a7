"""The channel routes that call an upstream — tests and model lists
(docs/api/channels.md#channel-tests-balances-and-model-lists), over HTTP against the real app on SQLite and on
MariaDB + Redis, with the fake providers on 127.0.0.1:

- `GET /api/channel/test/:id` sends one small real request suited to the model — the model list, a
  one-word moderation, a one-word spoken answer in a built-in voice — with the key a call would use
  (multi-key: the same polling pick), the model mapping and the header override; it answers `time` in
  seconds (top level and in `data`), records `test_time` and `response_time`, changes no status;
  400 for a type that cannot be tested, 404, and 502 with the upstream's redacted message and `time` 0;
- an upstream that hangs, answers garbage or more than 5 MB is a 502 within the (short, configured)
  timeout, and the worker goes on serving;
- `GET /api/channel/test` answers at once and tests in the background: failing channels (an
  automatic-disable status, or slower than `ChannelDisableThreshold`) with `auto_ban` 1 get status 3 and
  stop routing at once, a passing status-3 channel comes back, status-2 channels are left alone, the
  options switch both off; a second run while one runs is a 409;
- `GET /api/channel/fetch_models/:id` and `POST /api/channel/fetch_models` (root) list the upstream's
  models (Gemini: every page, without `models/`), with the first enabled key / the first key line.
A key never appears in a reply or a log line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from backend.locks import exclusive
from core.enums import ChannelStatus
from models.channels import Channel
from server.channels.probe import TEST_LOCK, TEST_TASK
from tests.conftest import _Databases, _stack
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI
from tests.harness import Running, add_user, data_of, logged_in, make_config, serve
from tests.test_channels import GEMINI, OPENAI, admin_of, create, fails, routed, row_of

TTS = "gemini-2.5-flash-preview-tts"
SHORT_TIMEOUT = 1.0  # ADMIN_UPSTREAM_TIMEOUT in these tests


@pytest.fixture(params=["sqlite", "mariadb+redis"])
async def probe_app(request: pytest.FixtureRequest, databases: _Databases, tmp_path: Path
                    ) -> AsyncIterator[Running]:
    async for stack in _stack(request.param, databases):
        config = make_config(stack.database_url, tmp_path, stack.redis_url, stack.prefix,
                             admin_upstream_timeout=SHORT_TIMEOUT)
        async with serve(config) as running:
            yield running


async def run_finished(app: Running) -> None:
    """Wait for the background test run (bounded: only a hang fails)."""
    for _ in range(1000):
        if TEST_TASK not in app.state.tasks.names:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the test run did not finish")


async def status_of(app: Running, channel_id: int) -> int:
    row = await row_of(app, channel_id)
    assert row is not None
    return row.status


def automatic_changes() -> dict[str, float]:
    """This process's automatic disables by reason (of a test run) and enables, as the metrics count them
    (the app under test serves in this process)."""
    counts = {reason: REGISTRY.get_sample_value("tollway_channel_auto_disables_total", {"reason": reason})
              for reason in ("test_failed", "test_slow")}
    counts["enabled"] = REGISTRY.get_sample_value("tollway_channel_auto_enables_total")
    return {name: value or 0.0 for name, value in counts.items()}


def changes_since(before: dict[str, float]) -> dict[str, float]:
    return {name: value - before[name] for name, value in automatic_changes().items()}


def seconds_of(body: dict[str, Any]) -> float:
    assert body["success"] is True and body["message"] == ""
    assert isinstance(body["time"], float) and body["data"] == {"time": body["time"]}
    return float(body["time"])


# ---- one channel --------------------------------------------------------------------------------------

async def test_a_test_lists_the_models_and_records_the_latency(probe_app: Running,
                                                               gemini_fake: FakeGemini) -> None:
    admin = await admin_of(probe_app)
    [cid] = await create(admin, base_url=gemini_fake.url, key="AIza-test-key", models="gemini-2.5-flash",
                         header_override={"X-Tenant": "t1"})
    reply = await admin.get(f"/api/channel/test/{cid}")
    assert reply.status_code == 200, reply.text
    seconds = seconds_of(reply.json())
    call = gemini_fake.last  # a text model: asked for one token
    assert (call.method, call.path) == ("POST", "/v1beta/models/gemini-2.5-flash:generateContent")
    assert call.json["generationConfig"] == {"maxOutputTokens": 1}
    assert call.headers["x-goog-api-key"] == "AIza-test-key" and call.headers["x-tenant"] == "t1"
    row = await row_of(probe_app, cid)
    assert row is not None and row.status == ChannelStatus.ENABLED
    assert row.test_time >= probe_app.clock.now_s() - 60 and row.response_time == round(seconds * 1000)


async def test_a_speech_model_is_asked_for_one_spoken_answer_with_the_mapping(
        probe_app: Running, gemini_fake: FakeGemini) -> None:
    admin = await admin_of(probe_app)
    [cid] = await create(admin, base_url=gemini_fake.url, models=f"{TTS},my-voice",
                         model_mapping={"my-voice": TTS}, test_model="my-voice")
    seconds_of((await admin.get(f"/api/channel/test/{cid}")).json())
    call = gemini_fake.last
    assert (call.method, call.path) == ("POST", f"/v1beta/models/{TTS}:generateContent")  # mapped
    config = call.json["generationConfig"]
    assert config["responseModalities"] == ["AUDIO"]
    assert config["speechConfig"]["voiceConfig"]["prebuiltVoiceConfig"]["voiceName"]
    # the query names another model: a text model is asked for one token
    seconds_of((await admin.get(f"/api/channel/test/{cid}", params={"model": "gemini-2.5-flash"})).json())
    assert (gemini_fake.last.method, gemini_fake.last.path) == (
        "POST", "/v1beta/models/gemini-2.5-flash:generateContent")


async def test_a_moderation_model_is_asked_to_moderate_one_word(probe_app: Running,
                                                               openai_fake: FakeOpenAI) -> None:
    admin = await admin_of(probe_app)
    [cid] = await create(admin, type=OPENAI, base_url=openai_fake.url, key="sk-moderation-key-0001",
                         models="omni-moderation-latest")
    seconds_of((await admin.get(f"/api/channel/test/{cid}")).json())
    call = openai_fake.last
    assert (call.method, call.path) == ("POST", "/v1/moderations")
    assert call.json == {"model": "omni-moderation-latest", "input": "hello"}
    assert call.headers["authorization"] == "Bearer sk-moderation-key-0001"


async def test_a_multi_key_channel_is_tested_with_the_key_routing_would_pick(
        probe_app: Running, gemini_fake: FakeGemini) -> None:
    admin = await admin_of(probe_app)
    [cid] = await create(admin, "multi_to_single", multi_key_mode="polling", base_url=gemini_fake.url,
                         key="AIza-poll-one\nAIza-poll-two\nAIza-poll-three")
    for _ in range(3):
        seconds_of((await admin.get(f"/api/channel/test/{cid}")).json())
    used = [r.headers["x-goog-api-key"] for r in gemini_fake.received]
    assert sorted(used) == ["AIza-poll-one", "AIza-poll-three", "AIza-poll-two"]  # one polling turn
    data_of(await admin.post("/api/channel/multi_key/manage",
                             json={"channel_id": cid, "action": "disable_key", "key_index": 1}))
    gemini_fake.received.clear()
    for _ in range(2):
        seconds_of((await admin.get(f"/api/channel/test/{cid}")).json())
    assert {r.headers["x-goog-api-key"] for r in gemini_fake.received} <= {"AIza-poll-one", "AIza-poll-three"}


async def test_test_refusals(probe_app: Running, gemini_fake: FakeGemini) -> None:
    admin = await admin_of(probe_app)
    [azure] = await create(admin, type=3, base_url=gemini_fake.url, models="gpt")
    fails(await admin.get(f"/api/channel/test/{azure}"), 400, "type: channels of type Azure (3)")
    fails(await admin.get("/api/channel/test/999999"), 404, "channel not found")
    fails(await admin.get("/api/channel/test/abc"), 400, "id:")
    [cid] = await create(admin, base_url=gemini_fake.url)
    fails(await admin.get(f"/api/channel/test/{cid}", params={"model": "a\x01b"}), 400, "model:")
    await add_user(probe_app.state, "plain")
    user = await logged_in(probe_app, "plain")
    fails(await user.get(f"/api/channel/test/{cid}"), 403)
    assert gemini_fake.received == []


async def test_a_failed_test_is_a_502_with_the_redacted_message_and_changes_nothing(
        probe_app: Running, openai_fake: FakeOpenAI, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    admin = await admin_of(probe_app)
    secret = "sk-channel-secret-0123456789abcdef"
    [cid] = await create(admin, type=OPENAI, base_url=openai_fake.url, key=secret,
                         models="omni-moderation-latest")
    openai_fake.valid_keys = {"sk-another-key-entirely-000000000"}
    openai_fake.echo_key = True  # the upstream quotes the key it got
    reply = await admin.get(f"/api/channel/test/{cid}")
    assert reply.status_code == 502, reply.text
    body = reply.json()
    assert body["success"] is False and body["time"] == 0
    assert "status code 401" in body["message"] and "Incorrect API key" in body["message"]
    assert secret not in reply.text and secret not in caplog.text
    row = await row_of(probe_app, cid)
    assert row is not None and row.status == ChannelStatus.ENABLED and row.test_time == 0  # no change
    assert routed(probe_app, "omni-moderation-latest", types=frozenset({OPENAI})) == cid


@pytest.mark.parametrize("mode", ["hang", "garbage", "huge", "drop", "500"])
async def test_a_bad_upstream_is_a_502_within_the_timeout(probe_app: Running, mode: str) -> None:
    async with FakeGemini() as fake:
        admin = await admin_of(probe_app)
        [cid] = await create(admin, base_url=fake.url)
        fake.fail(mode)
        for path in (f"/api/channel/test/{cid}", f"/api/channel/fetch_models/{cid}"):
            reply = await admin.get(path)  # the client gives up after 20 s: only a hang fails here
            assert reply.status_code == 502, (path, reply.text)
            assert reply.json()["success"] is False
        fake.reset()
        seconds_of((await admin.get(f"/api/channel/test/{cid}")).json())  # the worker goes on


async def test_a_private_destination_is_refused_like_for_a_model_call(
        databases: _Databases, tmp_path: Path, gemini_fake: FakeGemini) -> None:
    async for stack in _stack("sqlite", databases):
        config = make_config(stack.database_url, tmp_path, admin_upstream_timeout=SHORT_TIMEOUT)
        async with serve(config) as running:
            admin = await admin_of(running)
            [cid] = await create(admin, base_url=gemini_fake.url)  # saved while loopback was allowed
        async with serve(make_config(stack.database_url, tmp_path, upstream_allow_private=())) as strict:
            admin = await logged_in(strict, "chadmin")
            reply = await admin.get(f"/api/channel/test/{cid}")
            assert reply.status_code == 502 and "private or internal address" in reply.json()["message"]
    assert gemini_fake.received == []


# ---- every channel ------------------------------------------------------------------------------------

async def test_testing_every_channel_disables_the_failing_and_enables_the_recovered(
        probe_app: Running) -> None:
    state = probe_app.state
    await state.options.put("ChannelDisableThreshold", 0.3)
    admin = await admin_of(probe_app)
    async with FakeGemini() as healthy, FakeGemini(valid_keys=["AIza-good"]) as strict, \
            FakeGemini(slow_seconds=0.5) as slow, FakeGemini() as broken:
        slow.fail("slow")
        broken.fail("500")
        [ok] = await create(admin, base_url=healthy.url, name="ok", models="m-ok")
        [bad_key] = await create(admin, base_url=strict.url, name="bad", key="AIza-bad", models="m-bad")
        [kept] = await create(admin, base_url=strict.url, name="kept", key="AIza-bad", auto_ban=0,
                              models="m-kept")
        [too_slow] = await create(admin, base_url=slow.url, name="slow", models="m-slow")
        [erroring] = await create(admin, base_url=broken.url, name="500", models="m-500")
        [back] = await create(admin, base_url=healthy.url, name="back", models="m-back")
        [off] = await create(admin, base_url=strict.url, name="off", key="AIza-bad", status=2, models="m-off")
        async with state.db.transaction() as tx:  # a channel the system disabled earlier
            (await tx.get(Channel, back)).status = ChannelStatus.AUTO_DISABLED  # type: ignore[union-attr]
        await state.channels.changed()

        before = automatic_changes()
        assert data_of(await admin.get("/api/channel/test")) is None
        await run_finished(probe_app)
        # counted once each (tollway_channel_auto_disables_total{reason}, tollway_channel_auto_enables_total)
        assert changes_since(before) == {"test_failed": 1, "test_slow": 1, "enabled": 1}
        assert {cid: await status_of(probe_app, cid) for cid in (ok, bad_key, kept, too_slow, erroring,
                                                                 back, off)} == {
            ok: 1, bad_key: 3, kept: 1, too_slow: 3, erroring: 1, back: 1, off: 2}
        assert len(strict.received) == 2  # `off` (status 2) was not tested
        row = await row_of(probe_app, bad_key)
        assert row is not None and "API key not valid" in row.other_info and "AIza-bad" not in row.other_info
        # the changes route at once
        assert routed(probe_app, "m-bad") is None and routed(probe_app, "m-slow") is None
        assert routed(probe_app, "m-back") == back and routed(probe_app, "m-ok") == ok
        assert (await row_of(probe_app, ok)).test_time > 0  # type: ignore[union-attr]
        # the run's progress, as every worker reads it from the shared store: over, with its failures
        progress = data_of(await admin.get("/api/channel/progress", params={"run": "test"}))
        assert {k: progress[k] for k in ("run", "running", "total", "done", "passed", "failed")} == {
            "run": "test", "running": False, "total": 6, "done": 6, "passed": 2, "failed": 4}
        assert {f["channel_id"] for f in progress["failures"]} == {bad_key, kept, too_slow, erroring}
        assert all("AIza-bad" not in f["message"] for f in progress["failures"])
        assert progress["finished_at"] >= progress["started_at"] > 0
        fails(await admin.get("/api/channel/progress", params={"run": "all"}), 400, "run", prefix=True)

        # both switches off: nothing changes
        await state.options.put("AutomaticDisableChannelEnabled", False)
        await state.options.put("AutomaticEnableChannelEnabled", False)
        slow.reset()
        [other_bad] = await create(admin, base_url=strict.url, name="bad2", key="AIza-bad", models="m-bad2")
        before = automatic_changes()
        data_of(await admin.get("/api/channel/test"))
        await run_finished(probe_app)
        assert await status_of(probe_app, other_bad) == 1 and await status_of(probe_app, too_slow) == 3
        assert changes_since(before) == {"test_failed": 0, "test_slow": 0, "enabled": 0}


async def test_one_run_at_a_time(probe_app: Running) -> None:
    admin = await admin_of(probe_app)
    async with FakeGemini() as fake:
        await create(admin, base_url=fake.url)
        fake.fail("hang")  # the run waits for the timeout
        data_of(await admin.get("/api/channel/test"))
        fails(await admin.get("/api/channel/test"), 409, "a test of every channel is already running")
        await run_finished(probe_app)
        fake.reset()
        async with exclusive(probe_app.state.backend, TEST_LOCK, ttl=60):  # a run on another worker
            fails(await admin.get("/api/channel/test"), 409, "a test of every channel is already running")
        data_of(await admin.get("/api/channel/test"))
        await run_finished(probe_app)


async def test_a_run_in_progress_stops_when_the_worker_shuts_down(
        databases: _Databases, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tollway.channels")
    async for stack in _stack("sqlite", databases):
        async with FakeGemini() as fake:
            config = make_config(stack.database_url, tmp_path, admin_upstream_timeout=60.0)
            async with serve(config) as running:
                admin = await admin_of(running)
                await create(admin, base_url=fake.url)
                fake.fail("hang")
                data_of(await admin.get("/api/channel/test"))
                for _ in range(500):
                    if fake.received:
                        break
                    await asyncio.sleep(0.01)
            # leaving `serve` drained the worker's tasks: the run was asked to stop and gave up its call
            # (cancelled, it would not have logged the end of the run)
            assert TEST_TASK not in running.state.tasks.names
            assert "0 of 1 channels tested (stopped)" in caplog.text


# ---- upstream model lists -----------------------------------------------------------------------------

async def test_fetching_a_channels_models(probe_app: Running, gemini_fake: FakeGemini,
                                         openai_fake: FakeOpenAI) -> None:
    admin = await admin_of(probe_app)
    gemini_fake.models = ["a", "b", "c", "d", "e"]  # three pages of two
    [gem] = await create(admin, "multi_to_single", base_url=gemini_fake.url, key="AIza-first\nAIza-second")
    data_of(await admin.post("/api/channel/multi_key/manage",
                             json={"channel_id": gem, "action": "disable_key", "key_index": 0}))
    assert data_of(await admin.get(f"/api/channel/fetch_models/{gem}")) == ["a", "b", "c", "d", "e"]
    assert len(gemini_fake.received) == 3
    assert {r.headers["x-goog-api-key"] for r in gemini_fake.received} == {"AIza-second"}  # first enabled
    [oai] = await create(admin, type=43, base_url=openai_fake.url, key="sk-deepseek-key",
                         header_override={"X-Org": "o"})
    assert data_of(await admin.get(f"/api/channel/fetch_models/{oai}")) == list(openai_fake.models)
    assert openai_fake.last.path == "/v1/models" and openai_fake.last.headers["x-org"] == "o"
    assert openai_fake.last.headers["authorization"] == "Bearer sk-deepseek-key"
    fails(await admin.get("/api/channel/fetch_models/999999"), 404)
    row = await row_of(probe_app, gem)
    assert row is not None and row.test_time == 0  # nothing stored


async def test_fetching_models_for_unsaved_settings_is_for_root(probe_app: Running,
                                                               gemini_fake: FakeGemini) -> None:
    admin = await admin_of(probe_app)
    await add_user(probe_app.state, "root", role=100)
    root = await logged_in(probe_app, "root")
    body = {"type": GEMINI, "base_url": f"{gemini_fake.url}/", "key": "  AIza-unsaved \nAIza-other"}
    assert data_of(await root.post("/api/channel/fetch_models", json=body)) == gemini_fake.models
    assert {r.headers["x-goog-api-key"] for r in gemini_fake.received} == {"AIza-unsaved"}
    fails(await admin.post("/api/channel/fetch_models", json=body), 403)
    fails(await root.post("/api/channel/fetch_models", json={**body, "key": " \n "}), 400, "key:")
    fails(await root.post("/api/channel/fetch_models", json={**body, "key": "AIza-\u0430"}), 400, "key:")
    unsaved = "/api/channel/fetch_models"
    fails(await root.post(unsaved, json={**body, "base_url": "ftp://x"}), 400, "base_url:")
    fails(await root.post("/api/channel/fetch_models", json={**body, "type": 999}), 400, "type:")
    fails(await root.post("/api/channel/fetch_models", json={"type": 8, "key": "k"}), 400, "base_url:")
    fails(await root.post("/api/channel/fetch_models", json={"key": "k"}), 400, "type:")
    gemini_fake.fail("401")
    reply = await root.post("/api/channel/fetch_models", json=body)
    assert reply.status_code == 502 and "AIza-unsaved" not in reply.text

