"""Anthropic Messages through the official anthropic SDK against a real Tollway on every stack, with the
fake Anthropic behind (tests/fakes/anthropic.py): the bytes both ways are the upstream's, each call is
charged the cache-aware formula of the usage the fake reported (reads, 5-minute and 1-hour writes), and
every refusal is Anthropic's error object with the status the SDK reads (docs/CHAT.md#anthropic-messages)."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import anthropic
import httpx
import pytest
from sqlalchemy import select

from models.logs import Log
from server.upstream.estimate import count_all
from tests.fakes.anthropic import FakeAnthropic
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user

CLAUDE = "claude-fake-sonnet"
START = 10_000_000
HI = [{"role": "user", "content": "hi there"}]
CACHED = {"input_tokens": 100, "cache_read_input_tokens": 4000, "cache_creation_input_tokens": 1200,
          "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 200},
          "output_tokens": 500}
"""The contract's worked example: ceil((100 + 4000×0.1 + 1000×1.25 + 200×1.25×1.6 + 500×5) × 1.5) = 6975."""
WEATHER = {"name": "get_weather", "description": "the weather",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


def cost(input_: int, read: int, write_5m: int, write_1h: int, output: int) -> int:
    """The formula with one ceil, in decimals (ModelRatio 1.5, CompletionRatio 5, CacheRatio 0.1,
    CreateCacheRatio 1.25)."""
    tokens = (Decimal(input_) + Decimal(read) * Decimal("0.1") + Decimal(write_5m) * Decimal("1.25")
              + Decimal(write_1h) * Decimal("1.25") * Decimal("1.6") + Decimal(output) * 5)
    return math.ceil(tokens * Decimal("1.5"))


async def consume_logs(app: Running) -> list[Log]:
    await app.state.quota_sync.drain()
    async with app.state.db.transaction() as tx:
        return list((await tx.scalars(select(Log).where(Log.type == 2).order_by(Log.id))).all())


async def setup(app: Running, fake: FakeAnthropic, *, quota: int = START) -> tuple[int, str]:
    uid = await add_user(app.state, "alice", quota=quota)
    _, key = await seed_key(app.state, uid, unlimited=True)
    await seed_channel(app.state, type=14, base_url=fake.url, models=CLAUDE, key="upstream-key")
    await app.state.options.put("ModelRatio", json.dumps({CLAUDE: 1.5}))
    await app.state.options.put("CompletionRatio", json.dumps({CLAUDE: 5}))
    await app.state.options.put("CacheRatio", json.dumps({CLAUDE: 0.1}))
    await app.state.options.put("CreateCacheRatio", json.dumps({CLAUDE: 1.25}))
    return uid, key


def client(app: Running, key: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key=key, base_url=app.url, max_retries=0)


def sent_by_fake(fake: FakeAnthropic) -> bytes:
    """The bytes the fake answered its last request with (its answers are deterministic)."""
    reply = fake.route(fake.received[-1])
    return b"".join(reply.chunks) if reply.chunks is not None else reply.body


async def test_a_message_passes_through_and_is_charged_for_cache_reads_and_both_writes(
        app: Running, anthropic_fake: FakeAnthropic) -> None:
    uid, key = await setup(app, anthropic_fake)
    anthropic_fake.usage = CACHED
    raw = await client(app, key).messages.with_raw_response.create(model=CLAUDE, max_tokens=64, messages=HI)
    message = await raw.parse()
    assert message.content[0].type == "text" and message.content[0].text == anthropic_fake.reply
    assert raw.http_response.content == sent_by_fake(anthropic_fake)  # unchanged
    request_id = raw.http_response.headers["x-request-id"]
    assert raw.http_response.headers["request-id"] == request_id  # ours, not the upstream's
    assert "anthropic-organization-id" not in raw.http_response.headers
    upstream = anthropic_fake.received[-1]
    assert (upstream.path, upstream.headers["x-api-key"], upstream.headers["anthropic-version"]) == (
        "/v1/messages", "upstream-key", raw.http_response.request.headers["anthropic-version"])
    assert "authorization" not in upstream.headers
    assert upstream.json == {"model": CLAUDE, "max_tokens": 64, "messages": HI}
    (log,) = await consume_logs(app)
    assert log.quota == cost(100, 4000, 1000, 200, 500) == 6975
    assert (log.prompt_tokens, log.completion_tokens, log.is_stream) == (5300, 500, False)
    other = json.loads(log.other)
    assert (other["cache_read_tokens"], other["cache_write_tokens"], other["cache_write_1h_tokens"]) == (
        4000, 1200, 200)
    assert (other["route"], other["usage_estimated"]) == ("messages", False)
    assert await app.state.quota.balance("user", uid) == START - 6975


async def test_the_callers_bytes_version_and_beta_go_up_unchanged(app: Running, anthropic_fake: FakeAnthropic
                                                                  ) -> None:
    _, key = await setup(app, anthropic_fake)
    body = (b'{ "max_tokens" : 8,\n "messages": [{"role": "user", "content": "caf\\u00e9"}], '
            b'"model": "%s"}' % CLAUDE.encode())
    headers = {"x-api-key": key, "anthropic-version": "2024-01-01", "anthropic-beta": "tools-2024-04-04",
               "content-type": "application/json"}
    async with httpx.AsyncClient(base_url=app.url) as http:
        reply = await http.post("/v1/messages", content=body, headers=headers)
    assert reply.status_code == 200 and reply.content == sent_by_fake(anthropic_fake)
    upstream = anthropic_fake.received[-1]
    assert upstream.body == body
    assert (upstream.headers["anthropic-version"], upstream.headers["anthropic-beta"]) == (
        "2024-01-01", "tools-2024-04-04")
    async with httpx.AsyncClient(base_url=app.url) as http:  # no version sent: Anthropic's first
        await http.post("/v1/messages", content=body, headers={"Authorization": f"Bearer {key}"})
    upstream = anthropic_fake.received[-1]
    assert upstream.headers["anthropic-version"] == "2023-06-01" and "anthropic-beta" not in upstream.headers


async def test_a_stream_is_written_unchanged_and_charged_on_the_merged_usage(
        app: Running, anthropic_fake: FakeAnthropic) -> None:
    uid, key = await setup(app, anthropic_fake)
    anthropic_fake.usage = CACHED  # message_start says 1 output token, message_delta 500: overwritten
    async with client(app, key).messages.stream(model=CLAUDE, max_tokens=600, messages=HI) as stream:
        text = "".join([piece async for piece in stream.text_stream])
        final = await stream.get_final_message()
    assert text == anthropic_fake.reply
    assert (final.usage.input_tokens, final.usage.output_tokens) == (100, 500)
    assert anthropic_fake.received[-1].headers["accept"] == "text/event-stream"
    (log,) = await consume_logs(app)
    assert log.is_stream and log.quota == 6975
    assert (log.prompt_tokens, log.completion_tokens) == (5300, 500)
    assert await app.state.quota.balance("user", uid) == START - 6975
    async with httpx.AsyncClient(base_url=app.url) as http:
        reply = await http.post("/v1/messages", headers={"x-api-key": key},
                                json={"model": CLAUDE, "max_tokens": 8, "messages": HI, "stream": True})
    assert reply.headers["content-type"].startswith("text/event-stream")
    assert reply.headers["request-id"] == reply.headers["x-request-id"]
    assert reply.content == sent_by_fake(anthropic_fake)  # every event as the upstream sent it


async def test_tool_use_plain_and_streamed(app: Running, anthropic_fake: FakeAnthropic) -> None:
    _, key = await setup(app, anthropic_fake)
    anthropic_fake.tool_uses = [("get_weather", {"city": "Paris"})]
    api = client(app, key)
    ask: dict[str, Any] = {"model": CLAUDE, "max_tokens": 64, "tools": [WEATHER],
                           "messages": [{"role": "user", "content": "weather in Paris?"}]}
    plain = await api.messages.create(**ask)
    async with api.messages.stream(**ask) as stream:
        streamed = await stream.get_final_message()
    for message in (plain, streamed):
        assert message.stop_reason == "tool_use"
        (block,) = message.content
        assert block.type == "tool_use" and (block.name, block.input) == ("get_weather", {"city": "Paris"})
    assert anthropic_fake.received[-1].json["tools"] == [WEATHER]
    assert len(await consume_logs(app)) == 2


async def test_a_stream_cut_upstream_ends_with_one_error_event_and_is_charged_what_was_delivered(
        app: Running, anthropic_fake: FakeAnthropic) -> None:
    uid, key = await setup(app, anthropic_fake)
    anthropic_fake.cut_after = 3  # message_start, the block's start and its first word, then the cut
    anthropic_fake.fail("drop_mid_stream", times=1)
    async with httpx.AsyncClient(base_url=app.url) as http:
        reply = await http.post("/v1/messages", headers={"x-api-key": key},
                                json={"model": CLAUDE, "max_tokens": 8, "messages": HI, "stream": True})
    events = reply.content.split(b"\n\n")
    assert events[-1] == b""
    last = events[-2]
    assert last.startswith(b"event: error\ndata: ")
    error = json.loads(last.split(b"data: ", 1)[1])
    assert error["type"] == "error" and error["error"]["type"] == "api_error"
    assert "request id" in error["error"]["message"]
    (log,) = await consume_logs(app)
    other = json.loads(log.other)
    # the input message_start reported (2 + 5 tokens); its output count (1) is a placeholder, so the output
    # is Tollway's count of what reached the caller: "Hello", ceil(5 / 4)
    assert other["stream_interrupted"] is True and other["usage_estimated"] is True
    assert (log.prompt_tokens, log.completion_tokens) == (7, 2)
    assert await app.state.quota.balance("user", uid) == START - log.quota
    with pytest.raises(anthropic.APIStatusError):  # the SDK sees the error event
        anthropic_fake.fail("drop_mid_stream", times=1)
        async with client(app, key).messages.stream(model=CLAUDE, max_tokens=8, messages=HI) as stream:
            await stream.get_final_message()


def body_error(err: anthropic.APIStatusError) -> dict[str, Any]:
    body = err.body
    assert isinstance(body, dict) and body["type"] == "error"
    error = body["error"]
    assert isinstance(error, dict)
    assert body["request_id"] == err.response.headers["request-id"] == err.response.headers["x-request-id"]
    assert error["message"].endswith(f"(request id: {body['request_id']})")
    return error


async def test_refusals_are_anthropic_errors_with_the_status_the_sdk_reads(
        app: Running, anthropic_fake: FakeAnthropic) -> None:
    uid, key = await setup(app, anthropic_fake, quota=1000)  # less than the hold of 64 × 5 × 1.5 + 500 × 1.5
    api = client(app, key)
    with pytest.raises(anthropic.AuthenticationError) as bad_key:
        await client(app, "sk-not-a-key").messages.create(model=CLAUDE, max_tokens=64, messages=HI)
    assert body_error(bad_key.value)["type"] == "authentication_error"
    with pytest.raises(anthropic.NotFoundError) as unserved:
        await api.messages.create(model="claude-not-served", max_tokens=64, messages=HI)
    error = body_error(unserved.value)
    assert (error["type"], error["details"]["error_code"]) == ("not_found_error", "model_not_found")
    with pytest.raises(anthropic.PaymentRequiredError) as short:
        await anthropic.AsyncAnthropic(api_key=key, base_url=app.url, max_retries=2).messages.create(
            model=CLAUDE, max_tokens=64, messages=HI)
    assert short.value.status_code == 402 and short.value.response.headers["x-should-retry"] == "false"
    error = body_error(short.value)
    assert (error["type"], error["details"]["error_code"]) == ("billing_error", "insufficient_quota")
    assert anthropic_fake.received == [] and await consume_logs(app) == []
    assert await app.state.quota.balance("user", uid) == 1000
    async with httpx.AsyncClient(base_url=app.url) as http:  # no route under /v1/messages: Anthropic's 404
        missing = await http.post("/v1/messages/batches", headers={"x-api-key": key}, json={})
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"


@pytest.mark.parametrize(("body", "field"), [
    ({"messages": HI, "max_tokens": 8}, "model"),
    ({"model": CLAUDE, "max_tokens": 8}, "messages"),
    ({"model": CLAUDE, "max_tokens": 8, "messages": []}, "messages"),
    ({"model": CLAUDE, "max_tokens": 8, "messages": ["hi"]}, "messages[0]"),
    ({"model": CLAUDE, "max_tokens": 8, "messages": [{"role": "system", "content": "x"}]},
     "messages[0].role"),
    ({"model": CLAUDE, "messages": HI}, "max_tokens"),
    ({"model": CLAUDE, "messages": HI, "max_tokens": 0}, "max_tokens"),
    ({"model": CLAUDE, "messages": HI, "max_tokens": True}, "max_tokens"),
    ({"model": CLAUDE, "messages": HI, "max_tokens": 8, "system": 3}, "system"),
    ({"model": CLAUDE, "messages": HI, "max_tokens": 8, "system": [{"type": "image"}]}, "system[0]"),
    ({"model": CLAUDE, "messages": HI, "max_tokens": 8, "stream": "yes"}, "stream"),
    ({"model": CLAUDE, "messages": HI, "max_tokens": 8, "tools": {"name": "x"}}, "tools"),
    ({"model": CLAUDE, "messages": HI, "max_tokens": 8, "tools": ["x"]}, "tools[0]"),
])
async def test_bad_bodies_are_400_invalid_request_errors_naming_the_field_and_nothing_is_sent(
        app: Running, anthropic_fake: FakeAnthropic, body: dict[str, Any], field: str) -> None:
    uid, key = await setup(app, anthropic_fake)
    async with httpx.AsyncClient(base_url=app.url, headers={"x-api-key": key}) as http:
        reply = await http.post("/v1/messages", json=body)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"].startswith(f"{field}:")
    assert reply.headers["request-id"] == reply.headers["x-request-id"]
    assert anthropic_fake.received == []
    assert await app.state.quota.balance("user", uid) == START


async def test_count_tokens_is_tollways_estimate_with_nothing_sent_or_charged(
        app: Running, anthropic_fake: FakeAnthropic) -> None:
    uid, key = await setup(app, anthropic_fake)
    messages: list[Any] = [
        {"role": "user", "content": "what is the weather in Paris today?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_weather",
                                           "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny, 21 C"}]}]
    counted = await client(app, key).messages.count_tokens(
        model="claude-anything", system="be brief", messages=messages, tools=[WEATHER])
    texts = ["be brief", "what is the weather in Paris today?", '{"city":"Paris"}', "sunny, 21 C",
             "get_weather", "the weather", json.dumps(WEATHER["input_schema"], separators=(",", ":"))]
    assert counted.input_tokens == count_all(texts) > 0
    with pytest.raises(anthropic.AuthenticationError):
        await client(app, "sk-not-a-key").messages.count_tokens(model=CLAUDE, messages=HI)
    with pytest.raises(anthropic.BadRequestError) as bad:
        await client(app, key).messages.count_tokens(model=CLAUDE, messages=[])
    assert body_error(bad.value)["message"].startswith("messages:")
    assert anthropic_fake.received == [] and await consume_logs(app) == []
    assert await app.state.quota.balance("user", uid) == START


async def test_the_model_list_is_anthropics_with_an_anthropic_version_header_else_openais(
        app: Running, anthropic_fake: FakeAnthropic) -> None:
    _, key = await setup(app, anthropic_fake)
    models = [model async for model in client(app, key).models.list()]
    assert [(m.id, m.display_name, m.type) for m in models] == [(CLAUDE, CLAUDE, "model")]
    async with httpx.AsyncClient(base_url=app.url) as http:
        listed = await http.get("/v1/models", headers={"Authorization": f"Bearer {key}"})
        refused = await http.get("/v1/models", headers={"x-api-key": "sk-nope", "anthropic-version": "1"})
    assert [(m["id"], m["owned_by"]) for m in listed.json()["data"]] == [(CLAUDE, "anthropic")]
    assert refused.status_code == 401 and refused.json()["error"]["type"] == "authentication_error"
    assert anthropic_fake.received == []
