"""FakeGemini answers in Gemini's wire format: generation (audio, text, streamed), models, errors, keys.

The shapes are also checked with the google-genai SDK's own types and client, pointed at the fake.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from tests.fakes import FakeGemini
from tests.fakes.fixtures import client_for
from tests.fakes.gemini import AUDIO_MIME, pcm_audio, prompt_tokens

TTS = "gemini-2.5-flash-preview-tts"
GENERATE = f"/v1beta/models/{TTS}:generateContent"
STREAM = f"/v1beta/models/{TTS}:streamGenerateContent"


def audio_body(text: str = "say hello to the world") -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": text}]}],
            "generationConfig": {"responseModalities": ["AUDIO"], "speechConfig": {
                "voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "Kore"}}}}}


def audio_of(chunk: dict[str, Any]) -> bytes:
    inline = chunk["candidates"][0]["content"]["parts"][0]["inlineData"]
    assert inline["mimeType"] == AUDIO_MIME
    return base64.b64decode(inline["data"])


async def test_generate_audio(gemini_fake: FakeGemini) -> None:
    async with client_for(gemini_fake) as client:
        response = await client.post(GENERATE.replace(":", "%3A"), json=audio_body(),
                                     headers={"x-goog-api-key": "k"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/json")
    body = response.json()
    candidate = body["candidates"][0]
    assert (candidate["finishReason"], candidate["index"], candidate["safetyRatings"]) == ("STOP", 0, [])
    assert candidate["content"]["role"] == "model"
    assert audio_of(body) == pcm_audio(500 * 48) and len(audio_of(body)) == 500 * 48 * 2
    assert body["usageMetadata"] == {
        "promptTokenCount": 5, "candidatesTokenCount": 500, "totalTokenCount": 505,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 5}],
        "candidatesTokensDetails": [{"modality": "AUDIO", "tokenCount": 500}]}
    assert body["modelVersion"] == TTS and body["responseId"]
    types.GenerateContentResponse.model_validate(body)
    assert gemini_fake.last.path == GENERATE and gemini_fake.last.raw_path == GENERATE.replace(":", "%3A")


async def test_audio_tokens_and_prompt_count_follow_the_request(gemini_fake: FakeGemini) -> None:
    gemini_fake.audio_tokens = 7
    body = {"contents": [{"parts": [{"text": "one two"}, {"text": " three "}]},
                         {"parts": [{"text": "four"}]}],
            "generationConfig": {"responseModalities": ["audio"]}}
    async with client_for(gemini_fake) as client:
        reply = (await client.post(GENERATE, json=body)).json()
    assert reply["usageMetadata"]["promptTokenCount"] == 4 == prompt_tokens(body)
    assert reply["usageMetadata"]["candidatesTokenCount"] == 7 and len(audio_of(reply)) == 7 * 48 * 2
    assert prompt_tokens({"contents": [{"parts": [{"inlineData": {}}]}]}) == 1


async def test_generate_text_when_audio_is_not_asked(gemini_fake: FakeGemini) -> None:
    async with client_for(gemini_fake) as client:
        body = (await client.post("/v1beta/models/gemini-2.5-flash:generateContent",
                                  json={"contents": [{"parts": [{"text": "hi"}]}]})).json()
    assert body["candidates"][0]["content"]["parts"] == [{"text": "Hello from the fake Gemini."}]
    assert body["usageMetadata"]["candidatesTokensDetails"] == [{"modality": "TEXT", "tokenCount": 5}]
    assert body["usageMetadata"]["totalTokenCount"] == 6
    types.GenerateContentResponse.model_validate(body)


async def test_stream_sse(gemini_fake: FakeGemini) -> None:
    gemini_fake.audio_tokens = 30
    async with client_for(gemini_fake) as client:
        response = await client.post(f"{STREAM}?alt=sse", json=audio_body())
    assert response.headers["content-type"] == "text/event-stream"
    raw_events = response.text.split("\r\n\r\n")
    assert raw_events[-1] == "" and all(e.startswith("data: ") for e in raw_events[:-1])
    chunks = [json.loads(e.removeprefix("data: ")) for e in raw_events[:-1]]
    assert len(chunks) == 3
    assert [c["usageMetadata"]["candidatesTokenCount"] for c in chunks] == [10, 20, 30]
    assert all(c["usageMetadata"]["promptTokenCount"] == 5 for c in chunks)
    assert chunks[-1]["usageMetadata"]["totalTokenCount"] == 35
    assert ["finishReason" in c["candidates"][0] for c in chunks] == [False, False, True]
    assert b"".join(audio_of(c) for c in chunks) == pcm_audio(30 * 48)
    assert len({c["responseId"] for c in chunks}) == 1
    for chunk in chunks:
        types.GenerateContentResponse.model_validate(chunk)


async def test_stream_without_sse_is_a_json_array(gemini_fake: FakeGemini) -> None:
    async with client_for(gemini_fake) as client:
        response = await client.post(STREAM, json={"contents": [{"parts": [{"text": "hi"}]}]})
    assert response.text.startswith("[{") and ",\r\n{" in response.text and response.text.endswith("}]")
    chunks = response.json()
    assert len(chunks) == len(gemini_fake.text_reply.split())  # text streams one word per chunk
    text = "".join(c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks)
    assert text == gemini_fake.text_reply


async def test_text_usage_counts_thoughts_cache_and_tool_use_cumulatively(gemini_fake: FakeGemini) -> None:
    gemini_fake.text.reply = "one two  three"
    gemini_fake.text.prompt, gemini_fake.text.cached = 1200, 800
    gemini_fake.text.thoughts, gemini_fake.text.tool_use = 50, 7
    body = {"contents": [{"parts": [{"text": "hi"}]}]}
    async with client_for(gemini_fake) as client:
        plain = (await client.post("/v1beta/models/gemini-2.5-flash:generateContent", json=body)).json()
        events = (await client.post("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
                                    json=body)).text.split("\r\n\r\n")[:-1]
        gemini_fake.text.usage = False
        bare = (await client.post("/v1beta/models/gemini-2.5-flash:generateContent", json=body)).json()
    final = {"promptTokenCount": 1200, "candidatesTokenCount": 3, "cachedContentTokenCount": 800,
             "toolUsePromptTokenCount": 7, "thoughtsTokenCount": 50, "totalTokenCount": 1260}
    assert {k: v for k, v in plain["usageMetadata"].items() if not k.endswith("Details")} == final
    chunks = [json.loads(e.removeprefix("data: ")) for e in events]
    assert [c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks] == ["one ", "two  ", "three"]
    assert [c["usageMetadata"]["candidatesTokenCount"] for c in chunks] == [1, 2, 3]
    assert all(c["usageMetadata"]["thoughtsTokenCount"] == 50 for c in chunks)
    assert "usageMetadata" not in bare
    for chunk in [plain, *chunks, bare]:
        types.GenerateContentResponse.model_validate(chunk)


async def test_embeddings_one_and_batch_with_usage_only_when_configured(gemini_fake: FakeGemini) -> None:
    one = {"content": {"parts": [{"text": "one two"}, {"text": "three"}]}}
    batch = {"requests": [{"model": "models/e", "content": {"parts": [{"text": "a b"}]}},
                          {"model": "models/e", "content": {"parts": [{"text": "c"}]}}]}
    async with client_for(gemini_fake) as client:
        single = (await client.post("/v1beta/models/e:embedContent", json=one)).json()
        many = (await client.post("/v1beta/models/e:batchEmbedContents", json=batch)).json()
        gemini_fake.text.embed_usage, gemini_fake.text.dimensions = True, 3
        counted = (await client.post("/v1beta/models/e:batchEmbedContents", json=batch)).json()
        bad = await client.post("/v1beta/models/e:embedContent", json={"requests": []})
        bad_batch = await client.post("/v1beta/models/e:batchEmbedContents", json={"requests": [{}]})
    assert list(single) == ["embedding"] and len(single["embedding"]["values"]) == 4
    assert list(many) == ["embeddings"] and [len(e["values"]) for e in many["embeddings"]] == [4, 4]
    assert counted["usageMetadata"] == {"promptTokenCount": 3, "totalTokenCount": 3}
    assert [len(e["values"]) for e in counted["embeddings"]] == [3, 3]
    assert bad.status_code == bad_batch.status_code == 400
    assert bad.json()["error"]["status"] == "INVALID_ARGUMENT"
    types.EmbedContentResponse.model_validate({"embeddings": many["embeddings"]})


async def test_bad_generate_requests(gemini_fake: FakeGemini) -> None:
    gemini_fake.strict_models = True
    async with client_for(gemini_fake) as client:
        not_json = await client.post(GENERATE, content=b"{")
        no_contents = await client.post(GENERATE, json={"contents": []})
        unknown_model = await client.post("/v1beta/models/nope:generateContent", json=audio_body())
    assert not_json.json()["error"]["status"] == no_contents.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert unknown_model.status_code == 404 and unknown_model.json()["error"]["status"] == "NOT_FOUND"


async def test_models_pages(gemini_fake: FakeGemini) -> None:
    async with client_for(gemini_fake) as client:
        first = (await client.get("/v1beta/models")).json()
        second = (await client.get("/v1beta/models", params={"pageToken": first["nextPageToken"]})).json()
        whole = (await client.get("/v1beta/models", params={"pageSize": 10})).json()
        bad_token = await client.get("/v1beta/models", params={"pageToken": "!!"})
        one = await client.get("/v1beta/models/gemini-2.5-flash")
        missing = await client.get("/v1beta/models/gemini-0")
    assert [m["name"] for m in first["models"]] == [
        "models/gemini-2.5-flash-preview-tts", "models/gemini-2.5-pro-preview-tts"]
    assert [m["name"] for m in second["models"]] == ["models/gemini-2.5-flash"]
    assert "nextPageToken" not in second and "nextPageToken" not in whole and len(whole["models"]) == 3
    model = first["models"][0]
    assert model["supportedGenerationMethods"] == ["generateContent"] and model["displayName"]
    assert bad_token.status_code == 400 and bad_token.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert one.json()["name"] == "models/gemini-2.5-flash"
    assert missing.status_code == 404


async def test_unknown_path_is_a_google_404(gemini_fake: FakeGemini) -> None:
    async with client_for(gemini_fake) as client:
        response = await client.post("/v1beta/files", json={})
    assert response.status_code == 404
    assert response.json() == {"error": {"code": 404, "message": "Method not found.", "status": "NOT_FOUND"}}


@pytest.mark.parametrize(("mode", "code", "status"), [
    ("bad_key", 400, "INVALID_ARGUMENT"), ("400", 400, "INVALID_ARGUMENT"), ("401", 401, "UNAUTHENTICATED"),
    ("403", 403, "PERMISSION_DENIED"), ("429", 429, "RESOURCE_EXHAUSTED"), ("500", 500, "INTERNAL")])
async def test_error_bodies(gemini_fake: FakeGemini, mode: str, code: int, status: str) -> None:
    gemini_fake.fail(mode, times=1)
    async with client_for(gemini_fake) as client:
        response = await client.post(GENERATE, json=audio_body())
    error = response.json()["error"]
    assert (response.status_code, error["code"], error["status"]) == (code, code, status)
    reasons = [d.get("reason") for d in error.get("details", [])]
    assert ("API_KEY_INVALID" in reasons) == (mode in ("bad_key", "401"))
    if mode == "429":
        assert any(d.get("retryDelay") for d in error["details"])


async def test_valid_keys(gemini_fake: FakeGemini) -> None:
    gemini_fake.valid_keys = {"good"}
    async with client_for(gemini_fake) as client:
        by_header = await client.post(GENERATE, json=audio_body(), headers={"x-goog-api-key": "good"})
        by_query = await client.post(GENERATE, params={"key": "good"}, json=audio_body())
        bad = await client.post(GENERATE, json=audio_body(), headers={"x-goog-api-key": "bad"})
        none = await client.post(GENERATE, json=audio_body())
    assert by_header.status_code == by_query.status_code == 200
    assert bad.status_code == 400
    assert bad.json()["error"]["details"][0]["reason"] == "API_KEY_INVALID"
    assert none.status_code == 403 and none.json()["error"]["status"] == "PERMISSION_DENIED"


async def test_the_google_genai_sdk_talks_to_it(gemini_fake: FakeGemini) -> None:
    gemini_fake.valid_keys = {"good"}
    options = types.HttpOptions(base_url=gemini_fake.url, api_version="v1beta")
    async with genai.Client(api_key="good", http_options=options).aio as client:
        config = types.GenerateContentConfig(response_modalities=["AUDIO"])
        reply = await client.models.generate_content(model=TTS, contents="read this", config=config)
        assert reply.usage_metadata is not None and reply.usage_metadata.candidates_token_count == 500
        stream = await client.models.generate_content_stream(model="gemini-2.5-flash", contents="hi")
        assert "".join([chunk.text or "" async for chunk in stream]) == gemini_fake.text_reply
        assert gemini_fake.last.query == {"alt": "sse"}
        names = [model.name async for model in await client.models.list(config={"page_size": 2})]
        assert names == [f"models/{m}" for m in gemini_fake.models]
    async with genai.Client(api_key="bad", http_options=options).aio as bad:
        with pytest.raises(genai_errors.ClientError, match="API_KEY_INVALID"):
            await bad.models.generate_content(model=TTS, contents="x")
