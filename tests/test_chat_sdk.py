"""Chat completions and embeddings through the official openai SDK against a real Tollway on every stack,
with the fake OpenAI behind (tests/fakes/openai_text.py): each call is charged exactly the cost formula of
the usage the fake reported (docs/api/gateway.md#billing), with one consume log carrying the cache counts."""

from __future__ import annotations

import asyncio
import json
import math
from decimal import Decimal
from typing import Any

import httpx
import openai
import pytest
from sqlalchemy import select

from models.logs import Log
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user

CHAT, EMBED = "gpt-fake-chat", "fake-embedding"
START = 10_000_000
TOOLS: list[Any] = [{"type": "function", "function": {
    "name": name, "description": f"the {name}",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    for name in ("get_weather", "get_time")]


def cost(prompt: int, cached: int, completion: int, *, ratio: str = "1.25", completion_ratio: str = "4",
         cache_ratio: str = "0.5") -> int:
    """The contract's formula with one ceil, in decimals (ratio mode, group ratio 1)."""
    tokens = (Decimal(prompt - cached) + Decimal(cached) * Decimal(cache_ratio)
              + Decimal(completion) * Decimal(completion_ratio))
    return math.ceil(tokens * Decimal(ratio))


async def consume_logs(app: Running) -> list[Log]:
    await app.state.quota_sync.drain()
    async with app.state.db.transaction() as tx:
        return list((await tx.scalars(select(Log).where(Log.type == 2).order_by(Log.id))).all())


async def setup(app: Running, fake: FakeOpenAI, *, channel_type: int = 1, quota: int = START
                ) -> tuple[int, str]:
    uid = await add_user(app.state, "alice", quota=quota)
    _, key = await seed_key(app.state, uid, unlimited=True)
    await seed_channel(app.state, type=channel_type, base_url=fake.url, models=f"{CHAT},{EMBED}",
                       key="upstream-key")
    await app.state.options.put("ModelRatio", json.dumps({CHAT: 1.25, EMBED: 0.01}))
    await app.state.options.put("CompletionRatio", json.dumps({CHAT: 4}))
    await app.state.options.put("CacheRatio", json.dumps({CHAT: 0.5}))
    return uid, key


def client(app: Running, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key=key, base_url=f"{app.url}/v1", max_retries=0)


async def test_a_chat_call_is_charged_by_the_cache_aware_formula(app: Running, openai_fake: FakeOpenAI
                                                                  ) -> None:
    uid, key = await setup(app, openai_fake)
    openai_fake.text.usage = {"prompt_tokens": 2000, "completion_tokens": 300, "total_tokens": 2300,
                              "prompt_tokens_details": {"cached_tokens": 1500}}
    reply = await client(app, key).chat.completions.create(
        model=CHAT, messages=[{"role": "user", "content": "hi there"}])
    assert reply.choices[0].message.content == openai_fake.text.reply
    upstream = openai_fake.received[-1]
    assert (upstream.path, upstream.headers["authorization"]) == (
        "/v1/chat/completions", "Bearer upstream-key")
    assert upstream.json == {"model": CHAT, "messages": [{"role": "user", "content": "hi there"}]}
    (log,) = await consume_logs(app)
    assert log.quota == cost(2000, 1500, 300) == 3063  # the contract's worked example
    assert (log.prompt_tokens, log.completion_tokens, log.is_stream) == (2000, 300, False)
    other = json.loads(log.other)
    assert (other["cache_read_tokens"], other["cache_write_tokens"], other["usage_estimated"]) == (
        1500, 0, False)
    assert (other["cache_ratio"], other["cache_creation_ratio"]) == (0.5, 1.25)
    assert await app.state.quota.balance("user", uid) == START - 3063


@pytest.mark.parametrize("include_usage", [True, False])
async def test_a_stream_carries_the_usage_chunk_only_when_asked(app: Running, openai_fake: FakeOpenAI,
                                                                 include_usage: bool) -> None:
    uid, key = await setup(app, openai_fake)
    openai_fake.text.cached = 4
    kwargs: dict[str, Any] = {"stream_options": {"include_usage": True}} if include_usage else {}
    stream = await client(app, key).chat.completions.create(
        model=CHAT, messages=[{"role": "user", "content": "one two three"}], stream=True, **kwargs)
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == openai_fake.text.reply
    usages = [c.usage for c in chunks if c.usage is not None]
    # the upstream is always asked for usage; the caller sees it only when it asked
    assert openai_fake.received[-1].json["stream_options"] == {"include_usage": True}
    prompt, completion = 3 + 7, len(openai_fake.text.reply.split())
    if include_usage:
        assert len(usages) == 1 and chunks[-1].choices == []
        assert (usages[0].prompt_tokens, usages[0].completion_tokens) == (prompt, completion)
    else:
        assert usages == []
    (log,) = await consume_logs(app)
    assert log.is_stream and (log.prompt_tokens, log.completion_tokens) == (prompt, completion)
    assert log.quota == cost(prompt, 4, completion)
    assert await app.state.quota.balance("user", uid) == START - log.quota


async def test_a_stream_without_upstream_usage_gets_ours_and_is_marked_estimated(
        app: Running, openai_fake: FakeOpenAI) -> None:
    _, key = await setup(app, openai_fake)
    openai_fake.text.usage = None
    stream = await client(app, key).chat.completions.create(
        model=CHAT, messages=[{"role": "user", "content": "one two three"}], stream=True,
        stream_options={"include_usage": True})
    chunks = [chunk async for chunk in stream]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None  # written by Tollway before [DONE]
    (log,) = await consume_logs(app)
    assert json.loads(log.other)["usage_estimated"] is True
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (
        log.prompt_tokens, log.completion_tokens)
    assert log.completion_tokens > 0 and log.quota == cost(log.prompt_tokens, 0, log.completion_tokens)


async def test_the_stream_helper_assembles_two_parallel_tool_calls(app: Running, openai_fake: FakeOpenAI
                                                                   ) -> None:
    _, key = await setup(app, openai_fake)
    openai_fake.text.tool_calls = [("get_weather", {"city": "Paris"}), ("get_time", {"city": "Tokyo"})]
    async with client(app, key).chat.completions.stream(
            model=CHAT, messages=[{"role": "user", "content": "weather and time?"}], tools=TOOLS) as stream:
        final = await stream.get_final_completion()
    calls = final.choices[0].message.tool_calls or []
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("call_0", "get_weather", {"city": "Paris"}), ("call_1", "get_time", {"city": "Tokyo"})]
    assert final.choices[0].finish_reason == "tool_calls"
    (log,) = await consume_logs(app)
    assert log.is_stream and log.quota == cost(log.prompt_tokens, 0, log.completion_tokens)


@pytest.mark.parametrize("encoding", ["float", "base64"])
async def test_embeddings_in_either_encoding(app: Running, openai_fake: FakeOpenAI, encoding: str) -> None:
    uid, key = await setup(app, openai_fake)
    sdk = client(app, key)
    if encoding == "float":
        reply = await sdk.embeddings.create(model=EMBED, input=["one two", "three"], encoding_format="float")
    else:  # the SDK asks for base64 by default and decodes it
        reply = await sdk.embeddings.create(model=EMBED, input=["one two", "three"])
    assert openai_fake.received[-1].json.get("encoding_format") == encoding
    assert [len(d.embedding) for d in reply.data] == [4, 4]
    (log,) = await consume_logs(app)
    assert (log.prompt_tokens, log.completion_tokens) == (3, 0)
    assert log.quota == math.ceil(Decimal(3) * Decimal("0.01")) == 1
    assert await app.state.quota.balance("user", uid) == START - 1


async def test_a_gemini_channel_serves_openai_callers_through_googles_endpoint(
        app: Running, openai_fake: FakeOpenAI) -> None:
    _, key = await setup(app, openai_fake, channel_type=24)
    sdk = client(app, key)
    reply = await sdk.chat.completions.create(model=CHAT, messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == openai_fake.text.reply
    await sdk.embeddings.create(model=EMBED, input="hello")
    paths = [(r.path, r.headers["authorization"]) for r in openai_fake.received[-2:]]
    assert paths == [("/v1beta/openai/chat/completions", "Bearer upstream-key"),
                     ("/v1beta/openai/embeddings", "Bearer upstream-key")]
    models = {m.id async for m in sdk.models.list()}
    assert {CHAT, EMBED} <= models


async def test_bad_bodies_and_unpriced_models_are_refused_before_anything_is_sent(
        app: Running, openai_fake: FakeOpenAI) -> None:
    uid, key = await setup(app, openai_fake)
    await seed_channel(app.state, type=1, base_url=openai_fake.url, models="unpriced-model")
    sdk = client(app, key)
    with pytest.raises(openai.BadRequestError) as unpriced:
        await sdk.chat.completions.create(model="unpriced-model",
                                          messages=[{"role": "user", "content": "hi"}])
    assert "unpriced-model" in unpriced.value.message and unpriced.value.code == "model_price_error"
    async with httpx.AsyncClient(base_url=app.url, headers={"Authorization": f"Bearer {key}"}) as http:
        for body, param in (({"model": CHAT, "messages": []}, "messages"),
                            ({"model": CHAT, "messages": [{"content": "x"}]}, "messages"),
                            ({"model": CHAT, "messages": [{"role": "user"}], "max_tokens": 0}, "max_tokens"),
                            ({"model": CHAT, "messages": [{"role": "user"}], "stream": "yes"}, "stream"),
                            ({"model": "", "messages": [{"role": "user"}]}, "model")):
            r = await http.post("/v1/chat/completions", json=body)
            assert r.status_code == 400 and r.json()["error"]["param"] == param, (body, r.text)
            assert r.json()["error"]["message"].startswith(param)
        for body, param in (({"model": EMBED, "input": []}, "input"),
                            ({"model": EMBED, "input": [""]}, "input"),
                            ({"model": EMBED, "input": "a", "encoding_format": "hex"}, "encoding_format"),
                            ({"model": EMBED, "input": [[1], []]}, "input")):
            r = await http.post("/v1/embeddings", json=body)
            assert r.status_code == 400 and r.json()["error"]["param"] == param, (body, r.text)
    assert openai_fake.received == []
    assert await consume_logs(app) == []
    assert await app.state.quota.balance("user", uid) == START


async def test_the_first_event_reaches_the_caller_while_the_upstream_holds_the_rest(
        app: Running, openai_fake: FakeOpenAI) -> None:
    _, key = await setup(app, openai_fake)
    openai_fake.hold_stream()
    stream = await client(app, key).chat.completions.create(
        model=CHAT, messages=[{"role": "user", "content": "hi"}], stream=True)
    iterator = stream.__aiter__()
    first = await asyncio.wait_for(iterator.__anext__(), 10)  # the fake sends nothing more until released
    assert first.choices[0].delta.role == "assistant" and openai_fake.chunks_sent == 1
    openai_fake.release_stream()
    rest = [chunk async for chunk in iterator]
    assert "".join(c.choices[0].delta.content or "" for c in rest if c.choices) == openai_fake.text.reply


async def test_a_stream_cut_upstream_ends_with_one_error_event_and_is_charged_what_was_delivered(
        app: Running, openai_fake: FakeOpenAI) -> None:
    uid, key = await setup(app, openai_fake)
    openai_fake.cut_after = 3  # the role chunk and two words, then the connection closes
    openai_fake.fail("drop_mid_stream", times=1)
    stream = await client(app, key).chat.completions.create(
        model=CHAT, messages=[{"role": "user", "content": "hi"}], stream=True)
    received = []
    with pytest.raises(openai.APIError) as cut:
        async for chunk in stream:
            received.append(chunk)
    assert "request id" in cut.value.message
    delivered = "".join(c.choices[0].delta.content or "" for c in received if c.choices)
    assert delivered == "Hello from"
    (log,) = await consume_logs(app)
    other = json.loads(log.other)
    assert other["stream_interrupted"] is True and other["usage_estimated"] is True
    assert log.completion_tokens == 3  # Tollway's count of "Hello from": ceil(10 / 4)
    assert log.quota == cost(log.prompt_tokens, 0, 3)
    assert await app.state.quota.balance("user", uid) == START - log.quota


async def test_a_stream_cut_before_any_content_costs_nothing(app: Running, openai_fake: FakeOpenAI) -> None:
    uid, key = await setup(app, openai_fake)
    openai_fake.fail("drop_mid_stream", times=1)  # only the role chunk
    stream = await client(app, key).chat.completions.create(
        model=CHAT, messages=[{"role": "user", "content": "hi"}], stream=True)
    with pytest.raises(openai.APIError):
        async for _ in stream:
            pass
    (log,) = await consume_logs(app)
    assert (log.quota, log.prompt_tokens, log.completion_tokens) == (0, 0, 0)
    assert await app.state.quota.balance("user", uid) == START


async def test_a_caller_who_leaves_mid_stream_cancels_the_upstream_call_and_is_settled_once(
        app: Running, openai_fake: FakeOpenAI) -> None:
    uid, key = await setup(app, openai_fake)
    openai_fake.hold_stream()  # the upstream sends its first event, then nothing until released
    body = {"model": CHAT, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as http, http.stream(
            "POST", "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}) as reply:
        assert reply.status_code == 200
        async for line in reply.aiter_lines():
            assert line.startswith("data: ")
            break  # the caller leaves after the first event
    # settled without waiting for the upstream: it is still holding the rest of its answer
    for _ in range(100):
        logs = await consume_logs(app)
        if logs:
            break
        await asyncio.sleep(0.1)
    (log,) = logs
    assert json.loads(log.other)["stream_interrupted"] is True
    assert (log.quota, log.completion_tokens) == (0, 0)  # nothing but the role chunk reached the caller
    assert await app.state.quota.balance("user", uid) == START
    openai_fake.release_stream()


async def test_thirty_concurrent_calls_on_a_balance_for_twenty_never_overdraw(
        app: Running, openai_fake: FakeOpenAI) -> None:
    uid, key = await setup(app, openai_fake, quota=20_500)
    # price mode: 1000 points a call, reserved exactly
    await app.state.options.put("ModelPrice", json.dumps({CHAT: 0.002}))
    sdk = client(app, key)

    async def one() -> int:
        try:
            await sdk.chat.completions.create(model=CHAT, messages=[{"role": "user", "content": "hi"}])
        except openai.RateLimitError as refused:
            assert refused.code == "insufficient_quota"
            return 429
        return 200

    results = await asyncio.gather(*(one() for _ in range(30)))
    assert (results.count(200), results.count(429)) == (20, 10)
    logs = await consume_logs(app)
    assert len(logs) == 20 and all(log.quota == 1000 for log in logs)
    assert await app.state.quota.balance("user", uid) == 20_500 - sum(log.quota for log in logs) == 500


@pytest.mark.parametrize("stream", [False, True])
async def test_a_2xx_that_is_not_the_routes_reply_fails_over_and_is_never_charged(
        app: Running, openai_fake: FakeOpenAI, stream: bool) -> None:
    uid, key = await setup(app, openai_fake)
    body = {"model": CHAT, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    async with httpx.AsyncClient(base_url=app.url, timeout=30,
                                 headers={"Authorization": f"Bearer {key}"}) as http:
        openai_fake.fail("garbage")  # 200 text/html, every time
        refused = await http.post("/v1/chat/completions", json=body)
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "upstream_failed"
        assert await app.state.quota.balance("user", uid) == START  # released whole
        await seed_channel(app.state, type=8, base_url=openai_fake.url, models=CHAT)  # a second channel
        openai_fake.fail("garbage", times=1)  # the first attempt only: the retry is answered
        answered = await http.post("/v1/chat/completions", json=body)
    assert answered.status_code == 200 and len(openai_fake.received) == 3
    (log,) = await consume_logs(app)
    assert len(json.loads(log.other)["channels_tried"]) == 2
    assert await app.state.quota.balance("user", uid) == START - log.quota
