"""Error logs (type 5) of failed model calls (docs/api/logs.md#logs), against the real app on every stack:

- a call of a valid key refused for no price, for a model the key may not use, for insufficient quota or
  by the per-user rate limit, and a call whose every channel fails (chat streamed, embeddings, moderation,
  Gemini) or whose upstream answer is passed through, each write exactly one error log: user, key, model,
  channel tried, status and error code, the message the caller got (an upstream's without the channel's
  key), request id, stream flag, group, path; the client IP only while the owner's `record_ip_log` is on;
- an invalid key, a disabled key, a successful call, and every call while `ErrorLogEnabled` is off write
  none;
- a flood of 200 refusals from one key writes `PER_KEY_PER_MINUTE` rows, one more a minute later (the
  injected clock moved); the drops are counted;
- `GET /api/log/?type=5` and `GET /api/log/self?type=5` list them (the owner sees the status and the code,
  never the channel);
- with `LOG_DATABASE_URL` they are written to the log database only (SQLite main + MariaDB logs, MariaDB
  main + PostgreSQL logs with Redis);
- the buffer's own bounds: the per-key window never admits more than its limit in any 60 s and never
  refuses with fewer (hypothesis), a full buffer and a log database that refuses a batch again and again
  drop rows and count them, and text is cut and made storable.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from core.enums import LogType
from core.option_registry import REGISTRY
from models.db import Database
from models.logs import Log
from server.clock import Clock
from server.logs.error_logs import MAX_ATTEMPTS, MESSAGE_MAX, PER_KEY_PER_MINUTE, ErrorLogs, KeyWindow
from server.metrics import ErrorLogDrop
from tests.conftest import Stack
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user, data_of, logged_in, make_config, serve
from tests.test_log_database import Pair, count, pair  # noqa: F401  (`pair`: a fixture, by name)

CHAT, EMBED, UNPRICED = "gpt-fake-chat", "fake-embedding", "unpriced-model"
MOD = "omni-moderation-latest"
TTS = "gemini-2.5-flash-preview-tts"
SPEAK = {"contents": [{"parts": [{"text": "Say hi"}]}], "generationConfig": {"responseModalities": ["AUDIO"]}}


class StoppedClock(Clock):
    """Wall time that moves only when a test shifts it."""

    def __init__(self) -> None:
        super().__init__()
        self.at = time.time()

    def now(self) -> float:
        return self.at + self.offset


async def error_logs(app: Running) -> list[Log]:
    """Every error log, once the worker's buffer is written."""
    await app.state.error_logs.flush()
    async with app.state.log_db.transaction() as tx:
        rows = await tx.scalars(select(Log).where(Log.type == LogType.ERROR).order_by(Log.id))
        return list(rows.all())


async def priced_channel(app: Running, fake: FakeOpenAI, *, models: str = f"{CHAT},{EMBED},{MOD},{UNPRICED}"
                         ) -> int:
    channel = await seed_channel(app.state, type=1, base_url=fake.url, models=models, key="upstream-key")
    await app.state.options.put("ModelRatio", json.dumps({CHAT: 1.25, EMBED: 0.01}))
    return channel


async def chat(client: httpx.AsyncClient, key: str, model: str = CHAT, **fields: Any) -> httpx.Response:
    return await client.post("/v1/chat/completions", headers={"Authorization": f"Bearer {key}"},
                             json={"model": model, "messages": [{"role": "user", "content": "hi"}], **fields})


def the_log(logs: list[Log], response: httpx.Response) -> Log:
    """The one error log of the call `response` answered; its message is what the caller was told."""
    request_id = response.headers["X-Request-Id"]
    [log] = [row for row in logs if row.request_id == request_id]
    assert response.json()["error"]["message"] == f"{log.content} (request id: {request_id})"
    return log


def other_of(log: Log) -> dict[str, Any]:
    other: dict[str, Any] = json.loads(log.other)
    return other


async def test_each_refusal_of_a_known_key_writes_one_error_log(app: Running, openai_fake: FakeOpenAI
                                                                ) -> None:
    alice = await add_user(app.state, "alice", quota=10_000_000)
    alice_key_id, alice_key = await seed_key(app.state, alice, unlimited=True, name="main")
    limited_id, limited = await seed_key(app.state, alice, unlimited=True, name="chat only",
                                         model_limits=CHAT)
    bob = await add_user(app.state, "bob", quota=0)
    bob_key_id, bob_key = await seed_key(app.state, bob, unlimited=True, name="empty")
    carol = await add_user(app.state, "carol", quota=10_000_000)
    carol_key_id, carol_key = await seed_key(app.state, carol, unlimited=True, name="limited")
    await priced_channel(app, openai_fake)
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
        unpriced = await chat(client, alice_key, UNPRICED)
        not_allowed = await client.post("/v1/moderations", json={"input": "hi", "model": MOD},
                                        headers={"Authorization": f"Bearer {limited}"})
        short = await chat(client, bob_key)
        for name, value in (("ModelRequestRateLimitEnabled", "true"), ("ModelRequestRateLimitCount", "1")):
            await app.state.options.put(name, value)
        assert (await chat(client, carol_key)).status_code == 200  # a success: no error log
        limited_out = await chat(client, carol_key)
    assert (unpriced.status_code, unpriced.json()["error"]["code"]) == (400, "model_price_error")
    assert (not_allowed.status_code, not_allowed.json()["error"]["code"]) == (403, "model_not_allowed")
    assert (short.status_code, short.json()["error"]["code"]) == (429, "insufficient_quota")
    assert (limited_out.status_code, limited_out.json()["error"]["code"]) == (429, "rate_limit_exceeded")

    logs = await error_logs(app)
    assert len(logs) == 4
    expected = [
        (unpriced, alice, "alice", alice_key_id, "main", UNPRICED, "/v1/chat/completions"),
        (not_allowed, alice, "alice", limited_id, "chat only", MOD, "/v1/moderations"),
        (short, bob, "bob", bob_key_id, "empty", CHAT, "/v1/chat/completions"),
        (limited_out, carol, "carol", carol_key_id, "limited", CHAT, "/v1/chat/completions"),
    ]
    for response, user_id, username, key_id, key_name, model, path in expected:
        log = the_log(logs, response)
        assert (log.type, log.user_id, log.username, log.token_id, log.token_name, log.model_name) == (
            LogType.ERROR, user_id, username, key_id, key_name, model)
        assert (log.channel, log.is_stream, log.group, log.ip, log.quota) == (0, False, "default", "", 0)
        other = other_of(log)
        assert other.pop("route")  # the route's format, by name
        assert other == {
            "status_code": response.status_code, "error_code": response.json()["error"]["code"],
            "channels_tried": [], "request_path": path, "admin_info": {"use_channel": []}}
    for log in logs:  # nothing of the caller's key
        assert alice_key[3:] not in log.content + log.other and limited[3:] not in log.content + log.other


async def test_each_upstream_failure_writes_one_error_log_whatever_the_route(
        app: Running, openai_fake: FakeOpenAI, gemini_fake: FakeGemini) -> None:
    uid = await add_user(app.state, "dora", quota=10_000_000)
    key_id, key = await seed_key(app.state, uid, unlimited=True)
    first = await priced_channel(app, openai_fake, models=f"{CHAT},{EMBED},{MOD}")
    second = await priced_channel(app, openai_fake, models=f"{CHAT},{EMBED},{MOD}")
    gemini = await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS)
    openai_fake.fail("500")
    gemini_fake.fail("500")
    bearer = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
        calls = [
            (await chat(client, key, stream=True), CHAT, True, {first, second}),
            (await client.post("/v1/embeddings", json={"model": EMBED, "input": "hi"}, headers=bearer),
             EMBED, False, {first, second}),
            (await client.post("/v1/moderations", json={"model": MOD, "input": "hi"}, headers=bearer),
             MOD, False, {first, second}),
            (await client.post(f"/v1beta/models/{TTS}:generateContent", json=SPEAK,
                               headers={"x-goog-api-key": key}), TTS, False, {gemini}),
        ]
        openai_fake.echo_key = True  # the upstream quotes its key: the caller and the log get it redacted
        openai_fake.fail("400")
        passed = await client.post("/v1/moderations", json={"model": MOD, "input": "hi"}, headers=bearer)
    logs = await error_logs(app)
    assert len(logs) == 5
    for response, model, stream, channels in calls:
        assert response.status_code == 503, response.text
        log = the_log(logs, response)
        other = other_of(log)
        assert (log.user_id, log.token_id, log.model_name, log.is_stream) == (uid, key_id, model, stream)
        assert set(other["channels_tried"]) == channels and log.channel == other["channels_tried"][-1]
        assert (other["status_code"], other["error_code"]) == (503, "upstream_failed")
        assert log.content == "every upstream channel failed for this request"
    assert passed.status_code == 400
    log = next(row for row in logs if row.request_id == passed.headers["X-Request-Id"])
    assert log.content.startswith("Invalid request (injected by the fake).")
    assert (other_of(log)["status_code"], other_of(log)["error_code"]) == (400, "upstream_error")
    assert "upstream-key" not in log.content + log.other and "upstream-key" not in passed.text
    assert log.channel in (first, second)


async def test_no_error_log_for_unknown_callers_successes_or_when_switched_off(
        app: Running, openai_fake: FakeOpenAI) -> None:
    uid = await add_user(app.state, "erin", quota=10_000_000)
    _, key = await seed_key(app.state, uid, unlimited=True)
    _, disabled = await seed_key(app.state, uid, unlimited=True, status=2)
    await priced_channel(app, openai_fake)
    owner = await logged_in(app, "erin")
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
        assert (await chat(client, "sk-" + "x" * 48)).status_code == 401  # no such key
        assert (await chat(client, disabled)).status_code == 401
        assert (await chat(client, key)).status_code == 200
        await app.state.options.put("ErrorLogEnabled", "false")
        assert (await chat(client, key, UNPRICED)).status_code == 400
        openai_fake.fail("500")
        assert (await chat(client, key)).status_code == 503
        assert await error_logs(app) == []
        await app.state.options.put("ErrorLogEnabled", "true")
        data_of(await owner.put("/api/user/setting", json={"record_ip_log": True}))
        refused = await chat(client, key, UNPRICED)  # logged again, now with the client IP
    [log] = await error_logs(app)
    assert log.request_id == refused.headers["X-Request-Id"] and log.ip == "127.0.0.1"


async def test_a_flood_of_refusals_writes_at_most_the_bound(stack: Stack, tmp_path: Path,
                                                            openai_fake: FakeOpenAI) -> None:
    config = make_config(stack.database_url, tmp_path, stack.redis_url, stack.prefix)
    async with serve(config, clock=StoppedClock()) as app:
        uid = await add_user(app.state, "flood", quota=10_000_000)
        key_id, key = await seed_key(app.state, uid, unlimited=True, model_limits=CHAT)
        await priced_channel(app, openai_fake)
        async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
            for _ in range(200):
                assert (await chat(client, key, EMBED)).status_code == 403
            assert len(await error_logs(app)) == PER_KEY_PER_MINUTE
            assert app.state.error_logs.dropped[ErrorLogDrop.KEY_LIMIT] == 200 - PER_KEY_PER_MINUTE
            app.clock.shift(60)  # a minute later the key may log again
            assert (await chat(client, key, EMBED)).status_code == 403
        logs = await error_logs(app)
    assert len(logs) == PER_KEY_PER_MINUTE + 1 and {log.token_id for log in logs} == {key_id}


async def test_the_log_routes_list_error_logs(app: Running) -> None:
    await add_user(app.state, "admin", role=10)
    uid = await add_user(app.state, "fred", quota=10_000_000)
    _, key = await seed_key(app.state, uid, unlimited=True)
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
        refused = await chat(client, key, "no-such-model")
    assert refused.status_code == 404
    [log] = await error_logs(app)
    admin, fred = await logged_in(app, "admin"), await logged_in(app, "fred")
    page = data_of(await admin.get("/api/log/", params={"type": 5}))
    assert [(item["id"], item["type"], item["request_id"]) for item in page["items"]] == [
        (log.id, 5, refused.headers["X-Request-Id"])]
    assert json.loads(page["items"][0]["other"])["channels_tried"] == []
    assert data_of(await admin.get("/api/log/", params={"type": 2}))["items"] == []
    [own] = data_of(await fred.get("/api/log/self", params={"type": 5}))["items"]
    assert (own["type"], own["model_name"], own["channel"], own["content"]) == (
        5, "no-such-model", 0, log.content)
    assert json.loads(own["other"]) == {"status_code": 404, "error_code": "model_not_found",  # no channels
                                        "request_path": "/v1/chat/completions", "route": "chat"}


async def test_with_a_log_database_error_logs_go_there_only(pair: Pair,  # noqa: F811 (the fixture)
                                                             tmp_path: Path) -> None:
    config = make_config(pair.main_url, tmp_path, pair.redis_url, pair.prefix, log_database_url=pair.logs_url)
    async with serve(config) as app:
        assert app.state.log_db is not app.state.db
        await add_user(app.state, "admin", role=10)
        uid = await add_user(app.state, "gina", quota=10_000_000)
        key_id, key = await seed_key(app.state, uid, unlimited=True)
        async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
            refused = await chat(client, key, "no-such-model")
        [log] = await error_logs(app)  # read from the log database
        assert (log.token_id, log.request_id) == (key_id, refused.headers["X-Request-Id"])
        assert await count(app.state.db, Log) == 0
        admin = await logged_in(app, "admin")
        page = data_of(await admin.get("/api/log/", params={"type": 5}))
        assert [item["request_id"] for item in page["items"]] == [log.request_id]


# ---- the buffer's own bounds ----------------------------------------------------------------------------


@given(st.lists(st.tuples(st.integers(0, 3), st.floats(0, 30, allow_nan=False)), max_size=300),
       st.integers(1, 25))
def test_the_key_window_admits_exactly_its_limit_in_any_minute(steps: list[tuple[int, float]], limit: int
                                                               ) -> None:
    window, now = KeyWindow(limit, 60.0), 0.0
    admitted: dict[int, list[float]] = {}
    for key_id, wait in steps:
        now += wait
        recent = [t for t in admitted.get(key_id, []) if now - t < 60.0]
        allowed = window.allow(key_id, now)
        assert allowed == (len(recent) < limit)  # never more, and never fewer
        if allowed:
            admitted.setdefault(key_id, []).append(now)
    for times in admitted.values():  # so in any 60 s, at most `limit` of a key
        assert all(sum(1 for u in times if t - 60.0 < u <= t) <= limit for t in times)


def test_the_option_tells_the_bound() -> None:
    spec = REGISTRY["ErrorLogEnabled"]
    assert (spec.kind, spec.default) == ("bool", True)
    assert f"at most {PER_KEY_PER_MINUTE} a minute per API key" in spec.hint


def test_the_key_window_remembers_a_bounded_number_of_keys() -> None:
    window = KeyWindow(1, 60.0, keys=2)
    assert window.allow(1, 0.0) and window.allow(2, 0.0)
    assert not window.allow(3, 59.0)  # two keys active in the last minute: a third gets no log
    assert window.allow(3, 60.0)  # key 1 and 2 aged out: forgotten, room made
    assert len(window._seen) == 1


def row(key_id: int, **fields: Any) -> dict[str, Any]:
    return {"type": LogType.ERROR, "user_id": 1, "token_id": key_id, "content": "refused",
            "other": {"status_code": 400}} | fields


async def test_a_full_buffer_and_a_failing_database_drop_rows_and_count_them(embedded_app: Running,
                                                                             tmp_path: Path) -> None:
    buffer = ErrorLogs(embedded_app.state.log_db, embedded_app.state.clock, capacity=3)
    assert [buffer.add(row(n)) for n in range(5)] == [True, True, True, False, False]
    assert buffer.dropped == {ErrorLogDrop.BUFFER_FULL: 2}
    assert await buffer.flush() == 3 and buffer.pending == 0
    assert await buffer.flush() == 0

    broken = Database(f"sqlite+aiosqlite:///{tmp_path}/missing/logs.db")
    failing = ErrorLogs(broken, embedded_app.state.clock)
    failing.add(row(1))
    try:
        for _ in range(MAX_ATTEMPTS):
            assert failing.pending == 1  # kept until the last attempt fails
            with pytest.raises(OperationalError, match="unable to open database file"):
                await failing.flush()
        assert failing.pending == 0 and failing.dropped == {ErrorLogDrop.WRITE_FAILED: 1}
    finally:
        await broken.dispose()


async def test_text_is_cut_and_made_storable(app: Running) -> None:
    buffer = ErrorLogs(app.state.log_db, app.state.clock)
    assert buffer.add(row(7, content="é" * (MESSAGE_MAX + 50), model_name="bad\ud800model\x00" + "m" * 300,
                          request_id="r" * 200, other={"request_path": "/v1/\ud800"}))
    assert await buffer.flush() == 1
    async with app.state.log_db.transaction() as tx:
        [log] = (await tx.scalars(select(Log).where(Log.token_id == 7))).all()
    assert log.content == "é" * MESSAGE_MAX
    assert log.model_name == "bad?model" + "m" * 245  # cut to 255, the surrogate replaced, NUL removed
    assert len(log.request_id) == 128 and json.loads(log.other) == {"request_path": "/v1/?"}
