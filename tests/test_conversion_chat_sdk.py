"""OpenAI chat callers served by a Claude (type 14) channel, through the official openai SDK against a real
Tollway on every stack (docs/CHAT.md#conversion): the fake Anthropic receives the converted Messages request
(system blocks, tool results merged into one user turn, tool_use with decoded input, a default max_tokens,
anthropic-version 2023-06-01), and the caller gets OpenAI's completion or chunks back — thinking dropped,
tool calls indexed over tool blocks only, finish reasons and usage mapped — billed once on Anthropic's
usage, cache reads and writes included."""

from __future__ import annotations

import json
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from tests.fakes.anthropic import FakeAnthropic
from tests.harness import Running
from tests.test_anthropic_sdk import CACHED, consume_logs, cost
from tests.test_conversion_sdk import CALLS, CLAUDE, CLAUDE_TOOLS, FUNCTIONS, START, setup

CACHED_COST = 6975  # docs/CHAT.md's worked example: in 100, read 4000, writes 1000 (5m) + 200 (1h), out 500
CALL_IDS = [("toolu_0", "get_weather", {"city": "Paris"}), ("toolu_1", "get_time", {"city": "Tokyo"})]


def client(app: Running, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key=key, base_url=f"{app.url}/v1", max_retries=0)


def calls(reply: ChatCompletion) -> list[tuple[str, str, Any]]:
    """The reply's tool calls as (id, name, decoded arguments)."""
    return [(c.id, c.function.name, json.loads(c.function.arguments))
            for c in reply.choices[0].message.tool_calls or [] if c.type == "function"]


ASK_AGAIN: list[Any] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": [
        {"type": "text", "text": "weather and time in Paris?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/map.png"}}]},
    {"role": "assistant", "content": "Let me look.", "tool_calls": [
        {"id": "toolu_a", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"id": "toolu_b", "type": "function",
         "function": {"name": "get_time", "arguments": '{"city":"Paris"}'}}]},
    {"role": "tool", "tool_call_id": "toolu_a", "content": "sunny"},
    {"role": "tool", "tool_call_id": "toolu_b", "content": "noon"},
    {"role": "user", "content": "thanks; anything else?"},
    {"role": "developer", "content": "Answer in English."}]
"""A conversation with images and a tool turn, as an OpenAI caller sends it."""
ASK_AGAIN_CONVERTED: dict[str, Any] = {
    "system": [{"type": "text", "text": "You are terse."}, {"type": "text", "text": "Answer in English."}],
    "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "weather and time in Paris?"},
            {"type": "image",
             "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/map.png"}}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_b", "name": "get_time", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "sunny"},
            {"type": "tool_result", "tool_use_id": "toolu_b", "content": "noon"},
            {"type": "text", "text": "thanks; anything else?"}]}]}
"""ASK_AGAIN as the Anthropic upstream must receive it."""


async def test_a_full_request_is_converted_and_the_reply_usage_and_cost_mapped(
        app: Running, anthropic_fake: FakeAnthropic) -> None:
    uid, key = await setup(app, claude=anthropic_fake)
    fake = anthropic_fake
    fake.tool_uses, fake.text_first, fake.thinking, fake.usage = list(CALLS), True, "let me think", CACHED
    api = client(app, key)
    raw = await api.chat.completions.with_raw_response.create(
        model=CLAUDE, messages=ASK_AGAIN, tools=FUNCTIONS, temperature=1.5, top_p=0.9, stop="END", user="u-1",
        tool_choice="required", parallel_tool_calls=False,
        seed=7, response_format={"type": "json_object"}, reasoning_effort="low", logprobs=False)  # dropped
    reply = raw.parse()
    upstream = fake.last
    assert (upstream.path, upstream.headers["x-api-key"], upstream.headers["anthropic-version"]) == (
        "/v1/messages", "upstream-key", "2023-06-01")
    assert "anthropic-beta" not in upstream.headers and "authorization" not in upstream.headers
    body = dict(upstream.json)
    assert body.pop("stream", None) in (None, False)
    assert body == {"model": CLAUDE, "max_tokens": 8192, **ASK_AGAIN_CONVERTED, "stop_sequences": ["END"],
                    "temperature": 1, "top_p": 0.9, "tools": CLAUDE_TOOLS, "metadata": {"user_id": "u-1"},
                    "tool_choice": {"type": "any", "disable_parallel_tool_use": True}}
    request_id = raw.http_response.headers["x-request-id"]
    assert (reply.id, reply.object, reply.model, len(reply.choices)) == (
        f"chatcmpl-{request_id}", "chat.completion", CLAUDE, 1)
    choice = reply.choices[0]
    assert (choice.index, choice.finish_reason) == (0, "tool_calls")
    assert choice.message.content == fake.reply  # the thinking block is dropped
    assert calls(reply) == CALL_IDS
    assert [c.function.arguments for c in choice.message.tool_calls or [] if c.type == "function"] == [
        '{"city":"Paris"}', '{"city":"Tokyo"}']  # compact JSON of the input
    usage = reply.usage
    assert usage is not None and usage.prompt_tokens_details is not None
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (5300, 500, 5800)
    assert usage.prompt_tokens_details.cached_tokens == 4000
    (log,) = await consume_logs(app)
    assert (log.quota, log.prompt_tokens, log.completion_tokens, log.model_name) == (
        CACHED_COST, 5300, 500, CLAUDE)
    assert cost(100, 4000, 1000, 200, 500) == CACHED_COST
    other = json.loads(log.other)
    assert (other["converted_from"], other["converted_to"]) == ("openai", "anthropic")
    assert (other["cache_read_tokens"], other["cache_write_tokens"], other["cache_write_1h_tokens"]) == (
        4000, 1200, 200)
    assert await app.state.quota.balance("user", uid) == START - CACHED_COST

    # the output cap: max_completion_tokens, else max_tokens, else claude.default_max_tokens
    hi: list[Any] = [{"role": "user", "content": "hi there"}]
    fake.usage = True
    plain = await api.chat.completions.create(model=CLAUDE, messages=hi, max_tokens=300,
                                              max_completion_tokens=200)
    assert fake.last.json["max_tokens"] == 200 and plain.choices[0].finish_reason == "stop"
    assert plain.choices[0].message.tool_calls is None
    await api.chat.completions.create(model=CLAUDE, messages=hi, max_tokens=300, tools=FUNCTIONS,
                                      tool_choice={"type": "function", "function": {"name": "get_time"}})
    assert fake.last.json["max_tokens"] == 300
    assert fake.last.json["tool_choice"] == {"type": "tool", "name": "get_time"}
    await app.state.options.put("claude.default_max_tokens", json.dumps({CLAUDE: 1000, "default": 8192}))
    fake.stop_reason = "max_tokens"
    short = await api.chat.completions.create(model=CLAUDE, messages=hi)
    assert fake.last.json["max_tokens"] == 1000 and short.choices[0].finish_reason == "length"
    logs = await consume_logs(app)
    assert len(logs) == 4 and all(log.quota == cost(log.prompt_tokens, 0, 0, 0, log.completion_tokens)
                                  for log in logs[1:])
    assert await app.state.quota.balance("user", uid) == START - sum(log.quota for log in logs)


async def test_streams_map_text_and_two_tool_calls_indexed_over_tool_blocks(
        app: Running, anthropic_fake: FakeAnthropic) -> None:
    uid, key = await setup(app, claude=anthropic_fake)
    fake = anthropic_fake
    fake.tool_uses, fake.text_first, fake.thinking, fake.usage = list(CALLS), True, "let me think", CACHED
    fake.ping = True
    api = client(app, key)
    ask: dict[str, Any] = {"model": CLAUDE, "messages": ASK_AGAIN, "tools": FUNCTIONS}
    raw = await api.chat.completions.with_raw_response.create(**ask, stream=True,
                                                              stream_options={"include_usage": True})
    request_id = raw.http_response.headers["x-request-id"]
    chunks = [chunk async for chunk in raw.parse()]
    assert fake.last.json["stream"] is True and fake.last.headers["accept"] == "text/event-stream"
    assert {(c.id, c.model, c.object) for c in chunks} == {(f"chatcmpl-{request_id}", CLAUDE,
                                                           "chat.completion.chunk")}
    first = chunks[0].choices[0].delta
    assert (first.role, first.content) == ("assistant", "")
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == fake.reply
    tool_deltas = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []]
    assert [(t.index, t.id, t.type, t.function and t.function.name) for t in tool_deltas if t.id] == [
        (0, "toolu_0", "function", "get_weather"), (1, "toolu_1", "function", "get_time")]
    assert {t.index for t in tool_deltas} == {0, 1}  # never Anthropic's block index (2 and 3 here)
    for index, (_, _, arguments) in enumerate(CALL_IDS):
        text = "".join(t.function.arguments or "" for t in tool_deltas if t.index == index and t.function)
        assert json.loads(text) == arguments
    *_, finish, usage_chunk = chunks
    assert finish.choices[0].finish_reason == "tool_calls"
    assert usage_chunk.choices == [] and usage_chunk.usage is not None
    assert (usage_chunk.usage.prompt_tokens, usage_chunk.usage.completion_tokens,
            usage_chunk.usage.total_tokens) == (5300, 500, 5800)
    details = usage_chunk.usage.prompt_tokens_details
    assert details is not None and details.cached_tokens == 4000

    fake.stop_reason = "pause_turn"  # the stream helper, no usage asked for
    async with api.chat.completions.stream(**ask) as stream:
        final = await stream.get_final_completion()
    assert calls(final) == CALL_IDS and final.choices[0].message.content == fake.reply
    assert final.choices[0].finish_reason == "stop" and final.usage is None
    assert fake.last.json["messages"] == ASK_AGAIN_CONVERTED["messages"]

    fake.stop_reason, fake.thinking = "refusal", None
    plain = await api.chat.completions.create(model=CLAUDE, messages=[{"role": "user", "content": "hi"}],
                                              stream=True)
    rest = [chunk async for chunk in plain]
    assert [c.choices[0].finish_reason for c in rest if c.choices and c.choices[0].finish_reason] == [
        "content_filter"]
    assert all(c.choices for c in rest)  # no usage chunk unless asked for
    logs = await consume_logs(app)
    assert [(log.quota, log.is_stream) for log in logs] == [(CACHED_COST, True)] * 3
    assert all(json.loads(log.other)["converted_from"] == "openai" for log in logs)
    assert await app.state.quota.balance("user", uid) == START - 3 * CACHED_COST


async def test_a_coding_agents_turns_from_the_openai_sdk_on_a_claude_channel(
        app: Running, anthropic_fake: FakeAnthropic) -> None:
    uid, key = await setup(app, claude=anthropic_fake)
    api = client(app, key)
    tools: list[Any] = [{"type": "function", "function": dict(f["function"], name=name)}
                        for f, name in zip(FUNCTIONS, ("read_file", "edit_file"), strict=True)]
    messages: list[Any] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": [{"type": "text", "text": "fix the failing test",
                                      "cache_control": {"type": "ephemeral"}}]}]
    expected: list[int] = []
    for turn in range(4):
        anthropic_fake.tool_uses = [("read_file", {"path": f"f{turn}.py"})] if turn < 3 else []
        anthropic_fake.usage = {"input_tokens": 30, "cache_read_input_tokens": 900 * turn,
                                "cache_creation_input_tokens": 200, "output_tokens": 40}
        ask: dict[str, Any] = {"model": CLAUDE, "messages": messages, "tools": tools, "max_tokens": 1024,
                               "tool_choice": "auto" if turn < 3 else "none"}
        if turn % 2:
            async with api.chat.completions.stream(**ask) as stream:
                reply = await stream.get_final_completion()
        else:
            reply = await api.chat.completions.create(**ask)
        assert reply.choices[0].finish_reason == ("tool_calls" if turn < 3 else "stop")
        body = anthropic_fake.last.json
        assert "cache_control" not in json.dumps(body) and body["max_tokens"] == 1024
        assert body["tool_choice"] == {"type": "auto" if turn < 3 else "none"}
        assert body["system"] == [{"type": "text", "text": "You are a coding agent."}]
        assert [m["role"] for m in body["messages"]] == ["user"] + ["assistant", "user"] * turn
        for user_turn in body["messages"][2::2]:  # each holds only the tool result of the turn before
            assert [b["type"] for b in user_turn["content"]] == ["tool_result"]
        expected.append(cost(30, 900 * turn, 200, 0, 40))
        if turn < 3:
            ((call_id, name, arguments),) = calls(reply)
            assert (name, arguments) == ("read_file", {"path": f"f{turn}.py"})
            # no text block: null (streamed: the "" of the first chunk, as docs/CHAT.md's stream table says)
            assert reply.choices[0].message.content == ("" if turn % 2 else None)
            messages.append({"role": "assistant", "content": reply.choices[0].message.content, "tool_calls": [
                {"id": f"{call_id}-{turn}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(arguments)}}]})
            messages.append({"role": "tool", "tool_call_id": f"{call_id}-{turn}",
                             "content": f"contents {turn}"})
    *_, assistant, results = anthropic_fake.last.json["messages"]
    assert assistant == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_0-2", "name": "read_file", "input": {"path": "f2.py"}}]}
    assert results == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_0-2", "content": "contents 2"}]}
    logs = await consume_logs(app)
    assert [log.quota for log in logs] == expected
    assert [json.loads(log.other)["cache_write_tokens"] for log in logs] == [200] * 4
    assert await app.state.quota.balance("user", uid) == START - sum(expected)
