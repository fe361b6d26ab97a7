"""Anthropic Messages callers served by OpenAI-format upstreams, through the official anthropic SDK against
a real Tollway on every stack (docs/CHAT.md#conversion): the fake OpenAI (type 1) or the fake Gemini's
OpenAI-compatible endpoint (type 24) receives the converted chat request, and the caller gets Anthropic's
message, stream events, stop reasons and usage back, billed once on the upstream's counts.

The helpers here (`setup`, `sse`, the models and tools) serve the other conversion tests too."""

from __future__ import annotations

import json
from typing import Any

import httpx
from anthropic.types import Message, TextBlock, ToolUseBlock

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user
from tests.test_anthropic_sdk import client, consume_logs, cost

CHAT, CLAUDE, GEMINI = "gpt-fake-chat", "claude-fake-sonnet", "gemini-2.5-flash"
START = 10_000_000
HI: list[Any] = [{"role": "user", "content": "hi there"}]
CALLS = [("get_weather", {"city": "Paris"}), ("get_time", {"city": "Tokyo"})]
CLAUDE_TOOLS: list[Any] = [
    {"name": name, "description": f"the {name}",
     "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    for name, _ in CALLS]
FUNCTIONS: list[Any] = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                          "parameters": t["input_schema"]}}
                        for t in CLAUDE_TOOLS]
"""CLAUDE_TOOLS as OpenAI functions: what the upstream gets, and what OpenAI callers send."""
USAGE = {"prompt_tokens": 2000, "completion_tokens": 300, "total_tokens": 2300,
         "prompt_tokens_details": {"cached_tokens": 1500}}
"""An OpenAI upstream's usage; for an Anthropic caller: input 500, cache read 1500, output 300."""
USAGE_COST = 3225  # ceil((500 + 1500 × 0.1 + 300 × 5) × 1.5)
ANTHROPIC_USAGE = {"input_tokens": 500, "cache_read_input_tokens": 1500, "cache_creation_input_tokens": 0,
                   "output_tokens": 300}


async def setup(app: Running, *, openai: FakeOpenAI | None = None, claude: FakeAnthropic | None = None,
                gemini: FakeGemini | None = None, channel_type: int = 1, quota: int = START
                ) -> tuple[int, str]:
    """A user with `quota`, an unlimited key, a channel per fake given (CHAT on `openai` as
    `channel_type`, CLAUDE on `claude` as 14, GEMINI on `gemini` as 24) and the same ratios on every
    model: ModelRatio 1.5, CompletionRatio 5, CacheRatio 0.1, CreateCacheRatio 1.25 (the `cost` of
    test_anthropic_sdk)."""
    uid = await add_user(app.state, "alice", quota=quota)
    _, key = await seed_key(app.state, uid, unlimited=True)
    for fake, kind, model in ((openai, channel_type, CHAT), (claude, 14, CLAUDE), (gemini, 24, GEMINI)):
        if fake is not None:
            await seed_channel(app.state, type=kind, base_url=fake.url, models=model, key="upstream-key")
    models = (CHAT, CLAUDE, GEMINI)
    for option, value in (("ModelRatio", 1.5), ("CompletionRatio", 5), ("CacheRatio", 0.1),
                          ("CreateCacheRatio", 1.25)):
        await app.state.options.put(option, json.dumps(dict.fromkeys(models, value)))
    return uid, key


def sse(raw: bytes) -> list[tuple[str, Any]]:
    """The events of an SSE body as (event name or "", data decoded as JSON, or the raw text when it is not
    JSON); comments (`: keep-alive`) are left out."""
    events: list[tuple[str, Any]] = []
    for part in raw.replace(b"\r\n", b"\n").split(b"\n\n"):
        name, data = "", None
        for line in part.decode().split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data = line[5:].strip()
        if data is None:
            continue
        try:
            events.append((name, json.loads(data)))
        except ValueError:
            events.append((name, data))
    return events


def grammar(events: list[tuple[str, Any]]) -> list[tuple[Any, ...]]:
    """Anthropic stream events as (name, index, block or delta type); empty JSON fragments left out."""
    shape: list[tuple[Any, ...]] = []
    for name, data in events:
        assert data["type"] == name, (name, data)
        if name == "content_block_start":
            shape.append((name, data["index"], data["content_block"]["type"]))
        elif name == "content_block_delta":
            if data["delta"] != {"type": "input_json_delta", "partial_json": ""}:
                shape.append((name, data["index"], data["delta"]["type"]))
        elif name == "content_block_stop":
            shape.append((name, data["index"]))
        else:
            shape.append((name,))
    return shape


def blocks(message: Message) -> list[tuple[Any, ...]]:
    """A message's content as ("text", text) and ("tool_use", id, name, input) tuples, (type,) else."""
    out: list[tuple[Any, ...]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            out.append(("text", block.text))
        elif isinstance(block, ToolUseBlock):
            out.append(("tool_use", block.id, block.name, block.input))
        else:
            out.append((block.type,))
    return out


def without_stream(body: dict[str, Any]) -> dict[str, Any]:
    """A converted non-streamed body without its `stream` field, which may be absent or false."""
    assert body.get("stream") in (None, False), body
    return {k: v for k, v in body.items() if k != "stream"}


async def test_a_text_message_plain_and_streamed_with_stop_reasons_usage_and_one_charge_each(
        app: Running, openai_fake: FakeOpenAI) -> None:
    uid, key = await setup(app, openai=openai_fake)
    openai_fake.text.usage = USAGE
    api = client(app, key)
    raw = await api.messages.with_raw_response.create(
        model=CHAT, max_tokens=100, system="You are terse.", messages=HI, stop_sequences=["END"],
        metadata={"user_id": "u-1"}, extra_body={"temperature": 0.5, "top_p": 0.9})
    message = await raw.parse()
    request_id = raw.http_response.headers["request-id"]
    assert (message.id, message.model, message.role, message.type) == (
        f"msg_{request_id}", CHAT, "assistant", "message")
    assert blocks(message) == [("text", openai_fake.text.reply)]
    assert (message.stop_reason, message.stop_sequence) == ("end_turn", None)
    assert message.usage.model_dump(include=set(ANTHROPIC_USAGE)) == ANTHROPIC_USAGE
    upstream = openai_fake.last
    assert (upstream.path, upstream.headers["authorization"]) == (
        "/v1/chat/completions", "Bearer upstream-key")
    assert without_stream(upstream.json) == {
        "model": CHAT, "messages": [{"role": "system", "content": "You are terse."}, *HI],
        "max_completion_tokens": 100, "stop": ["END"], "temperature": 0.5, "top_p": 0.9, "user": "u-1"}

    openai_fake.text.finish_reason = "length"
    async with api.messages.stream(model=CHAT, max_tokens=100, messages=HI) as stream:
        text = "".join([piece async for piece in stream.text_stream])
        final = await stream.get_final_message()
    assert text == openai_fake.text.reply and final.stop_reason == "max_tokens"
    assert final.usage.model_dump(include=set(ANTHROPIC_USAGE)) == ANTHROPIC_USAGE
    assert final.id.startswith("msg_") and final.model == CHAT
    upstream = openai_fake.last
    assert upstream.headers["accept"] == "text/event-stream"
    assert upstream.json == {"model": CHAT, "messages": HI, "max_completion_tokens": 100, "stream": True,
                             "stream_options": {"include_usage": True}}

    openai_fake.text.finish_reason = "content_filter"
    refused = await api.messages.create(model=CHAT, max_tokens=100, messages=HI)
    assert refused.stop_reason == "refusal"
    logs = await consume_logs(app)
    assert [(log.quota, log.prompt_tokens, log.completion_tokens, log.is_stream) for log in logs] == [
        (USAGE_COST, 2000, 300, False), (USAGE_COST, 2000, 300, True), (USAGE_COST, 2000, 300, False)]
    assert cost(500, 1500, 0, 0, 300) == USAGE_COST
    for log in logs:
        other = json.loads(log.other)
        assert (other["converted_from"], other["converted_to"]) == ("anthropic", "openai")
        assert (other["cache_read_tokens"], other["cache_write_tokens"], other["usage_estimated"]) == (
            1500, 0, False)
        assert log.model_name == CHAT
    assert await app.state.quota.balance("user", uid) == START - 3 * USAGE_COST


ASK_AGAIN: list[Any] = [
    {"role": "user", "content": "weather and time in Paris?"},
    {"role": "assistant", "content": [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "sunny"},
        {"type": "text", "text": "and the time?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/clock.png"}}]}]
"""A conversation with a tool turn and images, as an Anthropic caller sends it."""
ASK_AGAIN_CONVERTED: list[Any] = [
    {"role": "system", "content": "You are terse.\n\nUse the tools."},
    {"role": "user", "content": "weather and time in Paris?"},
    {"role": "assistant", "content": "Let me look.", "tool_calls": [
        {"id": "toolu_a", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]},
    {"role": "tool", "tool_call_id": "toolu_a", "content": "sunny"},
    {"role": "user", "content": [
        {"type": "text", "text": "and the time?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/clock.png"}}]}]
"""ASK_AGAIN (with a system of two text blocks) as the OpenAI upstream must receive it."""
TOOL_USES = [("tool_use", "call_0", "get_weather", {"city": "Paris"}),
             ("tool_use", "call_1", "get_time", {"city": "Tokyo"})]
"""The fake OpenAI's two calls (CALLS) as the Anthropic caller's tool_use blocks."""
SYSTEM: list[Any] = [{"type": "text", "text": "You are terse."}, {"type": "text", "text": "Use the tools."}]


async def test_a_text_then_two_parallel_tool_calls_plain_and_streamed(app: Running, openai_fake: FakeOpenAI
                                                                      ) -> None:
    uid, key = await setup(app, openai=openai_fake)
    text = openai_fake.text
    text.tool_calls, text.text_first, text.usage = list(CALLS), True, USAGE
    api = client(app, key)
    ask: dict[str, Any] = {"model": CHAT, "max_tokens": 200, "system": SYSTEM, "messages": ASK_AGAIN,
                           "tools": CLAUDE_TOOLS}
    plain = await api.messages.create(  # with what is not converted (docs/CHAT.md): dropped
        **ask, tool_choice={"type": "auto", "disable_parallel_tool_use": True},
        thinking={"type": "enabled", "budget_tokens": 1024}, extra_body={"top_k": 5, "container": "c-1"})
    assert without_stream(openai_fake.last.json) == {
        "model": CHAT, "messages": ASK_AGAIN_CONVERTED, "max_completion_tokens": 200, "tools": FUNCTIONS,
        "tool_choice": "auto", "parallel_tool_calls": False}
    async with api.messages.stream(**ask, tool_choice={"type": "tool", "name": "get_time"}) as stream:
        streamed = await stream.get_final_message()
    assert openai_fake.last.json == {
        "model": CHAT, "messages": ASK_AGAIN_CONVERTED, "max_completion_tokens": 200, "tools": FUNCTIONS,
        "tool_choice": {"type": "function", "function": {"name": "get_time"}}, "stream": True,
        "stream_options": {"include_usage": True}}
    for message in (plain, streamed):
        assert blocks(message) == [("text", text.reply), *TOOL_USES]
        assert message.stop_reason == "tool_use"
        assert message.usage.model_dump(include=set(ANTHROPIC_USAGE)) == ANTHROPIC_USAGE

    async with httpx.AsyncClient(base_url=app.url, timeout=30) as http:  # the events as written
        reply = await http.post("/v1/messages", json={**ask, "stream": True}, headers={"x-api-key": key})
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
    events = sse(reply.content)
    assert grammar(events) == [
        ("message_start",),
        ("content_block_start", 0, "text"), *[("content_block_delta", 0, "text_delta")] * 4,
        ("content_block_stop", 0),
        ("content_block_start", 1, "tool_use"), *[("content_block_delta", 1, "input_json_delta")] * 2,
        ("content_block_stop", 1),
        ("content_block_start", 2, "tool_use"), *[("content_block_delta", 2, "input_json_delta")] * 2,
        ("content_block_stop", 2),
        ("message_delta",), ("message_stop",)]
    start = events[0][1]["message"]
    assert (start["id"], start["model"], start["content"], start["stop_reason"]) == (
        f"msg_{reply.headers['request-id']}", CHAT, [], None)
    assert start["usage"]["input_tokens"] > 0 and start["usage"]["output_tokens"] == 0
    usage = start["usage"]
    assert (usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]) == (0, 0)
    started = [data["content_block"] for name, data in events if name == "content_block_start"]
    assert started[1:] == [{"type": "tool_use", "id": "call_0", "name": "get_weather", "input": {}},
                          {"type": "tool_use", "id": "call_1", "name": "get_time", "input": {}}]
    for index, (_, arguments) in enumerate(CALLS, start=1):
        fragments = [d["delta"]["partial_json"] for n, d in events
                     if n == "content_block_delta" and d["index"] == index]
        assert json.loads("".join(fragments)) == arguments
    delta = events[-2][1]
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert {k: delta["usage"].get(k) for k in ANTHROPIC_USAGE} == ANTHROPIC_USAGE
    logs = await consume_logs(app)
    assert [(log.quota, log.is_stream) for log in logs] == [(USAGE_COST, False), (USAGE_COST, True),
                                                            (USAGE_COST, True)]
    assert await app.state.quota.balance("user", uid) == START - 3 * USAGE_COST


async def test_a_gemini_channel_serves_anthropic_callers_through_googles_openai_endpoint(
        app: Running, gemini_fake: FakeGemini) -> None:
    uid, key = await setup(app, gemini=gemini_fake)
    api = client(app, key)
    message = await api.messages.create(model=GEMINI, max_tokens=50, messages=HI)
    assert blocks(message) == [("text", gemini_fake.openai.reply)]
    async with api.messages.stream(model=GEMINI, max_tokens=50, messages=HI) as stream:
        final = await stream.get_final_message()
    assert blocks(final) == [("text", gemini_fake.openai.reply)]
    plain, streamed = gemini_fake.received
    for upstream in (plain, streamed):
        assert (upstream.path, upstream.headers["authorization"]) == (
            "/v1beta/openai/chat/completions", "Bearer upstream-key")
        assert "x-goog-api-key" not in upstream.headers
    assert without_stream(plain.json) == {"model": GEMINI, "messages": HI, "max_tokens": 50}
    assert streamed.json == {"model": GEMINI, "messages": HI, "max_tokens": 50, "stream": True,
                             "stream_options": {"include_usage": True}}
    # the fake's usage: 2 words + 7 prompt tokens, 5 words out
    for reply in (message, final):
        assert (reply.usage.input_tokens, reply.usage.output_tokens) == (9, 5)
    logs = await consume_logs(app)
    assert [(log.prompt_tokens, log.completion_tokens, log.quota) for log in logs] == [
        (9, 5, cost(9, 0, 0, 0, 5))] * 2
    assert all(json.loads(log.other)["converted_to"] == "openai" for log in logs)
    assert await app.state.quota.balance("user", uid) == START - 2 * cost(9, 0, 0, 0, 5)


async def test_a_coding_agents_turns_from_the_anthropic_sdk_on_an_openai_channel(
        app: Running, openai_fake: FakeOpenAI) -> None:
    uid, key = await setup(app, openai=openai_fake, channel_type=8)  # a Custom channel: max_tokens
    api = client(app, key)
    system: list[Any] = [
        {"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Work in /repo."}]
    tools: list[Any] = [dict(CLAUDE_TOOLS[0], name="read_file"),
                        dict(CLAUDE_TOOLS[1], name="edit_file", cache_control={"type": "ephemeral"})]
    messages: list[Any] = [{"role": "user", "content": [
        {"type": "text", "text": "fix the failing test", "cache_control": {"type": "ephemeral"}}]}]
    expected: list[int] = []
    for turn in range(4):
        openai_fake.text.tool_calls = [("read_file", {"path": f"f{turn}.py"})] if turn < 3 else []
        prompt, cached = 1000 + 500 * turn, 800 * turn
        openai_fake.text.usage = {"prompt_tokens": prompt, "completion_tokens": 40,
                                  "total_tokens": prompt + 40,
                                  "prompt_tokens_details": {"cached_tokens": cached}}
        ask: dict[str, Any] = {"model": CHAT, "max_tokens": 1024, "system": system, "tools": tools,
                               "messages": messages,
                               "tool_choice": {"type": "any"} if turn < 3 else {"type": "none"}}
        if turn % 2:
            async with api.messages.stream(**ask) as stream:
                message = await stream.get_final_message()
        else:
            message = await api.messages.create(**ask)
        assert message.stop_reason == ("tool_use" if turn < 3 else "end_turn")
        body = openai_fake.last.json
        assert "cache_control" not in json.dumps(body) and body["max_tokens"] == 1024
        assert "max_completion_tokens" not in body
        assert body["tool_choice"] == ("required" if turn < 3 else "none")
        assert body["messages"][0] == {"role": "system",
                                       "content": "You are a coding agent.\n\nWork in /repo."}
        assert [m["role"] for m in body["messages"]] == ["system", "user"] + ["assistant", "tool"] * turn
        assert body["messages"][1]["content"] == [{"type": "text", "text": "fix the failing test"}]
        expected.append(cost(prompt - cached, cached, 0, 0, 40))
        if turn < 3:
            ((kind, use_id, name, arguments),) = blocks(message)
            assert (kind, name, arguments) == ("tool_use", "read_file", {"path": f"f{turn}.py"})
            messages.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": f"{use_id}-{turn}", "name": name, "input": arguments}]})
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"{use_id}-{turn}", "content": f"contents of f{turn}",
                 "cache_control": {"type": "ephemeral"}}]})
    *_, assistant, tool = openai_fake.last.json["messages"]
    assert assistant.pop("content", None) in (None, "")  # no text block: no text
    assert assistant == {"role": "assistant", "tool_calls": [{"id": "call_0-2", "type": "function",
                                                              "function": {"name": "read_file",
                                                                           "arguments": '{"path":"f2.py"}'}}]}
    assert tool == {"role": "tool", "tool_call_id": "call_0-2", "content": "contents of f2"}
    logs = await consume_logs(app)
    assert [log.quota for log in logs] == expected
    assert all(json.loads(log.other)["converted_from"] == "anthropic" for log in logs)
    assert await app.state.quota.balance("user", uid) == START - sum(expected)
