"""The model-call routes run without the app's middleware (`server/app.py` `without_middleware`): they
identify the request themselves, and every reply — an answer, a refusal, a stream, a model list — still
carries `X-Request-Id` (echoed when well-formed, else a fresh one), while the `/api` routes keep the whole
guard."""

from __future__ import annotations

import re

import httpx

from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user

HEX32 = re.compile(r"[0-9a-f]{32}")
TTS = "gemini-2.5-flash-preview-tts"
MOD = "omni-moderation-latest"
BODY = {"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": {"responseModalities": ["AUDIO"]}}


async def test_every_model_call_reply_carries_the_request_id(embedded_app: Running, openai_fake: FakeOpenAI,
                                                             gemini_fake: FakeGemini) -> None:
    app = embedded_app
    relay_routes = [r for r in app.app.router.routes if ".relay." in r.name]
    assert relay_routes and all(not list(r.extra.request_middleware) and not list(r.extra.response_middleware)
                                for r in relay_routes)
    assert all(list(r.extra.request_middleware) for r in app.app.router.routes if r.path.startswith("api/"))
    uid = await add_user(app.state, "ida", quota=1_000_000)
    _, key = await seed_key(app.state, uid, remain=1_000_000)
    await seed_channel(app.state, type=1, base_url=openai_fake.url, models=MOD)
    await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS)
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
        calls = [
            ("POST", "/v1/moderations", {"input": "hi"}, {"Authorization": key}, 200),
            ("POST", "/v1/moderations", {"input": "hi"}, {"Authorization": "sk-nope"}, 401),
            ("POST", "/v1/moderations", {"input": 5}, {"Authorization": key}, 400),
            ("POST", f"/v1beta/models/{TTS}:generateContent", BODY, {"x-goog-api-key": key}, 200),
            ("POST", f"/v1beta/models/{TTS}:streamGenerateContent?alt=sse", BODY, {"x-goog-api-key": key},
             200),
            ("GET", "/v1/models", None, {"Authorization": key}, 200),
            ("GET", "/v1beta/models", None, {"x-goog-api-key": key}, 200),
            ("POST", "/v1beta/models/nothing-here", BODY, {"x-goog-api-key": key}, 404),
        ]
        for method, path, body, headers, status in calls:
            made = await client.request(method, path, json=body, headers=headers)
            assert made.status_code == status, (path, made.text)
            assert HEX32.fullmatch(made.headers["x-request-id"]), (path, made.headers)
            echoed = await client.request(method, path, json=body, headers={**headers, "X-Request-Id": "t-1"})
            assert echoed.status_code == status and echoed.headers["x-request-id"] == "t-1", path
