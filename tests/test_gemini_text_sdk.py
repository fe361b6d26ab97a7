"""Gemini text and embeddings through the google-genai SDK against a real Tollway on every stack, with the
fake Gemini behind (tests/fakes/gemini_text.py): text is charged the cache-aware formula of the
`usageMetadata` the fake reported (thoughts are output, cached prompt tokens are cache reads), plain and
streamed; embeddings on `promptTokenCount`, or on the estimate when the upstream sends none; bad bodies
are refused naming the field before anything is sent, and other methods stay 404s."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types
from sqlalchemy import select

from models.logs import Log
from tests.fakes.gemini import FakeGemini
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user

TEXT, EMBED, UNPRICED = "gemini-2.5-flash", "gemini-embedding-001", "gemini-2.5-pro"
START = 10_000_000
RATIOS = {"ModelRatio": {TEXT: 0.15, EMBED: 0.5}, "CompletionRatio": {TEXT: 8}, "CacheRatio": {TEXT: 0.25}}


def cost(input_: int, cache_read: int, output: int, *, ratio: str = "0.15", completion_ratio: str = "8",
         cache_ratio: str = "0.25", group_ratio: str = "1") -> int:
    """The formula with one ceil, in decimals: ceil((input + cache_read × CacheRatio + output ×
    CompletionRatio) × ModelRatio × GroupRatio)."""
    tokens = (Decimal(input_) + Decimal(cache_read) * Decimal(cache_ratio)
              + Decimal(output) * Decimal(completion_ratio))
    return math.ceil(tokens * Decimal(ratio) * Decimal(group_ratio))


def estimate(*texts: str) -> int:
    """Tollway's own count of ASCII texts: ceil(characters / 4) each."""
    return sum(-(-len(t) // 4) for t in texts)


async def consume_logs(app: Running) -> list[Log]:
    await app.state.quota_sync.drain()
    async with app.state.db.transaction() as tx:
        return list((await tx.scalars(select(Log).where(Log.type == 2).order_by(Log.id))).all())


async def setup(app: Running, fake: FakeGemini, *, quota: int = START, mapping: str = "") -> tuple[int, str]:
    uid = await add_user(app.state, "alice", quota=quota)
    _, key = await seed_key(app.state, uid, unlimited=True)
    await seed_channel(app.state, type=24, base_url=fake.url, models=f"{TEXT},{EMBED},{UNPRICED}",
                       key="gemini-upstream-key", model_mapping=mapping)
    for name, value in RATIOS.items():
        await app.state.options.put(name, json.dumps(value))
    return uid, key


def google(app: Running, key: str, version: str | None = "v1beta") -> genai.client.AsyncClient:
    """The SDK's async client on Tollway (`version` None: the SDK's default)."""
    options = genai_types.HttpOptions(base_url=app.url, api_version=version)
    return genai.Client(api_key=key, http_options=options).aio


# ---- text -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["v1beta", None])
async def test_text_is_charged_by_the_cache_aware_formula(app: Running, gemini_fake: FakeGemini,
                                                          version: str | None) -> None:
    uid, key = await setup(app, gemini_fake)
    await app.state.options.put("GroupRatio", json.dumps({"default": 1.5, "vip": 1, "svip": 1}))
    gemini_fake.text.reply = " ".join(["word"] * 150)
    gemini_fake.text.prompt, gemini_fake.text.cached, gemini_fake.text.thoughts = 1200, 800, 50
    reply = await google(app, key, version).models.generate_content(model=TEXT, contents="Tell me a story")
    assert reply.text == gemini_fake.text.reply
    assert reply.usage_metadata is not None and reply.usage_metadata.cached_content_token_count == 800

    upstream = gemini_fake.received[-1]
    assert (upstream.path, upstream.headers["x-goog-api-key"]) == (
        f"/v1beta/models/{TEXT}:generateContent", "gemini-upstream-key")
    assert upstream.json["contents"][0]["parts"] == [{"text": "Tell me a story"}]
    (log,) = await consume_logs(app)
    # input 1200 − 800 = 400, cache reads 800, output 150 + 50 thoughts
    assert log.quota == cost(400, 800, 200, group_ratio="1.5") == math.ceil(Decimal(330) * Decimal("1.5"))
    assert (log.prompt_tokens, log.completion_tokens, log.is_stream, log.model_name) == (
        1200, 200, False, TEXT)
    other = json.loads(log.other)
    assert (other["cache_read_tokens"], other["cache_write_tokens"], other["usage_estimated"]) == (
        800, 0, False)
    assert (other["route"], other["cache_ratio"], other["group_ratio"]) == ("generate", 0.25, 1.5)
    assert await app.state.quota.balance("user", uid) == START - log.quota


async def test_a_text_stream_arrives_word_by_word_and_is_charged_on_its_last_usage(
        app: Running, gemini_fake: FakeGemini) -> None:
    uid, key = await setup(app, gemini_fake)
    gemini_fake.text.reply = "one two three four five six"
    gemini_fake.text.cached, gemini_fake.text.thoughts, gemini_fake.text.tool_use = 2, 30, 5
    stream = await google(app, key).models.generate_content_stream(model=TEXT, contents="count to six please")
    chunks = [chunk async for chunk in stream]
    assert [c.text for c in chunks] == ["one ", "two ", "three ", "four ", "five ", "six"]
    assert gemini_fake.received[-1].path == f"/v1beta/models/{TEXT}:streamGenerateContent"
    assert gemini_fake.received[-1].query == {"alt": "sse"}
    last = chunks[-1].usage_metadata
    assert last is not None and (last.candidates_token_count, last.thoughts_token_count) == (6, 30)
    (log,) = await consume_logs(app)
    prompt = 4 + 5  # the fake's words of the prompt, plus the tool-use prompt
    assert (log.prompt_tokens, log.completion_tokens, log.is_stream) == (prompt, 6 + 30, True)
    assert log.quota == cost(prompt - 2, 2, 36)
    other = json.loads(log.other)
    assert (other["cache_read_tokens"], other["usage_estimated"], other["stream_interrupted"]) == (
        2, False, False)
    assert await app.state.quota.balance("user", uid) == START - log.quota


async def test_text_without_usage_metadata_is_charged_on_tollways_count(app: Running, gemini_fake: FakeGemini
                                                                        ) -> None:
    _, key = await setup(app, gemini_fake)
    gemini_fake.text.usage, gemini_fake.text.reply = False, "an answer of some words"
    await google(app, key).models.generate_content(model=TEXT, contents="the question asked")
    (log,) = await consume_logs(app)
    assert (log.prompt_tokens, log.completion_tokens) == (estimate("the question asked"),
                                                          estimate("an answer of some words"))
    assert json.loads(log.other)["usage_estimated"] is True
    assert log.quota == cost(log.prompt_tokens, 0, log.completion_tokens)


async def test_text_reserves_max_output_tokens_else_pre_consumed_completion_tokens(
        app: Running, gemini_fake: FakeGemini) -> None:
    # ratio 1: the hold is max(estimate, PreConsumedQuota 500) + the output cap, against a balance of 1000
    uid, key = await setup(app, gemini_fake, quota=1000)
    await app.state.options.put("ModelRatio", json.dumps({TEXT: 1}))
    await app.state.options.put("CompletionRatio", json.dumps({TEXT: 1}))
    await app.state.options.put("PreConsumedCompletionTokens", "501")
    client = google(app, key)
    with pytest.raises(genai_errors.ClientError) as short:  # 500 + 501 > 1000
        await client.models.generate_content(model=TEXT, contents="hi")
    assert (short.value.code, short.value.status) == (429, "RESOURCE_EXHAUSTED")
    assert gemini_fake.received == []
    capped = genai_types.GenerateContentConfig(max_output_tokens=400)  # 500 + 400 fits
    await client.models.generate_content(model=TEXT, contents="hi", config=capped)
    assert gemini_fake.received[-1].json["generationConfig"] == {"maxOutputTokens": 400}
    (log,) = await consume_logs(app)
    assert await app.state.quota.balance("user", uid) == 1000 - log.quota


async def test_an_unpriced_text_model_is_refused_naming_it(app: Running, gemini_fake: FakeGemini) -> None:
    uid, key = await setup(app, gemini_fake)
    with pytest.raises(genai_errors.ClientError) as refused:
        await google(app, key).models.generate_content(model=UNPRICED, contents="hi")
    assert (refused.value.code, refused.value.status) == (400, "INVALID_ARGUMENT")
    assert UNPRICED in (refused.value.message or "")
    assert refused.value.details["error"]["details"][0]["reason"] == "model_price_error"
    assert gemini_fake.received == []
    assert await consume_logs(app) == []
    assert await app.state.quota.balance("user", uid) == START


# ---- embeddings -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("embed_usage", [False, True])
async def test_the_sdk_embeds_one_content_and_several(app: Running, gemini_fake: FakeGemini,
                                                      embed_usage: bool) -> None:
    uid, key = await setup(app, gemini_fake)
    gemini_fake.text.embed_usage = embed_usage
    client = google(app, key)
    one = await client.models.embed_content(model=EMBED, contents="one two three")
    several = await client.models.embed_content(model=EMBED, contents=["first text", "the second one"])
    assert [len(e.values or []) for e in one.embeddings or []] == [4]
    assert [len(e.values or []) for e in several.embeddings or []] == [4, 4]
    sent = gemini_fake.received[-2:]
    assert [r.path for r in sent] == [f"/v1beta/models/{EMBED}:batchEmbedContents"] * 2
    assert all(r.headers["x-goog-api-key"] == "gemini-upstream-key" for r in sent)
    assert [len(r.json["requests"]) for r in sent] == [1, 2]

    logs = await consume_logs(app)
    assert [(log.completion_tokens, log.is_stream) for log in logs] == [(0, False), (0, False)]
    others = [json.loads(log.other) for log in logs]
    assert [o["route"] for o in others] == ["embed", "embed"]
    if embed_usage:  # the fake's promptTokenCount: the words sent
        expected = [3, 5]
    else:
        expected = [estimate("one two three"), estimate("first text", "the second one")]
    assert [log.prompt_tokens for log in logs] == expected
    assert [o["usage_estimated"] for o in others] == [not embed_usage] * 2
    assert [log.quota for log in logs] == [cost(n, 0, 0, ratio="0.5") for n in expected]
    assert await app.state.quota.balance("user", uid) == START - sum(log.quota for log in logs)


async def test_raw_embed_content_goes_up_byte_for_byte_with_only_the_path_model_mapped(
        app: Running, gemini_fake: FakeGemini) -> None:
    # a balance far under PreConsumedQuota (500): an embedding reserves its estimate alone, and no output
    uid, key = await setup(app, gemini_fake, quota=20, mapping=json.dumps({EMBED: "upstream-embedding"}))
    await app.state.options.put("PreConsumedCompletionTokens", "100000")
    gemini_fake.text.embed_usage = True
    one = b'{"content": {"parts": [{"text": "alpha beta"}]},   "taskType": "RETRIEVAL_QUERY"}'
    batch = (b'{"requests": [{"model": "models/' + EMBED.encode() + b'", "content": {"parts": '
             b'[{"text": "gamma"}]}}]}')
    async with httpx.AsyncClient(base_url=app.url, headers={"x-goog-api-key": key}) as http:
        plain = await http.post(f"/v1beta/models/{EMBED}:embedContent", content=one)
        v1 = await http.post(f"/v1/models/{EMBED}%3AbatchEmbedContents", content=batch)
    assert plain.status_code == v1.status_code == 200, (plain.text, v1.text)
    assert list(plain.json()) == ["embedding", "usageMetadata"] and plain.headers["x-request-id"]
    assert list(v1.json()) == ["embeddings", "usageMetadata"]
    sent = gemini_fake.received[-2:]
    assert [(r.path, r.body) for r in sent] == [
        ("/v1beta/models/upstream-embedding:embedContent", one),
        ("/v1beta/models/upstream-embedding:batchEmbedContents", batch)]  # the inner model as sent
    logs = await consume_logs(app)
    assert [(log.prompt_tokens, log.model_name) for log in logs] == [(2, EMBED), (1, EMBED)]
    assert [json.loads(log.other)["upstream_model_name"] for log in logs] == ["upstream-embedding"] * 2
    assert await app.state.quota.balance("user", uid) == 20 - sum(log.quota for log in logs)


async def test_bad_bodies_are_refused_naming_the_field_and_other_methods_are_404s(
        app: Running, gemini_fake: FakeGemini) -> None:
    uid, key = await setup(app, gemini_fake)
    cases: list[tuple[str, Any, str]] = [
        ("embedContent", {}, "content"),
        ("embedContent", {"content": "text"}, "content"),
        ("embedContent", {"content": {}}, "content.parts"),
        ("embedContent", {"content": {"parts": ["x"]}}, "content.parts[0]"),
        ("embedContent", [1], "request body must be a JSON object"),
        ("batchEmbedContents", {}, "requests"),
        ("batchEmbedContents", {"requests": []}, "requests"),
        ("batchEmbedContents", {"requests": [1]}, "requests[0]"),
        ("batchEmbedContents", {"requests": [{"model": EMBED}]}, "requests[0].content"),
        ("batchEmbedContents", {"requests": [{"content": {"parts": {}}}]}, "requests[0].content.parts"),
        ("generateContent", {"contents": []}, "contents"),
    ]
    async with httpx.AsyncClient(base_url=app.url, headers={"x-goog-api-key": key}) as http:
        for method, body, field in cases:
            for prefix in ("/v1beta", "/v1"):
                r = await http.post(f"{prefix}/models/{EMBED}:{method}", json=body)
                error = r.json()["error"]
                assert (r.status_code, error["status"]) == (400, "INVALID_ARGUMENT"), (method, body, r.text)
                assert error["message"].startswith(field if " " in field else f"{field}:"), (
                    method, body, error["message"])
        for path in (f"/v1beta/models/{TEXT}:countTokens", f"/v1/models/{TEXT}:countTokens",
                     f"/v1beta/models/{EMBED}:predict", f"/v1beta/models/{EMBED}:embedContents"):
            r = await http.post(path, json={"contents": [{"parts": [{"text": "hi"}]}]})
            assert (r.status_code, r.json()["error"]["status"]) == (404, "NOT_FOUND"), (path, r.text)
    assert gemini_fake.received == []
    assert await consume_logs(app) == []
    assert await app.state.quota.balance("user", uid) == START
