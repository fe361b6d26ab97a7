"""What an upstream provider says must not leak to the caller, the logs or the database, and how its
failures are reported — against the fake providers over real sockets:

- a reply built from an upstream answer (plain, streamed in both forms, moderation, a passed-through
  4xx) carries none of the upstream's headers (`Set-Cookie`, organisation, rate-limit, any `X-…`): only
  the upstream's `Content-Type`, our `X-Request-Id` and what we add ourselves;
- a provider that echoes the channel's key in its error text: the key (every key of a multi-key
  channel) appears in no log record, no channel or log row and no reply; key-shaped strings are redacted
  too (`server/redaction.py`);
- an upstream that drops the connection (closed before replying, closed mid-reply, refused) is a 503
  `upstream_failed`, not a 504 timeout; only a timeout is a 504 — on both upstream transports, and on a
  stream after its first byte (the final error event);
- users' own log views hide `other.channels_tried` and every `other` field that is not meant for them;
  admin views keep them.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from models.channels import Channel
from models.logs import Log
from server.redaction import REDACTED, redact
from tests.conftest import Stack
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user, data_of, logged_in, make_config, serve

TTS = "gemini-2.5-flash-preview-tts"
MOD = "omni-moderation-latest"
SPEECH_BODY = {"contents": [{"parts": [{"text": "Say hi"}]}],
               "generationConfig": {"responseModalities": ["AUDIO"]}}
UPSTREAM_HEADERS = {
    "Set-Cookie": "upstream_session=abc123; Path=/; HttpOnly",
    "openai-organization": "org-secret-organisation",
    "openai-processing-ms": "42",
    "x-ratelimit-limit-requests": "10000",
    "x-ratelimit-remaining-requests": "9999",
    "x-anything": "internal detail",
    "X-Goog-Upstream-Host": "10.0.0.7",
    "Alt-Svc": 'h3=":443"; ma=2592000',
    "Via": "1.1 upstream-proxy",
    "Server-Timing": "gfet4t7; dur=123",
}
# Headers Sanic itself writes on every reply (`alt-svc` empty unless HTTP/3 is served); anything else
# must be ours by name.
TRANSPORT_HEADERS = {"content-length", "connection", "keep-alive", "transfer-encoding", "alt-svc"}


async def caller(app: Running, name: str = "caller", quota: int = 10_000_000) -> tuple[int, str]:
    uid = await add_user(app.state, name, quota=quota)
    _, key = await seed_key(app.state, uid, unlimited=True)
    return uid, key


def client_of(app: Running, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=app.url, timeout=30,
                             headers={"x-goog-api-key": key, "Authorization": f"Bearer {key}"})


# ---- response headers ----------------------------------------------------------------------------------

CALLS: dict[str, tuple[str, str, Any, set[str]]] = {
    # kind: (path, failure mode or "", body, headers we add ourselves)
    "gemini plain": (f"/v1beta/models/{TTS}:generateContent", "", SPEECH_BODY, set()),
    "gemini sse stream": (f"/v1beta/models/{TTS}:streamGenerateContent?alt=sse", "", SPEECH_BODY,
                          {"cache-control"}),
    "gemini array stream": (f"/v1beta/models/{TTS}:streamGenerateContent", "", SPEECH_BODY,
                            {"cache-control"}),
    "gemini passed-through 400": (f"/v1beta/models/{TTS}:generateContent", "400", SPEECH_BODY, set()),
    "moderation": ("/v1/moderations", "", {"input": "hello"}, set()),
    "moderation passed-through 400": ("/v1/moderations", "400", {"input": "hello"}, set()),
}


@pytest.mark.parametrize("kind", list(CALLS))
async def test_upstream_response_headers_never_reach_the_caller(
        embedded_app: Running, gemini_fake: FakeGemini, openai_fake: FakeOpenAI, kind: str) -> None:
    path, failure, body, ours = CALLS[kind]
    await seed_channel(embedded_app.state, type=24, base_url=gemini_fake.url, models=TTS)
    await seed_channel(embedded_app.state, type=1, base_url=openai_fake.url, models=MOD)
    for fake in (gemini_fake, openai_fake):
        fake.extra_headers = dict(UPSTREAM_HEADERS)
        if failure:
            fake.fail(failure)
    _, key = await caller(embedded_app)
    async with client_of(embedded_app, key) as client:
        response = await client.post(path, json=body)
        await response.aread()
    assert response.status_code == (400 if failure else 200), response.text
    names = {name.lower() for name in response.headers}
    assert response.headers.get("alt-svc", "") == ""  # Sanic's placeholder, never the upstream's
    assert names - TRANSPORT_HEADERS == {"content-type", "x-request-id"} | ours, response.headers
    assert not response.headers["x-request-id"].startswith("req_")  # ours, not the fake OpenAI's
    if not failure and kind in ("gemini plain", "moderation"):
        fake = gemini_fake if kind.startswith("gemini") else openai_fake
        assert response.headers["content-type"] == ("application/json; charset=UTF-8" if fake is gemini_fake
                                                    else "application/json")


@pytest.mark.parametrize("kind", ["gemini plain", "moderation"])
async def test_a_compressed_upstream_answer_reaches_the_caller_decoded(
        embedded_app: Running, gemini_fake: FakeGemini, openai_fake: FakeOpenAI, kind: str) -> None:
    """The gateway answers with our headers only (no `Content-Encoding`), so an upstream that gzips its
    answer (aiohttp asks for gzip by default) must be decoded first: the caller reads JSON, the usage in it
    is billed."""
    path, _, body, _ = CALLS[kind]
    await seed_channel(embedded_app.state, type=24, base_url=gemini_fake.url, models=TTS)
    await seed_channel(embedded_app.state, type=1, base_url=openai_fake.url, models=MOD)
    fake = gemini_fake if kind.startswith("gemini") else openai_fake
    fake.compress = True
    _, key = await caller(embedded_app)
    async with client_of(embedded_app, key) as client:
        response = await client.post(path, json=body)
    assert response.status_code == 200, response.text
    assert "content-encoding" not in response.headers
    reply = response.json()  # not gzip bytes
    assert ("candidates" in reply) if fake is gemini_fake else ("results" in reply)
    assert "gzip" in fake.last.headers.get("accept-encoding", "")  # it was compressed on the wire


# ---- redaction ----------------------------------------------------------------------------------------

GEMINI_KEYS = ("gemini-first-secret-7f3a", "gemini-second-secret-9b1c")  # not key-shaped: found by value
OPENAI_KEY = "sk-proj-Zq8vX2mN4bT6yR1wK3pL5sD7fG9hJ0aQ"


async def _rows_text(app: Running) -> str:
    """Every channel and log row as text (the encrypted key column left out: it is ciphertext)."""
    await app.state.quota_sync.drain()
    out = []
    async with app.state.db.transaction() as tx:
        for channel in (await tx.scalars(select(Channel))).all():
            out.append(json.dumps({c.name: getattr(channel, c.key) for c in Channel.__table__.columns
                                   if c.name != "key_encrypted"}, default=str))
        for row in (await tx.scalars(select(Log))).all():
            out.append(json.dumps({c.name: getattr(row, c.key) for c in Log.__table__.columns}, default=str))
    return "\n".join(out)


async def test_a_provider_echoing_the_key_leaks_it_nowhere(
        app: Running, gemini_fake: FakeGemini, openai_fake: FakeOpenAI,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    gemini_id = await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS,
                                   key="\n".join(GEMINI_KEYS), multi_key_mode="polling")
    openai_id = await seed_channel(app.state, type=1, base_url=openai_fake.url, models=MOD, key=OPENAI_KEY)
    gemini_fake.echo_key = openai_fake.echo_key = True
    _, key = await caller(app)
    replies: list[str] = []
    async with client_of(app, key) as client:
        # a passed-through 400 quoting the second key (polling: key 0 first, then key 1)
        gemini_fake.fail("400", times=2)
        for _ in range(2):
            response = await client.post(f"/v1beta/models/{TTS}:generateContent", json=SPEECH_BODY)
            assert response.status_code == 400
            replies.append(response.text)
        # a bad key quoting itself: the key is auto-disabled with the upstream's message as its reason
        gemini_fake.fail("bad_key", times=1)
        response = await client.post(f"/v1beta/models/{TTS}:generateContent", json=SPEECH_BODY)
        replies.append(response.text)
        # OpenAI: a passed-through 400, then a 401 that disables the channel
        openai_fake.fail("400", times=1)
        response = await client.post("/v1/moderations", json={"input": "hello"})
        assert response.status_code == 400
        replies.append(response.text)
        openai_fake.fail("401", times=1)
        response = await client.post("/v1/moderations", json={"input": "hello"})
        assert response.status_code == 503
        replies.append(response.text)

    # the upstreams did quote the keys (redacted where they arrived), and the gateway acted on them
    async with app.state.db.transaction() as tx:
        gemini_row = await tx.get(Channel, gemini_id)
        openai_row = await tx.get(Channel, openai_id)
        assert gemini_row is not None and openai_row is not None
        assert json.loads(gemini_row.channel_info)["multi_key_status_list"] == {"0": 3}
        assert openai_row.status == 3
        reason = json.loads(openai_row.other_info)["status_reason"]
        assert "Incorrect API key provided" in reason and REDACTED in reason
    assert any(REDACTED in r for r in replies)

    rows = await _rows_text(app)
    logged = "\n".join(record.getMessage() + (record.exc_text or "") for record in caplog.records)
    for secret in (*GEMINI_KEYS, OPENAI_KEY):
        for where, text in (("a reply", "\n".join(replies)), ("a row", rows), ("the log", logged)):
            assert secret not in text, f"{secret} in {where}"


def test_redaction_hides_keys_and_key_shaped_strings_and_keeps_ordinary_text() -> None:
    text = ("bad key sk-abcdefghijklmnopqrstuvwxyz012345 and AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW "
            "header Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dGVzdHNpZw "
            "token Zk3hQ9pL2mX7vB4nR8tY1wE6uI0oPaSdFgHj and the channel key my-short-key")
    out = redact(text, ["my-short-key"])
    for secret in ("sk-abcdefghijklmnopqrstuvwxyz012345", "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
                   "eyJhbGciOiJIUzI1NiJ9", "Zk3hQ9pL2mX7vB4nR8tY1wE6uI0oPaSdFgHj", "my-short-key"):
        assert secret not in out, out
    ordinary = ("Rate limit reached for omni-moderation-latest in organization org-fake on requests per min. "
                "Quota GenerateRequestsPerMinutePerProjectPerModel-FreeTier exceeded, see "
                "https://ai.google.dev/gemini-api/docs/rate-limits request 3f2b9c1e8d7a4f6b0c5e9a1d2b3c4d5e "
                "id 123e4567-e89b-12d3-a456-426614174000 models/gemini-2.5-flash-preview-tts")
    assert redact(ordinary, []) == ordinary
    # bytes: everything but the secret stays byte for byte, also bytes that are not UTF-8
    raw = b'{"error": {"message": "key \xff my-short-key"}}'
    assert redact(raw, ["my-short-key"]) == b'{"error": {"message": "key \xff ' + REDACTED.encode() + b'"}}'


# ---- drops and timeouts -------------------------------------------------------------------------------

TRANSPORTS = ["aiohttp", "httpx"]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode", ["drop", "drop_mid_stream", "refused"])
async def test_a_dropped_upstream_is_a_503_not_a_timeout(embedded_stack: Stack, tmp_path: Path,
                                                         gemini_fake: FakeGemini, transport: str,
                                                         mode: str) -> None:
    config = make_config(embedded_stack.database_url, tmp_path, upstream_transport=transport)
    async with serve(config) as app:
        await app.state.options.put("RetryTimes", 0)
        url = gemini_fake.url
        if mode == "refused":
            await gemini_fake.stop()  # nothing listens on that port any more
        else:
            gemini_fake.fail(mode)
        await seed_channel(app.state, type=24, base_url=url, models=TTS)
        _, key = await caller(app)
        async with client_of(app, key) as client:
            response = await client.post(f"/v1beta/models/{TTS}:generateContent", json=SPEECH_BODY)
        assert response.status_code == 503, response.text
        error = response.json()["error"]
        assert error["status"] == "UNAVAILABLE" and error["details"][0]["reason"] == "upstream_failed"


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode", ["slow", "stall_mid_stream"])
async def test_only_an_upstream_timeout_is_a_504(embedded_stack: Stack, tmp_path: Path,
                                                 gemini_fake: FakeGemini, transport: str, mode: str) -> None:
    config = make_config(embedded_stack.database_url, tmp_path, upstream_transport=transport,
                         upstream_timeout=0.3)
    async with serve(config) as app:
        await app.state.options.put("RetryTimes", 0)
        gemini_fake.slow_seconds = 3
        gemini_fake.fail(mode)
        await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS)
        _, key = await caller(app)
        async with client_of(app, key) as client:
            response = await client.post(f"/v1beta/models/{TTS}:generateContent", json=SPEECH_BODY)
        assert response.status_code == 504, response.text
        error = response.json()["error"]
        assert error["status"] == "DEADLINE_EXCEEDED" and error["details"][0]["reason"] == "upstream_timeout"


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(("mode", "status", "google_status"), [("drop_mid_stream", 503, "UNAVAILABLE"),
                                                              ("stall_mid_stream", 504, "DEADLINE_EXCEEDED")])
async def test_a_stream_cut_after_its_first_byte_ends_with_the_right_error_event(
        embedded_stack: Stack, tmp_path: Path, gemini_fake: FakeGemini, transport: str, mode: str,
        status: int, google_status: str) -> None:
    config = make_config(embedded_stack.database_url, tmp_path, upstream_transport=transport,
                         upstream_timeout=0.3)
    async with serve(config) as app:
        gemini_fake.slow_seconds = 3
        gemini_fake.fail(mode)
        await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS)
        _, key = await caller(app)
        async with client_of(app, key) as client:
            response = await client.post(f"/v1beta/models/{TTS}:streamGenerateContent?alt=sse",
                                         json=SPEECH_BODY)
        assert response.status_code == 200
        events = [line.removeprefix("data: ") for line in response.text.split("\r\n") if line]
        assert len(events) == 2, events  # the first chunk, then the error
        error = json.loads(events[-1])["error"]
        assert (error["code"], error["status"]) == (status, google_status)


# ---- user log views ------------------------------------------------------------------------------------

async def test_user_log_views_hide_channel_ids_and_admin_fields(app: Running,
                                                                 gemini_fake: FakeGemini) -> None:
    await add_user(app.state, "admin", role=10)
    async with FakeGemini() as second:
        first_id = await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS, priority=10)
        second_id = await seed_channel(app.state, type=24, base_url=second.url, models=TTS)
        gemini_fake.fail("500", times=1)
        uid, key = await caller(app, "alice")
        async with client_of(app, key) as client:
            response = await client.post(f"/v1beta/models/{TTS}:generateContent", json=SPEECH_BODY)
            assert response.status_code == 200, response.text
    await app.state.quota_sync.drain()
    # a row with a field the log writer may add tomorrow: unknown fields are not shown to users
    async with app.state.db.transaction() as tx:
        tx.add(Log(user_id=uid, username="alice", type=2, created_at=app.state.clock.now_s() - 10,
                   content="older", other=json.dumps({"model_ratio": 1, "upstream_key_index": 1,
                                                      "channels_tried": [first_id]})))
    alice, admin = await logged_in(app, "alice"), await logged_in(app, "admin")

    admin_items = data_of(await admin.get("/api/log/"))["items"]
    call = next(i for i in admin_items if i["request_id"] == response.headers["x-request-id"])
    assert json.loads(call["other"])["channels_tried"] == [first_id, second_id]
    assert call["channel"] == second_id

    mine = data_of(await alice.get("/api/log/self"))["items"]
    found = data_of(await alice.get("/api/log/self/search", params={"keyword": TTS}))["items"]
    assert len(mine) == 2 and len(found) == 1
    for item in mine + found:
        other = json.loads(item["other"])
        assert item["channel"] == 0
        assert not {"channels_tried", "admin_info", "upstream_key_index"} & set(other), other
    own_call = next(i for i in mine if i["request_id"] == response.headers["x-request-id"])
    other = json.loads(own_call["other"])
    # what a user may see of their call is still there
    assert {"model_ratio", "group_ratio", "completion_ratio", "model_price", "is_model_mapped",
            "upstream_model_name", "request_path", "audio_output_tokens", "text_output_tokens",
            "stream_interrupted"} <= set(other), other
