"""Converted calls among other channels (docs/CHAT.md#conversion, #billing), on one stack: a retry may
move between a channel that converts and one that passes through (each attempt in its own format, the log
saying `converted_from` only when the answer was converted); a mapped model goes up under the upstream's
name while replies and the log carry the requested one; the reservation uses the caller's output cap (or
`PreConsumedCompletionTokens`), never the default sent to Claude; and an OpenAI upstream that reports no
usage (a channel set not to be asked) is billed on Tollway's count, which the Anthropic caller sees. Both
model lists name the models served by conversion, and every stop and finish reason maps as the tables
say."""

from __future__ import annotations

import json
from typing import Any, cast

import anthropic
import httpx
import openai
import pytest
from sqlalchemy import update

from models.channels import Channel
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user
from tests.test_anthropic_sdk import client as claude_client
from tests.test_anthropic_sdk import consume_logs, cost, sent_by_fake
from tests.test_conversion_chat_sdk import client as chat_client
from tests.test_conversion_sdk import CHAT, CLAUDE, CLAUDE_TOOLS, HI, START, blocks, setup, sse

BOTH = "both-model"
"""A model served by a Claude channel and an OpenAI channel."""


async def serve_both(app: Running, openai_fake: FakeOpenAI, anthropic_fake: FakeAnthropic, *, first: str
                     ) -> tuple[int, str]:
    """BOTH on both fakes, `first` ("openai" or "anthropic") at the higher priority, priced as the others."""
    uid, key = await setup(app)
    for kind, fake in ((1, openai_fake), (14, anthropic_fake)):
        priority = 10 if (kind == 14) == (first == "anthropic") else 0
        await seed_channel(app.state, type=kind, base_url=fake.url, models=BOTH, priority=priority)
    for option, value in (("ModelRatio", 1.5), ("CompletionRatio", 5), ("CacheRatio", 0.1)):
        await app.state.options.put(option, json.dumps({BOTH: value}))
    return uid, key


@pytest.mark.parametrize(("caller", "first"), [("openai", "anthropic"), ("openai", "openai"),
                                               ("anthropic", "openai"), ("anthropic", "anthropic")])
async def test_a_retry_moves_between_converting_and_passing_through(
        embedded_app: Running, openai_fake: FakeOpenAI, anthropic_fake: FakeAnthropic, caller: str,
        first: str) -> None:
    app = embedded_app
    uid, key = await serve_both(app, openai_fake, anthropic_fake, first=first)
    fakes: list[FakeOpenAI | FakeAnthropic] = [openai_fake, anthropic_fake]
    failing, answering = fakes[::-1] if first == "anthropic" else fakes
    failing.fail("500", times=1)  # retryable: the next attempt goes to the other channel
    if caller == "openai":
        path, headers = "/v1/chat/completions", {"Authorization": f"Bearer {key}"}
        body = b'{"model": "%s", "messages": [{"role": "user", "content": "hi there"}]}' % BOTH.encode()
    else:
        path, headers = "/v1/messages", {"x-api-key": key}
        body = (b'{"model": "%s", "max_tokens": 64, "messages": [{"role": "user", "content": "hi there"}]}'
                % BOTH.encode())
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as http:
        reply = await http.post(path, content=body, headers={**headers, "content-type": "application/json"})
    assert reply.status_code == 200, reply.text
    assert (len(failing.received), len(answering.received)) == (1, 1)
    converted = (caller == "openai") == (answering is anthropic_fake)
    if converted:  # the answering channel speaks the other format
        answer = reply.json()
        if caller == "openai":
            assert answer["choices"][0]["message"]["content"] == anthropic_fake.reply
        else:
            assert answer["content"] == [{"type": "text", "text": openai_fake.text.reply}]
    else:  # pass-through: the caller's bytes up, the upstream's bytes back
        assert answering.last.body == body
        if answering is anthropic_fake:
            assert reply.content == sent_by_fake(anthropic_fake)
        else:
            assert reply.json()["choices"][0]["message"]["content"] == openai_fake.text.reply
    (log,) = await consume_logs(app)
    other = json.loads(log.other)
    assert len(other["channels_tried"]) == 2
    if converted:
        assert (other["converted_from"], other["converted_to"]) == (
            caller, "anthropic" if caller == "openai" else "openai")
    else:
        assert "converted_from" not in other and "converted_to" not in other
    assert await app.state.quota.balance("user", uid) == START - log.quota


async def test_a_mapped_model_goes_up_under_the_upstreams_name_and_comes_back_under_the_callers(
        embedded_app: Running, openai_fake: FakeOpenAI, anthropic_fake: FakeAnthropic) -> None:
    app = embedded_app
    uid, key = await setup(app)
    mapping = {"alias-claude": CLAUDE, "alias-gpt": CHAT}
    await seed_channel(app.state, type=14, base_url=anthropic_fake.url, models="alias-claude",
                       model_mapping=json.dumps(mapping))
    await seed_channel(app.state, type=1, base_url=openai_fake.url, models="alias-gpt",
                       model_mapping=json.dumps(mapping))
    await app.state.options.put("ModelRatio", json.dumps({"alias-claude": 2, "alias-gpt": 2}))
    plain = await chat_client(app, key).chat.completions.create(model="alias-claude", messages=HI)
    assert plain.model == "alias-claude" and anthropic_fake.last.json["model"] == CLAUDE
    chat = chat_client(app, key).chat.completions
    stream = await chat.create(model="alias-claude", messages=HI, stream=True)
    assert {chunk.model async for chunk in stream} == {"alias-claude"}
    message = await claude_client(app, key).messages.create(model="alias-gpt", max_tokens=64, messages=HI)
    assert message.model == "alias-gpt" and openai_fake.last.json["model"] == CHAT
    async with claude_client(app, key).messages.stream(model="alias-gpt", max_tokens=64, messages=HI) as s:
        assert (await s.get_final_message()).model == "alias-gpt"
    logs = await consume_logs(app)
    assert [(log.model_name, json.loads(log.other)["upstream_model_name"]) for log in logs] == [
        ("alias-claude", CLAUDE)] * 2 + [("alias-gpt", CHAT)] * 2
    # priced as the requested model (ModelRatio 2, CompletionRatio 1), not as the upstream's (1.5, 5)
    assert [log.quota for log in logs] == [2 * (log.prompt_tokens + log.completion_tokens) for log in logs]
    assert await app.state.quota.balance("user", uid) == START - sum(log.quota for log in logs)


async def test_the_hold_uses_the_callers_cap_not_the_default_sent_to_claude(
        embedded_app: Running, openai_fake: FakeOpenAI, anthropic_fake: FakeAnthropic) -> None:
    app = embedded_app
    # no cap named: PreConsumedCompletionTokens (1024) is reserved, ceil((500 + 1024 × 5) × 1.5) = 8430,
    # though Claude is sent max_tokens 8192 (whose hold would be 62190)
    _, key = await setup(app, openai=openai_fake, claude=anthropic_fake, quota=8429)
    with pytest.raises(openai.RateLimitError) as short:
        await chat_client(app, key).chat.completions.create(model=CLAUDE, messages=HI)
    assert short.value.code == "insufficient_quota" and anthropic_fake.received == []
    _, key = await setup_more(app, quota=8430)
    reply = await chat_client(app, key).chat.completions.create(model=CLAUDE, messages=HI)
    assert reply.choices[0].message.content == anthropic_fake.reply
    assert anthropic_fake.last.json["max_tokens"] == 8192
    # an Anthropic caller's hold is its max_tokens: ceil((500 + 100 × 5) × 1.5) = 1500
    _, key = await setup_more(app, quota=1499, name="carol")
    with pytest.raises(anthropic.PaymentRequiredError):
        await claude_client(app, key).messages.create(model=CHAT, max_tokens=100, messages=HI)
    _, key = await setup_more(app, quota=1500, name="dave")
    await claude_client(app, key).messages.create(model=CHAT, max_tokens=100, messages=HI)
    assert len(openai_fake.received) == 1


async def setup_more(app: Running, *, quota: int, name: str = "bob") -> tuple[int, str]:
    """Another user with `quota` and an unlimited key, on the channels already seeded."""
    uid = await add_user(app.state, name, quota=quota)
    _, key = await seed_key(app.state, uid, unlimited=True)
    return uid, key


async def test_an_openai_upstream_not_asked_for_usage_is_billed_on_tollways_count(
        embedded_app: Running, openai_fake: FakeOpenAI) -> None:
    app = embedded_app
    uid, key = await setup(app, openai=openai_fake)
    async with app.state.db.transaction() as tx:
        await tx.execute(update(Channel).values(setting=json.dumps({"stream_include_usage": False})))
    await app.state.channels.changed()
    body: dict[str, Any] = {"model": CHAT, "max_tokens": 64, "messages": HI, "stream": True}
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as http:
        reply = await http.post("/v1/messages", json=body, headers={"x-api-key": key})
    upstream = openai_fake.last.json
    assert upstream["stream"] is True and "stream_options" not in upstream  # so the fake sends no usage
    events = sse(reply.content)
    assert [name for name, _ in events][-2:] == ["message_delta", "message_stop"]
    usage = events[-2][1]["usage"]
    (log,) = await consume_logs(app)
    assert json.loads(log.other)["usage_estimated"] is True
    assert (usage["input_tokens"], usage["output_tokens"]) == (log.prompt_tokens, log.completion_tokens)
    assert log.completion_tokens > 0 and log.quota == cost(log.prompt_tokens, 0, 0, 0, log.completion_tokens)
    assert await app.state.quota.balance("user", uid) == START - log.quota


async def test_both_model_lists_name_the_models_served_by_conversion(
        embedded_app: Running, openai_fake: FakeOpenAI, anthropic_fake: FakeAnthropic) -> None:
    app = embedded_app
    _, key = await setup(app, openai=openai_fake, claude=anthropic_fake)
    anthropic_list = [m.id async for m in claude_client(app, key).models.list()]
    openai_list = {m.id: m.owned_by async for m in chat_client(app, key).models.list()}
    assert anthropic_list == sorted([CHAT, CLAUDE])  # CHAT is served on /v1/messages by conversion
    assert openai_list[CLAUDE] == "anthropic" and CHAT in openai_list


async def test_every_stop_and_finish_reason_and_odd_arguments_map_as_the_tables_say(
        embedded_app: Running, openai_fake: FakeOpenAI, anthropic_fake: FakeAnthropic) -> None:
    app = embedded_app
    _, key = await setup(app, openai=openai_fake, claude=anthropic_fake)
    messages = claude_client(app, key).messages
    for finish, stop in (("stop", "end_turn"), ("length", "max_tokens"), ("tool_calls", "tool_use"),
                         ("function_call", "tool_use"), ("content_filter", "refusal"), ("eos", "end_turn")):
        openai_fake.text.finish_reason = finish
        assert (await messages.create(model=CHAT, max_tokens=64, messages=HI)).stop_reason == stop, finish
    completions = chat_client(app, key).chat.completions
    for reason, finish in (("end_turn", "stop"), ("stop_sequence", "stop"), ("pause_turn", "stop"),
                           ("max_tokens", "length"), ("model_context_window_exceeded", "length"),
                           ("tool_use", "tool_calls"), ("refusal", "content_filter"),
                           ("something_new", "stop")):
        anthropic_fake.stop_reason = reason
        reply = await completions.create(model=CLAUDE, messages=HI)
        assert reply.choices[0].finish_reason == finish, reason
    # arguments that are not a JSON object become an empty input
    openai_fake.text.finish_reason, openai_fake.text.tool_calls = None, [("get_weather", cast(Any, [1, 2]))]
    message = await messages.create(model=CHAT, max_tokens=64, messages=HI, tools=CLAUDE_TOOLS)
    assert blocks(message) == [("tool_use", "call_0", "get_weather", {})]
