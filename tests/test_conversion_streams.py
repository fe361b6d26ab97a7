"""Converted streams whose upstream goes silent, against a real Tollway in embedded mode with short stream
deadlines (`STREAM_KEEPALIVE` 0.2 s, `STREAM_IDLE_TIMEOUT` 1 s), docs/CHAT.md#streams: the caller gets
keep-alive comments while the upstream is quiet, then one error event in the route's own shape
(`timeout_error` on /v1/messages, `upstream_timeout` on chat), and the call is settled once on what the
upstream reported and what was delivered. And each converted event is written as it comes: the first
reaches the caller while the upstream holds the rest."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import Stack
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai import FakeOpenAI
from tests.harness import Running, make_config, serve
from tests.test_anthropic_sdk import client as claude_client
from tests.test_anthropic_sdk import consume_logs, cost
from tests.test_conversion_chat_sdk import client as chat_client
from tests.test_conversion_sdk import CHAT, CLAUDE, HI, START, setup, sse


@pytest.fixture
async def quick(embedded_stack: Stack, tmp_path: Path) -> AsyncIterator[Running]:
    config = make_config(embedded_stack.database_url, tmp_path, stream_keepalive=0.2, stream_idle_timeout=1.0)
    async with serve(config) as running:
        yield running


@pytest.mark.parametrize("caller", ["anthropic", "openai"])
async def test_a_silent_upstream_gets_keep_alives_then_one_timeout_error_in_the_callers_shape(
        quick: Running, openai_fake: FakeOpenAI, anthropic_fake: FakeAnthropic, caller: str) -> None:
    uid, key = await setup(quick, openai=openai_fake, claude=anthropic_fake)
    fake: FakeOpenAI | FakeAnthropic = openai_fake if caller == "anthropic" else anthropic_fake
    fake.hold_stream()  # the first event, then silence until released
    path, model = ("/v1/messages", CHAT) if caller == "anthropic" else ("/v1/chat/completions", CLAUDE)
    got = b""
    async with httpx.AsyncClient(base_url=quick.url, timeout=30) as http, http.stream(
            "POST", path, json={"model": model, "max_tokens": 64, "messages": HI, "stream": True},
            headers={"Authorization": f"Bearer {key}"}) as reply:
        assert reply.status_code == 200
        async for piece in reply.aiter_raw():
            got += piece
    fake.release_stream()
    assert b": keep-alive\n\n" in got  # every 0.2 s of the 1 s of silence
    events = sse(got)
    name, last = events[-1]
    if caller == "anthropic":
        assert [n for n, _ in events] == ["message_start", "error"]
        assert name == "error" and last["error"]["type"] == "timeout_error"
    else:
        assert [e["choices"][0]["delta"] for _, e in events[:-1]] == [{"role": "assistant", "content": ""}]
        assert (last["error"]["code"], last["error"]["type"]) == ("upstream_timeout", "server_error")
        assert b"[DONE]" not in got
    (log,) = await consume_logs(quick)
    assert json.loads(log.other)["stream_interrupted"] is True and log.completion_tokens == 0
    # nothing delivered: only the input the upstream reported (none in OpenAI's role chunk, 7 in
    # Anthropic's message_start) is charged
    assert log.prompt_tokens == (0 if caller == "anthropic" else 7)
    assert log.quota == cost(log.prompt_tokens, 0, 0, 0, 0)
    assert await quick.state.quota.balance("user", uid) == START - log.quota


@pytest.mark.parametrize("caller", ["anthropic", "openai"])
async def test_the_first_converted_event_reaches_the_caller_while_the_upstream_holds_the_rest(
        embedded_app: Running, openai_fake: FakeOpenAI, anthropic_fake: FakeAnthropic, caller: str) -> None:
    _, key = await setup(embedded_app, openai=openai_fake, claude=anthropic_fake)
    if caller == "anthropic":
        openai_fake.hold_stream()  # the role chunk, then nothing until released
        async with claude_client(embedded_app, key).messages.stream(model=CHAT, max_tokens=64,
                                                                    messages=HI) as stream:
            events = stream.__aiter__()
            first = await asyncio.wait_for(events.__anext__(), 10)
            assert first.type == "message_start" and openai_fake.chunks_sent == 1
            openai_fake.release_stream()
            text = "".join([piece async for piece in stream.text_stream])
        assert text == openai_fake.text.reply
    else:
        anthropic_fake.hold_stream()  # message_start, then nothing until released
        chunks = await chat_client(embedded_app, key).chat.completions.create(model=CLAUDE, messages=HI,
                                                                              stream=True)
        iterator = chunks.__aiter__()
        head = await asyncio.wait_for(iterator.__anext__(), 10)
        assert head.choices[0].delta.role == "assistant" and anthropic_fake.chunks_sent == 1
        anthropic_fake.release_stream()
        rest = "".join([c.choices[0].delta.content or "" async for c in iterator if c.choices])
        assert rest == anthropic_fake.reply
