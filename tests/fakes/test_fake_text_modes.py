"""The fakes' answers that conversion tests lean on, checked with the official SDKs against the fakes
alone: a text before tool calls (both fakes, plain and streamed), two parallel calls, Claude's thinking
block with its signature, the stop or finish reason a test asks for, and the fake Gemini's
OpenAI-compatible endpoint."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai

from tests.fakes.anthropic import SIGNATURE, FakeAnthropic
from tests.fakes.fixtures import client_for
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI

CALLS = [("get_weather", {"city": "Paris"}), ("get_time", {"city": "Tokyo"})]
OPENAI_TOOLS: list[Any] = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
                           for n, _ in CALLS]
CLAUDE_TOOLS: list[Any] = [{"name": n, "input_schema": {"type": "object"}} for n, _ in CALLS]
ASK: list[Any] = [{"role": "user", "content": "weather and time?"}]


async def test_openai_text_before_two_parallel_calls_plain_and_streamed(openai_fake: FakeOpenAI) -> None:
    openai_fake.text.tool_calls, openai_fake.text.text_first = list(CALLS), True
    sdk = openai.AsyncOpenAI(api_key="k", base_url=f"{openai_fake.url}/v1", max_retries=0)
    plain = await sdk.chat.completions.create(model="m", messages=ASK, tools=OPENAI_TOOLS)
    async with sdk.chat.completions.stream(model="m", messages=ASK, tools=OPENAI_TOOLS,
                                           stream_options={"include_usage": True}) as stream:
        streamed = await stream.get_final_completion()
    for reply in (plain, streamed):
        message = reply.choices[0].message
        assert message.content == openai_fake.text.reply and reply.choices[0].finish_reason == "tool_calls"
        calls = [c for c in message.tool_calls or [] if c.type == "function"]
        assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
            ("call_0", "get_weather", {"city": "Paris"}), ("call_1", "get_time", {"city": "Tokyo"})]
        assert reply.usage is not None and reply.usage.completion_tokens == 4 + 4 + 4  # words + args // 4
    async with client_for(openai_fake) as http:  # the text's chunks come before the first call's
        raw = await http.post("/v1/chat/completions", json={"model": "m", "messages": ASK, "stream": True,
                                                            "tools": OPENAI_TOOLS})
    deltas = [json.loads(line[6:])["choices"][0]["delta"] for line in raw.text.split("\n\n")
              if line.startswith("data: {")]
    kinds = ["content" if d.get("content") else "tool" if d.get("tool_calls") else "" for d in deltas]
    assert kinds.index("tool") > max(i for i, k in enumerate(kinds) if k == "content")
    assert "usage" not in raw.text  # no usage chunk unless asked for
    openai_fake.text.finish_reason = "length"
    short = await sdk.chat.completions.create(model="m", messages=ASK)
    assert short.choices[0].finish_reason == "length"
    await sdk.close()


async def test_claude_thinking_then_text_then_two_tool_uses_plain_and_streamed(anthropic_fake: FakeAnthropic
                                                                               ) -> None:
    fake = anthropic_fake
    fake.tool_uses, fake.text_first, fake.thinking, fake.ping = list(CALLS), True, "let me think", True
    sdk = anthropic.AsyncAnthropic(api_key="k", base_url=fake.url, max_retries=0)
    plain = await sdk.messages.create(model="c", max_tokens=64, messages=ASK, tools=CLAUDE_TOOLS)
    async with sdk.messages.stream(model="c", max_tokens=64, messages=ASK, tools=CLAUDE_TOOLS
                                   ) as stream:
        streamed = await stream.get_final_message()
    for message in (plain, streamed):
        assert [b.type for b in message.content] == ["thinking", "text", "tool_use", "tool_use"]
        thinking, text, *uses = message.content
        assert thinking.type == "thinking" and (thinking.thinking, thinking.signature) == (
            "let me think", SIGNATURE)
        assert text.type == "text" and text.text == fake.reply
        assert [(u.id, u.name, u.input) for u in uses if u.type == "tool_use"] == [
            ("toolu_0", "get_weather", {"city": "Paris"}), ("toolu_1", "get_time", {"city": "Tokyo"})]
        assert message.stop_reason == "tool_use"
        assert message.usage.output_tokens == 3 + 5 + 4 + 4  # thinking and text words + inputs' JSON // 4
    async with client_for(fake) as http:
        raw = await http.post("/v1/messages", json={"model": "c", "max_tokens": 8, "messages": ASK,
                                                    "stream": True})
    names = [part.split("\n")[0].removeprefix("event: ") for part in raw.text.split("\n\n") if part]
    assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]
    assert '"signature_delta"' in raw.text and '"thinking_delta"' in raw.text
    fake.stop_reason = "max_tokens"
    assert (await sdk.messages.create(model="c", max_tokens=8, messages=ASK)).stop_reason == "max_tokens"
    await sdk.close()


async def test_gemini_answers_openai_callers_on_googles_compatible_endpoint(gemini_fake: FakeGemini) -> None:
    gemini_fake.valid_keys = {"g-key"}
    sdk = openai.AsyncOpenAI(api_key="g-key", base_url=f"{gemini_fake.url}/v1beta/openai", max_retries=0)
    reply = await sdk.chat.completions.create(model="gemini-2.5-flash", messages=ASK)
    assert reply.choices[0].message.content == gemini_fake.openai.reply == gemini_fake.text.reply
    stream = await sdk.chat.completions.create(model="gemini-2.5-flash", messages=ASK, stream=True,
                                               stream_options={"include_usage": True})
    chunks = [chunk async for chunk in stream]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    embedded = await sdk.embeddings.create(model="text-embedding-004", input="one two")
    assert len(embedded.data) == 1
    assert [r.headers["authorization"] for r in gemini_fake.received] == ["Bearer g-key"] * 3
    bad = openai.AsyncOpenAI(api_key="nope", base_url=f"{gemini_fake.url}/v1beta/openai", max_retries=0)
    try:
        await bad.chat.completions.create(model="gemini-2.5-flash", messages=ASK)
    except openai.BadRequestError:
        pass
    else:
        raise AssertionError("a bad key was accepted")
    await sdk.close()
    await bad.close()
