"""Chat streams whose upstream misbehaves, against a real Tollway with short stream deadlines
(`STREAM_KEEPALIVE` 0.2 s, `STREAM_IDLE_TIMEOUT` 1 s): a silent upstream gets keep-alive comments, an
upstream that sends its 200 and then nothing is ended by one error event and settled once, and events
that are not JSON pass as sent with one settlement on Tollway's count."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import Stack
from tests.fakes.openai import FakeOpenAI
from tests.harness import Running, make_config, serve
from tests.test_chat_sdk import CHAT, START, consume_logs, setup

BODY = {"model": CHAT, "messages": [{"role": "user", "content": "hi"}], "stream": True}


@pytest.fixture
async def quick(stack: Stack, tmp_path: Path) -> AsyncIterator[Running]:
    config = make_config(stack.database_url, tmp_path, stack.redis_url, stack.prefix, stream_keepalive=0.2,
                         stream_idle_timeout=1.0)
    async with serve(config) as running:
        yield running


async def read_stream(app: Running, key: str, until: bytes | None = None) -> bytes:
    """The stream's bytes as they came (up to `until`, when given)."""
    got = b""
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as http, http.stream(
            "POST", "/v1/chat/completions", json=BODY, headers={"Authorization": f"Bearer {key}"}) as reply:
        assert reply.status_code == 200
        async for chunk in reply.aiter_raw():
            got += chunk
            if until is not None and until in got:
                break
    return got


async def test_a_silent_upstream_gets_keep_alive_comments(quick: Running, openai_fake: FakeOpenAI) -> None:
    _, key = await setup(quick, openai_fake)
    openai_fake.hold_stream()  # the first event, then 0.5 s of silence: less than the idle timeout
    async with httpx.AsyncClient(base_url=quick.url, timeout=30) as http, http.stream(
            "POST", "/v1/chat/completions", json=BODY, headers={"Authorization": f"Bearer {key}"}) as reply:
        got = b""
        async for chunk in reply.aiter_raw():
            got += chunk
            if got.count(b": keep-alive\n\n") >= 2:
                openai_fake.release_stream()
            if got.endswith(b"data: [DONE]\n\n"):
                break
    first, rest = got.split(b"\n\n", 1)
    assert first.startswith(b"data: ") and rest.startswith(b": keep-alive\n\n")  # after the first event
    events = [e for e in got.split(b"\n\n") if e and not e.startswith(b":")]
    text = "".join(json.loads(e[6:])["choices"][0]["delta"].get("content") or ""
                   for e in events if e != b"data: [DONE]" and json.loads(e[6:])["choices"])
    assert text == openai_fake.text.reply  # the comments are the only bytes added
    (log,) = await consume_logs(quick)
    assert json.loads(log.other)["stream_interrupted"] is False


async def test_an_upstream_that_answers_200_then_nothing_is_ended_and_settled_once(
        quick: Running, openai_fake: FakeOpenAI) -> None:
    uid, key = await setup(quick, openai_fake)
    openai_fake.hold_stream()  # never released: the upstream stays silent
    got = await read_stream(quick, key)
    last = got.rstrip(b"\n").rsplit(b"\n\n", 1)[-1]
    error = json.loads(last.removeprefix(b"data: "))["error"]
    assert (error["code"], error["type"]) == ("upstream_timeout", "server_error") and b"[DONE]" not in got
    (log,) = await consume_logs(quick)
    assert json.loads(log.other)["stream_interrupted"] is True
    assert log.quota == 0  # only the role chunk reached the caller, and the upstream reported nothing
    assert await quick.state.quota.balance("user", uid) == START
    openai_fake.release_stream()


async def test_events_that_are_not_json_pass_as_sent_and_settle_once(quick: Running, openai_fake: FakeOpenAI
                                                                     ) -> None:
    uid, key = await setup(quick, openai_fake)
    raw = [b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hello there"}}]}\n\n',
           b"data: {not json at all\n\n", b"event: odd\ndata: still\ndata: not json\n\n", b"data: [DONE]\n\n"]
    openai_fake.text.raw_stream = raw
    assert await read_stream(quick, key) == b"".join(raw)  # byte for byte, nothing added or held
    (log,) = await consume_logs(quick)
    other = json.loads(log.other)
    assert other["usage_estimated"] is True and other["stream_interrupted"] is False
    assert log.completion_tokens == 3  # Tollway's count of what it could read: "Hello there"
    assert await quick.state.quota.balance("user", uid) == START - log.quota
