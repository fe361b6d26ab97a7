"""OpenAI's Responses API (`POST /v1/responses`) through the official openai SDK against a real Tollway on
every stack, with the fake OpenAI behind (tests/fakes/openai_responses.py): same-format pass-through to
OpenAI and Custom channels only, each call charged exactly the cost formula of the usage the fake reported
(cached input tokens at `CacheRatio`), one consume log; a cut stream ends with the Responses error event
and is settled once. Then the format's own rules on small fixtures, without a server."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.errors import InvalidRequest
from server.relay.pipeline import streamed_usage
from server.upstream.estimate import count_all
from server.upstream.formats.openai_responses import (
    RESPONSES,
    RESPONSES_FORMAT,
    ResponsesStream,
    read_responses,
    texts_of_responses,
    usage_of_responses,
)
from server.upstream.providers.base import Usage
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user
from tests.test_chat_sdk import START, client, consume_logs, cost

MODEL = "gpt-fake-resp"
TOOLS: list[Any] = [{"type": "function", "name": name, "description": f"the {name}",
                     "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                    "required": ["city"]}}
                    for name in ("get_weather", "get_time")]
USAGE = {"input_tokens": 2000, "input_tokens_details": {"cached_tokens": 1500}, "output_tokens": 300,
         "output_tokens_details": {"reasoning_tokens": 120}, "total_tokens": 2300}
TEXT_EVENTS = ["response.created", "response.in_progress", "response.output_item.added",
               "response.content_part.added", *["response.output_text.delta"] * 4,
               "response.output_text.done", "response.content_part.done", "response.output_item.done",
               "response.completed"]


async def setup(app: Running, fake: FakeOpenAI, *, channel_type: int = 1, quota: int = START,
                model_mapping: str = "") -> tuple[int, str]:
    uid = await add_user(app.state, "alice", quota=quota)
    _, key = await seed_key(app.state, uid, unlimited=True)
    await seed_channel(app.state, type=channel_type, base_url=fake.url, models=MODEL, key="upstream-key",
                       model_mapping=model_mapping)
    await app.state.options.put("ModelRatio", json.dumps({MODEL: 1.25}))
    await app.state.options.put("CompletionRatio", json.dumps({MODEL: 4}))
    await app.state.options.put("CacheRatio", json.dumps({MODEL: 0.5}))
    return uid, key


# ---- through the gateway ------------------------------------------------------------------------------


async def test_a_response_is_charged_by_the_cache_aware_formula(app: Running, openai_fake: FakeOpenAI
                                                                 ) -> None:
    uid, key = await setup(app, openai_fake)
    openai_fake.text.usage = USAGE
    reply = await client(app, key).responses.create(model=MODEL, input="hi there", instructions="be brief")
    assert reply.output_text == openai_fake.text.reply and reply.usage is not None
    assert reply.usage.input_tokens_details.cached_tokens == 1500  # the upstream's reply, unchanged
    upstream = openai_fake.last
    assert (upstream.path, upstream.headers["authorization"]) == ("/v1/responses", "Bearer upstream-key")
    assert upstream.json == {"model": MODEL, "input": "hi there", "instructions": "be brief"}
    (log,) = await consume_logs(app)
    assert log.quota == cost(2000, 1500, 300) == 3063
    assert (log.prompt_tokens, log.completion_tokens, log.is_stream) == (2000, 300, False)
    other = json.loads(log.other)
    assert (other["cache_read_tokens"], other["cache_write_tokens"], other["usage_estimated"]) == (
        1500, 0, False)
    assert (other["route"], other["request_path"], other["stream_interrupted"]) == (
        "responses", "/v1/responses", False)
    assert await app.state.quota.balance("user", uid) == START - 3063


async def test_a_streamed_response_passes_every_event_unchanged_and_is_charged_on_the_terminal_usage(
        app: Running, openai_fake: FakeOpenAI) -> None:
    uid, key = await setup(app, openai_fake)
    openai_fake.text.cached = 4
    stream = await client(app, key).responses.create(
        model=MODEL, input=[{"role": "user", "content": "one two three"}], stream=True)
    events = [event async for event in stream]
    assert [e.type for e in events] == TEXT_EVENTS
    assert [e.sequence_number for e in events] == list(range(len(TEXT_EVENTS)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == openai_fake.text.reply
    assert "stream_options" not in openai_fake.last.json  # nothing is injected into a Responses call
    given, output = 3 + 7, len(openai_fake.text.reply.split())
    final = events[-1].response
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (given, output)
    (log,) = await consume_logs(app)
    assert log.is_stream and (log.prompt_tokens, log.completion_tokens) == (given, output)
    other = json.loads(log.other)
    assert (other["cache_read_tokens"], other["usage_estimated"], other["stream_interrupted"]) == (
        4, False, False)
    assert log.quota == cost(given, 4, output)
    assert await app.state.quota.balance("user", uid) == START - log.quota


async def test_the_stream_helper_assembles_two_function_calls(app: Running, openai_fake: FakeOpenAI) -> None:
    _, key = await setup(app, openai_fake)
    openai_fake.text.tool_calls = [("get_weather", {"city": "Paris"}), ("get_time", {"city": "Tokyo"})]
    sdk = client(app, key)
    async with sdk.responses.stream(model=MODEL, input="weather and time?", tools=TOOLS) as stream:
        final = await stream.get_final_response()
    calls = [(o.call_id, o.name, json.loads(o.arguments)) for o in final.output if o.type == "function_call"]
    assert calls == [("call_0", "get_weather", {"city": "Paris"}), ("call_1", "get_time", {"city": "Tokyo"})]
    (log,) = await consume_logs(app)
    assert log.is_stream and json.loads(log.other)["usage_estimated"] is False
    assert log.quota == cost(log.prompt_tokens, 0, log.completion_tokens)


async def test_the_body_goes_up_byte_for_byte_and_a_mapped_model_is_the_only_change(
        app: Running, openai_fake: FakeOpenAI) -> None:
    _, key = await setup(app, openai_fake, channel_type=8, model_mapping=json.dumps({MODEL: "upstream-m"}))
    await seed_channel(app.state, type=1, base_url=openai_fake.url, models="plain-m")
    await app.state.options.put("ModelRatio", json.dumps({MODEL: 1.25, "plain-m": 1}))
    body = b'{"model":  "plain-m", "input": [{"role": "user", "content": "hi"}],\n "store": false, "x": [1]}'
    async with httpx.AsyncClient(base_url=app.url, headers={"Authorization": f"Bearer {key}"}) as http:
        plain = await http.post("/v1/responses", content=body, headers={"content-type": "application/json"})
        assert plain.status_code == 200, plain.text
        assert openai_fake.last.body == body
        mapped = await http.post("/v1/responses", json={"model": MODEL, "input": "hi", "store": False,
                                                        "previous_response_id": "resp_1", "stream": True})
        assert mapped.status_code == 200 and mapped.headers["content-type"] == "text/event-stream"
    assert openai_fake.last.json == {"model": "upstream-m", "input": "hi", "store": False,
                                     "previous_response_id": "resp_1", "stream": True}
    logs = await consume_logs(app)
    assert [log.model_name for log in logs] == ["plain-m", MODEL]
    assert json.loads(logs[1].other)["upstream_model_name"] == "upstream-m"


async def test_a_stream_cut_upstream_ends_with_the_error_event_and_is_settled_once(
        app: Running, openai_fake: FakeOpenAI) -> None:
    uid, key = await setup(app, openai_fake)
    openai_fake.cut_after = 6  # created, in_progress, item, part, "Hello", " from"; then the line drops
    openai_fake.fail("drop_mid_stream", times=1)
    stream = await client(app, key).responses.create(model=MODEL, input="hi", stream=True)
    events = [event async for event in stream]
    assert [e.type for e in events] == [*TEXT_EVENTS[:6], "error"]
    error = events[-1]
    assert (error.code, error.param, error.sequence_number) == ("upstream_failed", None, 6)
    assert "request id" in error.message
    (log,) = await consume_logs(app)
    other = json.loads(log.other)
    assert other["stream_interrupted"] is True and other["usage_estimated"] is True
    assert log.completion_tokens == 3  # Tollway's count of "Hello from": ceil(10 / 4)
    assert log.quota == cost(log.prompt_tokens, 0, 3)
    assert await app.state.quota.balance("user", uid) == START - log.quota
    # the stream helper sees no `response.completed` and raises
    openai_fake.fail("drop_mid_stream", times=1)
    with pytest.raises(RuntimeError, match=r"response\.completed"):
        async with client(app, key).responses.stream(model=MODEL, input="hi") as helper:
            await helper.get_final_response()
    assert len(await consume_logs(app)) == 2


async def test_the_output_cap_is_what_is_reserved(app: Running, openai_fake: FakeOpenAI) -> None:
    # a reservation of max(estimate, 500) input + the cap × 4, × 1.25: 5745 with the default 1024, 675 with 10
    uid, key = await setup(app, openai_fake, quota=1000)
    sdk = client(app, key)
    with pytest.raises(openai.RateLimitError) as short:
        await sdk.responses.create(model=MODEL, input="hi")
    assert short.value.code == "insufficient_quota" and openai_fake.received == []
    await sdk.responses.create(model=MODEL, input="hi", max_output_tokens=10)
    assert openai_fake.last.json["max_output_tokens"] == 10
    (log,) = await consume_logs(app)
    assert await app.state.quota.balance("user", uid) == 1000 - log.quota


async def test_channels_of_other_openai_format_types_do_not_serve_responses(
        app: Running, openai_fake: FakeOpenAI) -> None:
    _, key = await setup(app, openai_fake, channel_type=20)  # OpenRouter: chat completions only
    sdk = client(app, key)
    with pytest.raises(openai.NotFoundError) as refused:
        await sdk.responses.create(model=MODEL, input="hi")
    assert refused.value.code == "model_not_found" and MODEL in refused.value.message
    assert openai_fake.received == []
    await sdk.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert openai_fake.last.path == "/v1/chat/completions"  # the channel itself serves chat


async def test_bad_bodies_are_refused_naming_the_field_before_anything_is_sent(
        app: Running, openai_fake: FakeOpenAI) -> None:
    uid, key = await setup(app, openai_fake)
    async with httpx.AsyncClient(base_url=app.url, headers={"Authorization": f"Bearer {key}"}) as http:
        for body, param in (({"input": "hi"}, "model"),
                            ({"model": "", "input": "hi"}, "model"),
                            ({"model": MODEL, "input": 5}, "input"),
                            ({"model": MODEL, "input": {"role": "user"}}, "input"),
                            ({"model": MODEL, "input": "hi", "stream": "yes"}, "stream"),
                            ({"model": MODEL, "input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
                            ({"model": MODEL, "input": "hi", "max_output_tokens": True}, "max_output_tokens"),
                            ({"model": MODEL, "input": "hi", "max_output_tokens": 1.5}, "max_output_tokens"),
                            ({"model": MODEL, "input": "hi", "background": True}, "background")):
            r = await http.post("/v1/responses", json=body)
            assert r.status_code == 400, (body, r.text)
            error = r.json()["error"]
            assert (error["param"], error["code"]) == (param, "invalid_request"), body
            assert error["message"].startswith(param)
    assert openai_fake.received == []
    assert await consume_logs(app) == []
    assert await app.state.quota.balance("user", uid) == START


async def test_stored_responses_and_compaction_are_not_served(app: Running, openai_fake: FakeOpenAI) -> None:
    _, key = await setup(app, openai_fake)
    sdk = client(app, key)
    for call in (sdk.responses.retrieve("resp_1"), sdk.responses.delete("resp_1")):
        with pytest.raises(openai.NotFoundError):
            await call
    async with httpx.AsyncClient(base_url=app.url, headers={"Authorization": f"Bearer {key}"}) as http:
        for method, path in (("GET", "/v1/responses/resp_1"), ("DELETE", "/v1/responses/resp_1"),
                             ("POST", "/v1/responses/compact"), ("GET", "/v1/responses/resp_1/input_items")):
            r = await http.request(method, path, json={"model": MODEL, "input": "hi"})
            assert r.status_code == 404, (method, path, r.text)
            error = r.json()["error"]  # OpenAI's shape, not the /api envelope
            assert (error["type"], error["code"]) == ("invalid_request_error", "not_found")
            assert error["message"].startswith("no such route (request id: ")
    assert openai_fake.received == []


# ---- the format, without a server ---------------------------------------------------------------------


def test_responses_usage_is_normalized_with_cache_reads() -> None:
    assert usage_of_responses(USAGE) == Usage(500, 300, cache_read=1500)
    assert usage_of_responses({"input_tokens": 5, "input_tokens_details": {"cached_tokens": 9}}) == Usage(
        0, 0, cache_read=9)  # more cached than given: the uncached input is 0, never below
    assert usage_of_responses({"input_tokens": 7, "output_tokens": 2}) == Usage(7, 2)
    assert usage_of_responses({"input_tokens": True, "output_tokens": -3, "input_tokens_details": None}) == (
        Usage(0, 0))
    assert usage_of_responses(None) is None and usage_of_responses([1]) is None


@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=0, max_value=10**9),
       st.integers(min_value=0, max_value=10**9))
def test_every_input_token_is_counted_once(given_: int, cached: int, output: int) -> None:
    usage = usage_of_responses({"input_tokens": given_, "input_tokens_details": {"cached_tokens": cached},
                                "output_tokens": output})
    assert usage is not None and usage.input >= 0 and usage.cache_read == cached
    assert usage.prompt == max(given_, cached) and usage.output == output


def test_a_body_gives_the_estimate_texts_and_the_cap() -> None:
    asked = read_responses(json.dumps({
        "model": "m", "instructions": "be brief", "max_output_tokens": 64, "stream": True,
        "input": [{"role": "user", "content": "plain"},
                  {"type": "message", "role": "user", "content": [
                      {"type": "input_text", "text": "part"}, {"type": "input_image", "image_url": "x"}]},
                  {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": "c", "output": "sunny"}, "stray"]}).encode())
    assert (asked.model, asked.stream, asked.completion_tokens, asked.floor) == ("m", True, 64, True)
    assert asked.texts == ["plain", "part", "{}", "sunny", "be brief"]
    plain = read_responses(b'{"model": "m", "input": "hi", "stream": null, "background": false}')
    assert (plain.texts, plain.stream, plain.completion_tokens) == (["hi"], False, None)
    assert read_responses(b'{"model": "m", "previous_response_id": "r"}').texts == []
    with pytest.raises(InvalidRequest) as refused:
        read_responses(b'{"model": "m", "background": true}')
    assert refused.value.param == "background" and refused.value.message.startswith("background")


def test_a_reply_gives_its_text_and_function_calls() -> None:
    reply = {"output": [
        {"type": "reasoning", "summary": []},
        {"type": "message", "content": [{"type": "output_text", "text": "hello"},
                                        {"type": "refusal", "refusal": "no"}]},
        {"type": "function_call", "name": "f", "arguments": "{\"a\":1}"}]}
    assert texts_of_responses(reply) == ["hello", "no", "f", "{\"a\":1}"]
    assert texts_of_responses({"output": None}) == [] and texts_of_responses(None) == []


def sse(kind: str, number: int, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: ".encode() + json.dumps(
        {"type": kind, "sequence_number": number, **fields}).encode() + b"\n\n"


def mapper() -> ResponsesStream:
    asked = read_responses(b'{"model": "m", "input": "hello there", "stream": true}')
    stream = RESPONSES_FORMAT.exchange(1).stream(RESPONSES, asked, object(), count_all)  # type: ignore[arg-type]
    assert isinstance(stream, ResponsesStream)
    return stream


@pytest.mark.parametrize("terminal", ["response.completed", "response.incomplete", "response.failed"])
def test_the_stream_is_written_unchanged_and_billed_on_the_terminal_usage(terminal: str) -> None:
    stream = mapper()
    events = [sse("response.created", 0, response={"usage": None}),
              sse("response.output_item.added", 1, item={"type": "function_call", "name": "f"}),
              sse("response.function_call_arguments.delta", 2, delta="{}"),
              sse("response.output_text.delta", 3, delta="Hi"),
              sse(terminal, 4, response={"usage": USAGE})]
    assert [stream.event(e) for e in events] == events and stream.end() == b""
    assert stream.delivered() == ["f", "{}", "Hi"]
    assert stream.usage == Usage(500, 300, cache_read=1500)
    assert streamed_usage(stream, 40, interrupted=False) == Usage(500, 300, cache_read=1500)


def test_the_error_event_of_a_cut_stream_is_numbered_after_the_last_event() -> None:
    first = mapper()
    assert json.loads(data_lines(first.error(503, "upstream_failed", "cut")))["sequence_number"] == 0
    stream = mapper()
    stream.event(sse("response.created", 0, response={}))
    stream.event(sse("response.output_text.delta", 7, delta="Hello from"))
    written = stream.error(504, "upstream_timeout", "idle (request id: r1)")
    assert written.startswith(b"event: error\ndata: ") and written.endswith(b"\n\n")
    assert json.loads(data_lines(written)) == {"type": "error", "code": "upstream_timeout",
                                               "message": "idle (request id: r1)", "param": None,
                                               "sequence_number": 8}
    assert streamed_usage(stream, 40, interrupted=True) == Usage(40, 3, estimated=True)


def data_lines(event: bytes) -> bytes:
    return b"".join(line[6:] for line in event.splitlines() if line.startswith(b"data: "))
