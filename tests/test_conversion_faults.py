"""Converted calls that go wrong (docs/CHAT.md#conversion, #streaming, #errors), on one stack: what the
conversion cannot carry is refused with a 400 naming the field before anything is sent; an upstream 4xx comes
back in the caller's shape; a converted stream cut by the upstream, left by its caller, or whose upstream
breaks the event grammar ends with one error event in the route's shape and is settled exactly once, on
what was delivered, marked `stream_interrupted`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import httpx
import openai
import pytest

from models.logs import Log
from server.upstream.estimate import count_all
from tests.fakes.anthropic import FakeAnthropic, event
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel
from tests.harness import Running
from tests.test_anthropic_sdk import body_error, consume_logs, cost
from tests.test_anthropic_sdk import client as claude_client
from tests.test_conversion_chat_sdk import client as chat_client
from tests.test_conversion_sdk import CHAT, CLAUDE, CLAUDE_TOOLS, HI, START, setup, sse


async def nothing_sent_or_charged(app: Running, uid: int, *fakes: FakeOpenAI | FakeAnthropic) -> None:
    assert all(fake.received == [] for fake in fakes)
    assert await consume_logs(app) == []
    assert await app.state.quota.balance("user", uid) == START


async def test_what_the_conversion_cannot_carry_is_a_400_naming_the_field(
        embedded_app: Running, openai_fake: FakeOpenAI, anthropic_fake: FakeAnthropic) -> None:
    app = embedded_app
    uid, key = await setup(app, openai=openai_fake, claude=anthropic_fake)
    messages = claude_client(app, key).messages
    document: list[Any] = [{"role": "user", "content": [
        {"type": "text", "text": "read this"},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "abc"}}]}]
    server_tool: dict[str, Any] = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    claude_cases: list[tuple[dict[str, Any], str]] = [
        ({"messages": document}, "messages[0].content[1]"),
        ({"messages": HI, "tools": [*CLAUDE_TOOLS, server_tool]}, "tools[2]")]
    for kwargs, field in claude_cases:
        with pytest.raises(anthropic.BadRequestError) as refused:
            await messages.create(model=CHAT, max_tokens=64, **kwargs)
        error = body_error(refused.value)
        assert error["type"] == "invalid_request_error" and error["message"].startswith(field), error
    completions = chat_client(app, key).chat.completions
    bad_arguments: list[Any] = [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "[1, 2]"}}]}]
    audio: list[Any] = [{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]}]
    chat_cases: list[tuple[dict[str, Any], str]] = [
        ({"messages": HI, "n": 2}, "n"), ({"messages": bad_arguments}, "messages[1]"),
        ({"messages": audio}, "messages[0]")]
    chat_cases.append(({"messages": [*HI, {"role": "function", "name": "f", "content": "x"}]},
                       "messages[1].role"))
    for kwargs, param in chat_cases:
        with pytest.raises(openai.BadRequestError) as bad:
            await completions.create(model=CLAUDE, **kwargs)
        body = bad.value.body
        assert isinstance(body, dict) and body["type"] == "invalid_request_error", body
        # `param` names the top-level field (as on every chat refusal), the message the whole path
        assert body["param"] == param.split("[")[0] and body["message"].startswith(param), body
    await nothing_sent_or_charged(app, uid, openai_fake, anthropic_fake)


async def test_an_upstream_4xx_is_reshaped_into_the_callers_format_and_not_retried_a_429_is(
        embedded_app: Running, openai_fake: FakeOpenAI, anthropic_fake: FakeAnthropic) -> None:
    app = embedded_app
    uid, key = await setup(app, openai=openai_fake, claude=anthropic_fake)
    openai_fake.fail("400", times=1)
    with pytest.raises(anthropic.BadRequestError) as from_openai:
        await claude_client(app, key).messages.create(model=CHAT, max_tokens=64, messages=HI)
    body = from_openai.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["request_id"] == from_openai.value.response.headers["request-id"]
    error = body["error"]
    assert (error["type"], error["details"]["error_code"]) == ("invalid_request_error", "upstream_error")
    assert "Invalid request (injected by the fake)." in error["message"]
    anthropic_fake.fail("400", times=1)
    with pytest.raises(openai.BadRequestError) as from_claude:
        await chat_client(app, key).chat.completions.create(model=CLAUDE, messages=HI)
    assert (from_claude.value.type, from_claude.value.code) == ("upstream_error", "400")
    assert "messages: Input should be a valid list" in from_claude.value.message
    assert (len(openai_fake.received), len(anthropic_fake.received)) == (1, 1)
    # a retried failure (429) with no other channel to try: 503 upstream_failed, in the caller's shape
    openai_fake.fail("429")
    with pytest.raises(anthropic.APIStatusError) as failed:
        await claude_client(app, key).messages.create(model=CHAT, max_tokens=64, messages=HI)
    assert failed.value.status_code == 503
    error = body_error(failed.value)
    assert (error["type"], error["details"]["error_code"]) == ("api_error", "upstream_failed")
    anthropic_fake.fail("429")
    with pytest.raises(openai.InternalServerError) as unavailable:
        await chat_client(app, key).chat.completions.create(model=CLAUDE, messages=HI)
    assert (unavailable.value.status_code, unavailable.value.code) == (503, "upstream_failed")
    assert await consume_logs(app) == []
    assert await app.state.quota.balance("user", uid) == START


async def settled_once(app: Running, uid: int) -> Log:
    """The call's one consume log, once it is written (a caller that left does not wait for it), after
    checking it is marked interrupted and charged by the formula."""
    for _ in range(100):
        logs = await consume_logs(app)
        if logs:
            break
        await asyncio.sleep(0.1)
    (log,) = logs
    other = json.loads(log.other)
    assert other["stream_interrupted"] is True and log.is_stream
    assert log.quota == cost(log.prompt_tokens, 0, 0, 0, log.completion_tokens)
    assert await app.state.quota.balance("user", uid) == START - log.quota
    return log


async def test_an_anthropic_callers_converted_stream_cut_upstream(
        embedded_app: Running, openai_fake: FakeOpenAI) -> None:
    app = embedded_app
    uid, key = await setup(app, openai=openai_fake)
    openai_fake.cut_after = 3  # the role chunk and two words, then the connection closes
    openai_fake.fail("drop_mid_stream", times=1)
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as http:
        reply = await http.post("/v1/messages", headers={"x-api-key": key},
                                json={"model": CHAT, "max_tokens": 64, "messages": HI, "stream": True})
    events = sse(reply.content)
    assert [name for name, _ in events] == ["message_start", "content_block_start", "content_block_delta",
                                            "content_block_delta", "error"]
    assert "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta") == "Hello from"
    error = events[-1][1]
    assert error["type"] == "error" and error["error"]["type"] == "api_error"
    assert f"(request id: {reply.headers['request-id']})" in error["error"]["message"]
    log = await settled_once(app, uid)
    assert json.loads(log.other)["usage_estimated"] is True  # the upstream sent no usage
    assert log.completion_tokens == count_all(["Hello from"]) and log.prompt_tokens > 0
    openai_fake.fail("drop_mid_stream", times=1)
    with pytest.raises(anthropic.APIStatusError):
        async with claude_client(app, key).messages.stream(model=CHAT, max_tokens=64, messages=HI) as stream:
            await stream.get_final_message()
    assert len(await consume_logs(app)) == 2


@pytest.mark.parametrize("after", [3, 9])
async def test_an_openai_callers_converted_stream_cut_upstream(
        embedded_app: Running, anthropic_fake: FakeAnthropic, after: int) -> None:
    app = embedded_app
    uid, key = await setup(app, claude=anthropic_fake)
    # 3: message_start, the text block's start and its first word; 9: all but message_stop (the text's
    # five words, the block's stop and message_delta with the output count)
    anthropic_fake.cut_after = after
    anthropic_fake.fail("drop_mid_stream", times=1)
    stream = await chat_client(app, key).chat.completions.create(model=CLAUDE, messages=HI, stream=True)
    received = []
    with pytest.raises(openai.APIError) as cut:
        async for chunk in stream:
            received.append(chunk)
    assert "request id" in cut.value.message
    text = "".join(c.choices[0].delta.content or "" for c in received if c.choices)
    finishes = [c.choices[0].finish_reason for c in received if c.choices and c.choices[0].finish_reason]
    log = await settled_once(app, uid)
    # the input message_start reported ("hi there": 2 + 5); the output message_delta reported, else
    # Tollway's count of what was delivered
    if after == 3:
        assert (text, finishes) == ("Hello", [])
        assert (log.prompt_tokens, log.completion_tokens) == (7, count_all(["Hello"]))
        assert json.loads(log.other)["usage_estimated"] is True
    else:
        assert (text, finishes) == (anthropic_fake.reply, ["stop"])
        assert (log.prompt_tokens, log.completion_tokens) == (7, 5)
        assert json.loads(log.other)["usage_estimated"] is False


@pytest.mark.parametrize("caller", ["anthropic", "openai"])
async def test_a_caller_who_leaves_a_converted_stream_is_settled_once(
        embedded_app: Running, openai_fake: FakeOpenAI, anthropic_fake: FakeAnthropic, caller: str) -> None:
    app = embedded_app
    uid, key = await setup(app, openai=openai_fake, claude=anthropic_fake)
    fake: FakeOpenAI | FakeAnthropic = openai_fake if caller == "anthropic" else anthropic_fake
    fake.hold_stream()  # the upstream sends its first event, then nothing until released
    path, model = ("/v1/messages", CHAT) if caller == "anthropic" else ("/v1/chat/completions", CLAUDE)
    body = {"model": model, "max_tokens": 64, "messages": HI, "stream": True}
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as http, http.stream(
            "POST", path, json=body, headers={"Authorization": f"Bearer {key}"}) as reply:
        assert reply.status_code == 200
        async for line in reply.aiter_lines():
            assert line.startswith(("event: message_start", "data: "))
            break  # the caller leaves after the first event
    log = await settled_once(app, uid)  # without waiting for the upstream, still holding its answer
    assert log.completion_tokens == 0  # no content reached the caller
    # only the input the upstream reported: none from OpenAI's role chunk, 7 in Anthropic's message_start
    assert log.prompt_tokens == (0 if caller == "anthropic" else 7)
    fake.release_stream()


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    data = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1, "model": CHAT,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def call_start(index: int, call_id: str, name: str) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "id": call_id, "type": "function",
                            "function": {"name": name, "arguments": ""}}]}


def arguments(index: int, fragment: str) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}


async def test_an_openai_upstream_that_breaks_the_tool_call_grammar_ends_the_stream_with_one_error(
        embedded_app: Running, openai_fake: FakeOpenAI) -> None:
    app = embedded_app
    uid, key = await setup(app, openai=openai_fake)
    openai_fake.text.raw_stream = [  # call 0's last fragment comes after call 1 opened (closing call 0)
        chunk({"role": "assistant", "content": ""}), chunk(call_start(0, "call_0", "get_weather")),
        chunk(arguments(0, '{"city":')), chunk(call_start(1, "call_1", "get_time")),
        chunk(arguments(0, '"Paris"}')), chunk(arguments(1, '{"city":"Tokyo"}')), chunk({}, "tool_calls"),
        b"data: [DONE]\n\n"]
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as http:
        reply = await http.post("/v1/messages", headers={"x-api-key": key}, json={
            "model": CHAT, "max_tokens": 64, "messages": HI, "tools": CLAUDE_TOOLS, "stream": True})
    events = sse(reply.content)
    assert [name for name, _ in events] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_stop",
        "content_block_start", "error"]
    assert [d["index"] for n, d in events if n.startswith("content_block")] == [0, 0, 0, 1]
    assert events[-1][1]["error"]["type"] == "api_error"
    await settled_once(app, uid)


async def test_an_anthropic_upstreams_error_event_ends_an_openai_callers_stream(
        embedded_app: Running, anthropic_fake: FakeAnthropic) -> None:
    app = embedded_app
    uid, key = await setup(app, claude=anthropic_fake)
    start: dict[str, Any] = {
        "id": "msg_x", "type": "message", "role": "assistant", "model": CLAUDE, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 1}}
    anthropic_fake.raw_stream = [
        event("message_start", {"type": "message_start", "message": start}),
        event("content_block_start", {"type": "content_block_start", "index": 0,
                                      "content_block": {"type": "text", "text": ""}}),
        event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                      "delta": {"type": "text_delta", "text": "Partial"}}),
        event("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})]
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as http:
        reply = await http.post("/v1/chat/completions", headers={"Authorization": f"Bearer {key}"},
                                json={"model": CLAUDE, "messages": HI, "stream": True})
    events = [data for _, data in sse(reply.content)]
    assert "[DONE]" not in events
    *chunks, last = events
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == "Partial"
    assert (last["error"]["type"], last["error"]["code"]) == ("server_error", "upstream_failed")
    assert f"(request id: {reply.headers['x-request-id']})" in last["error"]["message"]
    log = await settled_once(app, uid)
    assert (log.prompt_tokens, log.completion_tokens) == (12, count_all(["Partial"]))


async def test_an_upstream_404_is_a_not_found_error_for_an_anthropic_caller_and_an_upstream_error_for_openai(
        embedded_app: Running, openai_fake: FakeOpenAI, anthropic_fake: FakeAnthropic) -> None:
    app = embedded_app
    uid, key = await setup(app)
    # channels whose base_url has a path no fake serves: each answers its own format's 404
    await seed_channel(app.state, type=1, base_url=f"{openai_fake.url}/nowhere", models=CHAT)
    await seed_channel(app.state, type=14, base_url=f"{anthropic_fake.url}/nowhere", models=CLAUDE)
    with pytest.raises(anthropic.NotFoundError) as from_openai:
        await claude_client(app, key).messages.create(model=CHAT, max_tokens=64, messages=HI)
    body = from_openai.value.body
    assert isinstance(body, dict)
    error = body["error"]
    assert (error["type"], error["details"]["error_code"]) == ("not_found_error", "upstream_error")
    assert "Invalid URL (POST /nowhere/v1/chat/completions)" in error["message"]
    with pytest.raises(openai.NotFoundError) as from_claude:
        await chat_client(app, key).chat.completions.create(model=CLAUDE, messages=HI)
    assert (from_claude.value.type, from_claude.value.code) == ("upstream_error", "404")
    assert "Not Found (POST /nowhere/v1/messages)" in from_claude.value.message
    assert (len(openai_fake.received), len(anthropic_fake.received)) == (1, 1)  # not retried
    assert await consume_logs(app) == []
    assert await app.state.quota.balance("user", uid) == START
