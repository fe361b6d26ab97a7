"""Bad input and refused callers on the model-call routes: each a clear 4xx in the route family's error
shape (Google on Gemini routes, OpenAI on `/v1/*`), naming the field, never a 500, never charged."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user
from tests.test_http_conventions import raw_exchange

TTS = "gemini-2.5-flash-preview-tts"
GEN = f"/v1beta/models/{TTS}:generateContent"


@pytest.fixture
async def env(embedded_app: Running, gemini_fake: FakeGemini, openai_fake: FakeOpenAI
              ) -> dict[str, Any]:
    state = embedded_app.state
    uid = await add_user(state, "alice", quota=10_000_000)
    _, key = await seed_key(state, uid, unlimited=True)
    await seed_channel(state, type=24, base_url=gemini_fake.url, models=f"{TTS},gemini-2.5-flash")
    await seed_channel(state, type=1, base_url=openai_fake.url, models="omni-moderation-latest")
    await state.options.put("ModelRatio", '{"gemini-2.5-flash": 0.15}')
    return {"app": embedded_app, "uid": uid, "key": key, "gemini": gemini_fake, "openai": openai_fake}


def google_reason(response: httpx.Response) -> str:
    error = response.json()["error"]
    assert isinstance(error["code"], int) and error["status"]
    assert response.headers["x-request-id"] in error["message"]
    return str(error["details"][0]["reason"])


@pytest.mark.parametrize(("body", "status", "needle"), [
    ({"generationConfig": {}}, 400, "contents"),
    ({"contents": []}, 400, "contents"),
    ({"contents": [{"parts": "text"}]}, 400, "contents[0].parts"),
    ({"contents": [{"parts": []}], "generationConfig": {"maxOutputTokens": 0}}, 400, "maxOutputTokens"),
    ({"contents": [{"parts": []}], "generationConfig": {"responseModalities": "AUDIO"}}, 400,
     "responseModalities"),
    ({"contents": [{"parts": []}], "generationConfig": {"speechConfig": {
        "voiceConfig": {"prebuiltVoiceConfig": {"voiceName": 7}}}}}, 400, "voiceName"),
    ({"contents": [{"parts": []}], "generationConfig": {"speechConfig": {
        "voiceConfig": {}, "voice_config": {}}}}, 400, "voiceConfig"),
])
async def test_bad_generate_bodies_name_the_field(env: dict[str, Any], body: Any, status: int,
                                                  needle: str) -> None:
    async with httpx.AsyncClient(base_url=env["app"].url) as client:
        response = await client.post(GEN, json=body, headers={"x-goog-api-key": env["key"]})
    assert response.status_code == status
    assert google_reason(response) == "invalid_request"
    assert needle in response.json()["error"]["message"]
    assert env["gemini"].received == []


async def test_non_json_and_huge_bodies(env: dict[str, Any]) -> None:
    headers = {"x-goog-api-key": env["key"], "Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=env["app"].url, timeout=60) as client:
        not_json = await client.post(GEN, content=b"{nope", headers=headers)
        ten_mb = await client.post(GEN, content=b"x" * (10 * 1024 * 1024), headers=headers)
    # above 32 MiB: refused on its Content-Length before the body is read (so none is sent)
    request = (b"POST /v1/moderations HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
               b"Authorization: Bearer " + env["key"].encode() + b"\r\n"
               + f"Content-Length: {33 * 1024 * 1024}\r\n\r\n".encode())
    status, _headers, raw = await raw_exchange(env["app"].url, request)
    assert not_json.status_code == 400 and google_reason(not_json) == "invalid_request"
    assert ten_mb.status_code == 400
    assert status == 413
    assert json.loads(raw)["error"]["type"] == "invalid_request_error"


async def test_model_checks(env: dict[str, Any]) -> None:
    speech = {"contents": [{"parts": [{"text": "hi"}]}],
              "generationConfig": {"responseModalities": ["audio"]}}
    headers = {"x-goog-api-key": env["key"]}
    async with httpx.AsyncClient(base_url=env["app"].url) as client:
        unknown = await client.post("/v1beta/models/no-such-model:generateContent", json=speech,
                                    headers=headers)
        not_speech = await client.post("/v1beta/models/gemini-2.5-flash:generateContent", json=speech,
                                       headers=headers)
        method = await client.post(f"/v1beta/models/{TTS}:countTokens", json=speech, headers=headers)
        empty = await client.post("/v1beta/models/:generateContent", json=speech, headers=headers)
        encoded = await client.post(f"/v1beta/models/models%2F{TTS}%3AgenerateContent", json=speech,
                                    headers=headers)
    assert unknown.status_code == 404 and google_reason(unknown) == "model_not_found"
    assert not_speech.status_code == 400 and google_reason(not_speech) == "unsupported_modality"
    assert "does not support speech output" in not_speech.json()["error"]["message"]
    assert method.status_code == 404
    assert empty.status_code == 400
    assert encoded.status_code == 200, encoded.text


async def test_unpriced_model_is_refused(env: dict[str, Any]) -> None:
    state = env["app"].state
    await seed_channel(state, type=1, base_url=env["openai"].url, models="custom-moderator")
    async with httpx.AsyncClient(base_url=env["app"].url) as client:
        response = await client.post("/v1/moderations", json={"input": "a", "model": "custom-moderator"},
                                     headers={"Authorization": f"Bearer {env['key']}"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "model_price_error"


@pytest.mark.parametrize(("value", "ok"), [
    ("text", True), (["a", "b"], True), ([{"type": "text", "text": "a"}], True),
    (None, False), ("", False), ([], False), (["a", ""], False), ([{"type": "video", "url": "x"}], False),
    (["a", {"type": "text", "text": "b"}], False), (7, False),
])
async def test_moderation_input_rules(env: dict[str, Any], value: Any, ok: bool) -> None:
    async with httpx.AsyncClient(base_url=env["app"].url) as client:
        response = await client.post("/v1/moderations", json={"input": value},
                                     headers={"Authorization": f"Bearer {env['key']}"})
    if ok:
        assert response.status_code == 200, response.text
    else:
        assert response.status_code == 400
        assert response.json()["error"]["param"] == "input"
        assert response.json()["error"]["type"] == "invalid_request_error"


async def test_caller_checks_in_order(env: dict[str, Any]) -> None:
    app: Running = env["app"]
    state = app.state
    uid = env["uid"]
    now = state.clock.now_s()
    _, disabled = await seed_key(state, uid, status=2)
    _, expired = await seed_key(state, uid, expired_time=now - 5, unlimited=True)
    _, elsewhere = await seed_key(state, uid, unlimited=True, allow_ips="10.0.0.0/8")
    _, limited = await seed_key(state, uid, unlimited=True, model_limits="gemini-2.5-flash")
    _, bad_group = await seed_key(state, uid, unlimited=True, group="svip")
    other = await add_user(state, "mallory", status=2)
    _, banned_owner = await seed_key(state, other, unlimited=True)
    cases = [
        ("", 401, "invalid_api_key"), ("sk-" + "a" * 48, 401, "invalid_api_key"),
        (disabled, 401, "token_disabled"), (expired, 401, "token_expired"),
        (banned_owner, 403, "user_disabled"), (elsewhere, 403, "ip_not_allowed"),
        (bad_group, 403, "group_not_allowed"), (limited, 403, "model_not_allowed"),
    ]
    async with httpx.AsyncClient(base_url=app.url) as client:
        for key, status, code in cases:
            response = await client.post("/v1/moderations", json={"input": "x", "model": TTS},
                                         headers={"Authorization": f"Bearer {key}"} if key else {})
            assert response.status_code == status, (code, response.text)
            assert response.json()["error"]["code"] == code
        # Gemini routes take x-goog-api-key, then ?key=, then Authorization
        assert (await client.get(f"/v1beta/models?key={env['key']}")).status_code == 200
        assert (await client.get("/v1beta/models", headers={"Authorization": f"Bearer {env['key']}"})
                ).status_code == 200
        listed = (await client.get("/v1beta/models", headers={"x-goog-api-key": env["key"]})).json()
    assert [m["name"] for m in listed["models"]] == ["models/gemini-2.5-flash", f"models/{TTS}"]
    assert env["openai"].received == []
