"""Converted streams whose upstream goes silent, against a real Tollway in embedded mode with short stream
deadlines (`STREAM_KEEPALIVE` 0.2 s, `STREAM_IDLE_TIMEOUT` 1 s), docs/CHAT.md#streaming: the caller gets
keep-alive comments while the upstream is quiet, then one error event in the route's own shape
(`timeout_error` on /v1/messages, `upstream_timeout` on chat), and the call is settled once on what the
upstream reported and what was delivered."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import Stack
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai import FakeOpenAI
from tests.harness import Running, make_config, serve
from tests.test_anthropic_sdk import consume_logs, cost
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
    assert got.count(b": keep-alive\n\n") >= 2  # 0.2 s apart, within the 1 s of silence
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
