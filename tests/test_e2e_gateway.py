"""The README's gateway walk-through against the real `tollway serve` (a subprocess), embedded and on
MariaDB + Redis with two workers: root sets up, adds a Gemini channel and an OpenAI channel (pointed at
the local fakes), prices the chat model and a balance, creates an API key, synthesizes speech with the
google-genai SDK, chats and moderates text with the openai SDK, then sees every call, with its cost, in its
own logs."""

from __future__ import annotations

import asyncio
import math
import secrets
from decimal import Decimal
from pathlib import Path

import httpx
import openai
import pytest
from google import genai
from google.genai import types as genai_types

from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI
from tests.services import REDIS_URL, create_database, drop_database, redis_ping, redis_purge, unavailable
from tests.test_e2e_serve import ROOT_PASSWORD, clean_env, free_port, serving, setup_root

TTS = "gemini-2.5-flash-preview-tts"
CHAT = "gpt-4o-mini"

FAKES_NETWORK = "127.0.0.1/32"  # the fakes listen on loopback, which Tollway refuses unless allowed


async def walk_through(base_url: str, database_type: str, gemini: FakeGemini, oai: FakeOpenAI) -> None:
    await asyncio.to_thread(setup_root, base_url, database_type)
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as admin:
        login = await admin.post("/api/user/login", json={"username": "root", "password": ROOT_PASSWORD})
        assert login.status_code == 200, login.text
        admin.headers["New-Api-User"] = str(login.json()["data"]["id"])
        for channel in ({"name": "gemini", "type": 24, "key": "g-key", "base_url": gemini.url, "models": TTS,
                         "group": "default"},
                        {"name": "openai", "type": 1, "key": "o-key", "base_url": oai.url,
                         "models": f"{CHAT},omni-moderation-latest", "group": "default"}):
            created = await admin.post("/api/channel/", json={"mode": "single", "channel": channel})
            assert created.status_code == 200, created.text
        for option, value in (("ModelRatio", f'{{"{CHAT}": 0.075}}'),
                              ("CompletionRatio", f'{{"{CHAT}": 4}}')):
            priced = await admin.put("/api/option/", json={"key": option, "value": value})
            assert priced.status_code == 200, priced.text
        uid = login.json()["data"]["id"]
        topped = await admin.post("/api/user/manage", json={"id": uid, "action": "add_quota", "mode": "add",
                                                             "value": 1_000_000})
        assert topped.status_code == 200, topped.text
        start = (await admin.get("/api/user/self")).json()["data"]["quota"]
        made = await admin.post("/api/token/", json={"name": "sdk", "unlimited_quota": True})
        assert made.status_code == 200, made.text
        key = made.json()["data"]["key"]
        assert key.startswith("sk-")

        g = genai.Client(api_key=key, http_options=genai_types.HttpOptions(base_url=base_url,
                                                                            api_version="v1beta"))
        speech = await g.aio.models.generate_content(
            model=TTS, contents="Say hi",
            config=genai_types.GenerateContentConfig(
                response_modalities=["AUDIO"],
                speech_config=genai_types.SpeechConfig(voice_config=genai_types.VoiceConfig(
                    prebuilt_voice_config=genai_types.PrebuiltVoiceConfig(voice_name="Kore")))))
        assert speech.candidates and speech.candidates[0].content and speech.candidates[0].content.parts
        o = openai.AsyncOpenAI(api_key=key, base_url=f"{base_url}/v1", max_retries=0)
        try:
            chat = await o.chat.completions.create(model=CHAT,
                                                   messages=[{"role": "user", "content": "Say hi"}])
            moderation = await o.moderations.create(input="I will kill the bug")
        finally:
            await o.close()
        assert chat.choices[0].message.content and chat.usage is not None
        assert moderation.results[0].flagged is True

        rows: list[dict[str, object]] = []
        for _ in range(50):  # the sync writes the logs within about a second
            rows = (await admin.get("/api/log/self")).json()["data"]["items"]
            if sum(1 for r in rows if r["type"] == 2) >= 3:
                break
            await asyncio.sleep(0.1)
        consumed = {r["model_name"]: r for r in rows if r["type"] == 2}
        assert set(consumed) == {TTS, CHAT, "omni-moderation-latest"}
        assert int(consumed[TTS]["quota"]) > 0  # type: ignore[call-overload]
        usage = chat.usage
        assert consumed[CHAT]["quota"] == math.ceil(  # ceil((prompt + completion × 4) × 0.075), in decimals
            (Decimal(usage.prompt_tokens) + Decimal(usage.completion_tokens) * 4) * Decimal("0.075"))
        assert consumed["omni-moderation-latest"]["quota"] == 0
        me = (await admin.get("/api/user/self")).json()["data"]
        spent = int(consumed[TTS]["quota"]) + int(consumed[CHAT]["quota"])  # type: ignore[call-overload]
        assert me["quota"] == start - spent
    assert gemini.received[-1].headers["x-goog-api-key"] == "g-key"
    assert oai.received[-1].headers["authorization"] == "Bearer o-key"


@pytest.mark.slow
async def test_walk_through_embedded(tmp_path: Path) -> None:
    env = clean_env(DATA_DIR=str(tmp_path / "data"), HOST="127.0.0.1", PORT=str(free_port()),
                    UPSTREAM_ALLOW_PRIVATE=FAKES_NETWORK)
    async with FakeGemini() as gemini, FakeOpenAI() as oai:
        with serving(tmp_path, env) as (_proc, base_url):
            await walk_through(base_url, "sqlite", gemini, oai)


@pytest.mark.slow
async def test_walk_through_on_mariadb_and_redis_with_two_workers(tmp_path: Path) -> None:
    try:
        await redis_ping()
        db_url = await asyncio.to_thread(create_database, "mariadb")
    except Exception as exc:
        unavailable("mariadb+redis", exc)
        raise
    prefix = f"twtest:e2e:{secrets.token_hex(4)}:"
    env = clean_env(DATABASE_URL=db_url, REDIS_URL=REDIS_URL, REDIS_KEY_PREFIX=prefix,
                    SECRET_KEY=secrets.token_hex(32), DATA_DIR=str(tmp_path / "data"), HOST="127.0.0.1",
                    PORT=str(free_port()), GLOBAL_API_RATE_LIMIT="0", UPSTREAM_ALLOW_PRIVATE=FAKES_NETWORK)
    try:
        async with FakeGemini() as gemini, FakeOpenAI() as oai:
            with serving(tmp_path, env, "--workers", "2") as (_proc, base_url):
                await walk_through(base_url, "mysql", gemini, oai)
    finally:
        await redis_purge(prefix)
        await asyncio.to_thread(drop_database, "mariadb", db_url)
