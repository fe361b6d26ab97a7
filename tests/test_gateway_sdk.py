"""The official SDKs against Tollway, on every stack: google-genai (v1beta and its default v1, plain and
streaming, voice config in the SDK's snake_case) and openai (moderations with a string, a list and
multimodal parts), with the fakes behind; each call shows up as one consume log with its quota charged."""

from __future__ import annotations

import base64
from typing import Any

import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types
from sqlalchemy import select

from models.logs import Log
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user

TTS = "gemini-2.5-flash-preview-tts"
SPEECH = genai_types.GenerateContentConfig(
    response_modalities=["AUDIO"],
    speech_config=genai_types.SpeechConfig(voice_config=genai_types.VoiceConfig(
        prebuilt_voice_config=genai_types.PrebuiltVoiceConfig(voice_name="Kore"))),
)


def dig(obj: Any, *names: str) -> Any:
    """Follow camelCase names, accepting the snake_case spelling at any level."""
    for name in names:
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in name)
        obj = obj[name] if name in obj else obj[snake]
    return obj


def google(url: str, key: str, version: str | None = "v1beta") -> genai.Client:
    options: dict[str, str] = {"base_url": url}
    if version:
        options["api_version"] = version
    return genai.Client(api_key=key, http_options=genai_types.HttpOptions(**options))


async def consume_logs(running: Running) -> list[Log]:
    await running.state.quota_sync.drain()
    async with running.state.db.transaction() as tx:
        return list((await tx.scalars(select(Log).where(Log.type == 2).order_by(Log.id))).all())


async def setup(app: Running, gemini: FakeGemini, oai: FakeOpenAI, quota: int = 10_000_000
                ) -> tuple[int, str]:
    uid = await add_user(app.state, "alice", quota=quota)
    _, key = await seed_key(app.state, uid, unlimited=True)
    await seed_channel(app.state, type=24, base_url=gemini.url, models=f"{TTS},gemini-2.5-pro-preview-tts",
                       key="gemini-upstream-key")
    await seed_channel(app.state, type=1, base_url=oai.url, models="omni-moderation-latest",
                       key="openai-upstream-key")
    return uid, key


@pytest.mark.parametrize("version", ["v1beta", None])
async def test_google_sdk_synthesizes_speech_and_is_charged(app: Running, gemini_fake: FakeGemini,
                                                             openai_fake: FakeOpenAI, version: str | None
                                                             ) -> None:
    uid, key = await setup(app, gemini_fake, openai_fake)
    client = google(app.url, key, version)
    reply = await client.aio.models.generate_content(model=TTS, contents="Say hi to everyone", config=SPEECH)
    part = reply.candidates[0].content.parts[0]  # type: ignore[index,union-attr]
    assert part.inline_data is not None and part.inline_data.mime_type.startswith("audio/L16")  # type: ignore[union-attr]
    assert len(part.inline_data.data) > 0  # type: ignore[arg-type]
    assert reply.usage_metadata is not None and reply.usage_metadata.candidates_token_count == 500

    upstream = gemini_fake.received[-1]
    assert upstream.path.startswith(f"/v1beta/models/{TTS}:generateContent")
    assert upstream.headers["x-goog-api-key"] == "gemini-upstream-key"
    sent = upstream.json
    # the caller's bytes went upstream untouched: the SDK's own (snake_case) voice config survives
    assert dig(sent, "generationConfig", "speechConfig", "voiceConfig", "prebuiltVoiceConfig",
               "voiceName") == "Kore"
    assert b"voice_config" in upstream.body or b"voiceConfig" in upstream.body

    logs = await consume_logs(app)
    assert len(logs) == 1
    prompt = reply.usage_metadata.prompt_token_count or 0
    assert logs[0].quota == -(-((prompt + 500 * 20) * 25) // 100)  # ceil((p + 500×20) × 0.25)
    assert logs[0].model_name == TTS and logs[0].user_id == uid and not logs[0].is_stream
    user = await app.state.users.state(uid)
    assert user is not None
    assert await app.state.quota.balance("user", uid) == 10_000_000 - logs[0].quota


async def test_google_sdk_streams_speech_chunk_by_chunk(app: Running, gemini_fake: FakeGemini,
                                                       openai_fake: FakeOpenAI) -> None:
    _, key = await setup(app, gemini_fake, openai_fake)
    client = google(app.url, key)
    chunks = []
    async for chunk in await client.aio.models.generate_content_stream(model=TTS, contents="Say hi",
                                                                        config=SPEECH):
        chunks.append(chunk)
    assert len(chunks) == gemini_fake.stream_chunks
    audio = b"".join(base64.b64decode(c.candidates[0].content.parts[0].inline_data.data)  # type: ignore[index,union-attr,arg-type]
                     if isinstance(c.candidates[0].content.parts[0].inline_data.data, str)  # type: ignore[index,union-attr]
                     else c.candidates[0].content.parts[0].inline_data.data  # type: ignore[index,union-attr]
                     for c in chunks)
    assert len(audio) > 0
    assert gemini_fake.received[-1].query.get("alt") == "sse"
    logs = await consume_logs(app)
    assert len(logs) == 1 and logs[0].is_stream
    assert logs[0].completion_tokens == 500  # the cumulative usage of the last chunk


async def test_google_sdk_sees_resource_exhausted_when_the_balance_is_short(
        app: Running, gemini_fake: FakeGemini, openai_fake: FakeOpenAI) -> None:
    uid, key = await setup(app, gemini_fake, openai_fake, quota=100)
    client = google(app.url, key)
    with pytest.raises(genai_errors.ClientError) as caught:
        await client.aio.models.generate_content(model=TTS, contents="Say hi", config=SPEECH)
    assert caught.value.code == 429 and caught.value.status == "RESOURCE_EXHAUSTED"
    assert gemini_fake.received == []
    assert await consume_logs(app) == []
    assert await app.state.quota.balance("user", uid) == 100


async def test_openai_sdk_moderates_strings_lists_and_parts(app: Running, gemini_fake: FakeGemini,
                                                           openai_fake: FakeOpenAI) -> None:
    _, key = await setup(app, gemini_fake, openai_fake)
    client = openai.AsyncOpenAI(api_key=key, base_url=f"{app.url}/v1", max_retries=0)
    try:
        inputs: list[object] = [
            "I will kill the process",
            ["first text", "second text", "I kill weeds"],
            [{"type": "text", "text": "look at this"},
             {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}],
        ]
        for value in inputs:
            raw = await client.moderations.with_raw_response.create(input=value)  # type: ignore[arg-type]
            body = openai.types.ModerationCreateResponse.model_validate(raw.http_response.json())
            expected = len(value) if isinstance(value, list) and isinstance(value[0], str) else 1
            assert len(body.results) == expected
            assert raw.http_response.headers["x-request-id"]
        assert (await client.moderations.create(input="kill")).results[0].flagged is True
    finally:
        await client.close()
    assert openai_fake.received[-1].headers["authorization"] == "Bearer openai-upstream-key"
    logs = await consume_logs(app)
    assert len(logs) == 4 and all(log.quota == 0 and log.model_name == "omni-moderation-latest"
                                  for log in logs)


async def test_openai_sdk_insufficient_quota_is_not_retried(app: Running, gemini_fake: FakeGemini,
                                                           openai_fake: FakeOpenAI) -> None:
    uid = await add_user(app.state, "bob", quota=0)
    _, key = await seed_key(app.state, uid, unlimited=True)
    await seed_channel(app.state, type=1, base_url=openai_fake.url, models="omni-moderation-latest")
    await app.state.options.put("ModelPrice", '{"omni-moderation-latest": 0.01}')
    client = openai.AsyncOpenAI(api_key=key, base_url=f"{app.url}/v1")  # default retries: 2
    try:
        with pytest.raises(openai.RateLimitError) as caught:
            await client.moderations.create(input="hello")
    finally:
        await client.close()
    assert caught.value.code == "insufficient_quota"
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert openai_fake.received == []
