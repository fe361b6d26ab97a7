"""The OpenAI chat ⇄ Anthropic Messages conversion, unit by unit (docs/CHAT.md#conversion): requests both
ways as the tables say, replies, streams event by event (tool calls indexed over tool blocks only, usage
read as cumulative, a fragment for a closed block or an upstream error ending the stream), stop reasons,
and the blocks and tools that are refused rather than dropped. The end-to-end runs through the official
SDKs are tests/test_conversion_sdk.py's."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from server.errors import InvalidRequest
from server.upstream.estimate import count_all
from server.upstream.formats.anthropic_messages import MESSAGES, read_messages
from server.upstream.formats.base import StreamBroken
from server.upstream.formats.chat_routes import CHAT_FORMAT, MESSAGES_FORMAT
from server.upstream.formats.chat_via_anthropic import ChatFromAnthropicStream, messages_request
from server.upstream.formats.messages_via_openai import chat_request
from server.upstream.formats.openai_chat import CHAT, read_chat
from server.upstream.formats.sse import Events, data_of, name_of
from server.upstream.providers.base import Asked, Usage


class Target:
    base_url = "http://upstream.test"
    header_override: dict[str, Any] = {}
    stream_include_usage = True

    def __init__(self, type_: int) -> None:
        self.type = type_


def chat(body: dict[str, Any], **extra: Any) -> Asked:
    return replace(read_chat(json.dumps(body).encode()), request_id="rid", **extra)


def messages(body: dict[str, Any]) -> Asked:
    return replace(read_messages(json.dumps(body).encode()), request_id="rid")


def events_of(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    """Anthropic-style events: (name, data)."""
    out = []
    for event in Events().feed(raw):
        out.append((name_of(event).decode(), json.loads(data_of(event))))
    return out


def chunks_of(raw: bytes) -> list[Any]:
    """OpenAI-style chunks: their data decoded ("[DONE]" as is)."""
    out: list[Any] = []
    for event in Events().feed(raw):
        data = data_of(event)
        out.append(data.decode() if data == b"[DONE]" else json.loads(data))
    return out


def sse(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, usage: dict[str, Any] | None = None,
          *, choices: bool = True) -> bytes:
    first = {"index": 0, "delta": delta or {}, "finish_reason": finish}
    body: dict[str, Any] = {"id": "up", "object": "chat.completion.chunk", "created": 1, "model": "up-model",
                            "choices": [first] if choices else []}
    if usage is not None:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n".encode()


# ---- requests ----------------------------------------------------------------------------------------------

AGENT_CHAT = {
    "model": "claude", "user": "u1", "stop": "END", "temperature": 1.7, "top_p": 0.9,
    "parallel_tool_calls": False,
    "tools": [{"type": "function", "function": {"name": "read", "description": "read a file",
                                                "parameters": {"type": "object", "properties": {"p": {}}}}},
              {"type": "function", "function": {"name": "ls"}}],
    "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": [
            {"type": "text", "text": "fix it"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "assistant", "content": "Reading.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"p": "a.py"}'}},
            {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "print(1)"},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "a.py"}]},
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "go on"},
    ]}


def test_a_chat_request_becomes_a_messages_request_as_the_table_says() -> None:
    out = messages_request(chat(AGENT_CHAT), "claude-upstream")
    assert out["model"] == "claude-upstream" and out["max_tokens"] == 8192  # no cap: the default
    assert out["system"] == [{"type": "text", "text": "You are a coding agent."},
                             {"type": "text", "text": "Be brief."}]  # every system / developer, in order
    assert out["messages"] == [
        {"role": "user", "content": [
            {"type": "text", "text": "fix it"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "c1", "name": "read", "input": {"p": "a.py"}},
            {"type": "tool_use", "id": "c2", "name": "ls", "input": {}}]},
        {"role": "user", "content": [  # the tool results and the user message after them: one turn
            {"type": "tool_result", "tool_use_id": "c1", "content": "print(1)"},
            {"type": "tool_result", "tool_use_id": "c2", "content": "a.py"},
            {"type": "text", "text": "go on"}]}]
    assert out["stop_sequences"] == ["END"] and out["temperature"] == 1 and out["top_p"] == 0.9
    assert out["tools"] == [{"name": "read", "description": "read a file",
                             "input_schema": {"type": "object", "properties": {"p": {}}}},
                            {"name": "ls", "input_schema": {"type": "object"}}]
    assert out["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert out["metadata"] == {"user_id": "u1"} and "stream" not in out


@pytest.mark.parametrize(("choice", "expected"), [
    ("auto", {"type": "auto"}), ("none", {"type": "none"}), ("required", {"type": "any"}),
    ({"type": "function", "function": {"name": "ls"}}, {"type": "tool", "name": "ls"})])
def test_tool_choice_maps(choice: Any, expected: dict[str, Any]) -> None:
    body = {"model": "c", "messages": [{"role": "user", "content": "hi"}], "tool_choice": choice,
            "max_completion_tokens": 7, "max_tokens": 9, "stream": True, "stop": ["a", "b"]}
    out = messages_request(chat(body), "c")
    assert out["tool_choice"] == expected
    assert out["max_tokens"] == 7 and out["stream"] is True and out["stop_sequences"] == ["a", "b"]


def test_the_default_cap_comes_from_the_call() -> None:
    body = {"model": "c", "messages": [{"role": "user", "content": "hi"}]}
    assert messages_request(chat(body, default_cap=333), "c")["max_tokens"] == 333


@pytest.mark.parametrize(("change", "field"), [
    ({"n": 2}, "n: must be 1"),
    ({"messages": [{"role": "function", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]},
     "messages[0].content[0]"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x"}}]}]},
     "messages[0].content[0].image_url.url"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f",
                                                                                 "arguments": "[1]"}}]}]},
     "messages[0].tool_calls[0].function.arguments"),
    ({"tools": [{"type": "custom", "custom": {"name": "x"}}]}, "tools[0]"),
    ({"tool_choice": "sometimes"}, "tool_choice")])
def test_what_a_claude_model_cannot_take_is_a_400_naming_the_field(change: dict[str, Any],
                                                                   field: str) -> None:
    body = {"model": "c", "messages": [{"role": "user", "content": "hi"}], **change}
    with pytest.raises(InvalidRequest) as refused:
        messages_request(chat(body), "c")
    assert str(refused.value).startswith(field)


AGENT_MESSAGES = {
    "model": "m", "max_tokens": 100, "stop_sequences": ["X"], "temperature": 0.5, "top_k": 5,
    "metadata": {"user_id": "u9"}, "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
    "system": [{"type": "text", "text": "sys one", "cache_control": {"type": "ephemeral"}},
               {"type": "text", "text": "sys two"}],
    "tools": [{"name": "read", "description": "read a file", "input_schema": {"type": "object"},
               "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "text", "text": "Let me "}, {"type": "text", "text": "look."},
            {"type": "tool_use", "id": "t1", "name": "read", "input": {"p": "a.py"}},
            {"type": "tool_use", "id": "t2", "name": "read", "input": {"p": "b.py"}}]},
        {"role": "user", "content": [
            {"type": "text", "text": "and then", "cache_control": {"type": "ephemeral"}},
            {"type": "tool_result", "tool_use_id": "t1", "content": "one"},
            {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "two"}]},
            {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}]}]}


@pytest.mark.parametrize(("channel_type", "cap"), [(1, "max_completion_tokens"), (43, "max_tokens"),
                                                   (24, "max_tokens")])
def test_a_messages_request_becomes_a_chat_request_as_the_table_says(channel_type: int, cap: str) -> None:
    out = chat_request(messages(AGENT_MESSAGES), "up", Target(channel_type))
    assert out["messages"] == [
        {"role": "system", "content": "sys one\n\nsys two"},
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "read", "arguments": '{"p":"a.py"}'}},
            {"id": "t2", "type": "function", "function": {"name": "read", "arguments": '{"p":"b.py"}'}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "one"},  # the results first
        {"role": "tool", "tool_call_id": "t2", "content": "two"},
        {"role": "user", "content": [{"type": "text", "text": "and then"},
                                     {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}]
    assert out[cap] == 100 and out["model"] == "up" and out["stop"] == ["X"] and out["temperature"] == 0.5
    assert "top_k" not in out and "stream" not in out and out["user"] == "u9"
    assert out["tool_choice"] == "required" and out["parallel_tool_calls"] is False
    assert out["tools"] == [{"type": "function", "function": {"name": "read", "description": "read a file",
                                                              "parameters": {"type": "object"}}}]
    streamed = chat_request(messages({**AGENT_MESSAGES, "stream": True}), "up",
                            Target(channel_type))
    assert streamed["stream"] is True and streamed["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(("change", "field"), [
    ({"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]},
     "messages[0].content[0].type"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "file"}}]}]},
     "messages[0].content[0].source")])
def test_what_an_openai_model_cannot_take_is_a_400_naming_the_field(change: dict[str, Any],
                                                                    field: str) -> None:
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], **change}
    with pytest.raises(InvalidRequest) as refused:
        chat_request(messages(body), "m", Target(1))
    assert str(refused.value).startswith(field)


def test_an_agents_conversation_round_trips_through_both_directions() -> None:
    """Anthropic → OpenAI → Anthropic gives back the conversation (what the tables carry both ways)."""
    there = chat_request(messages(AGENT_MESSAGES), "m", Target(43))
    back = messages_request(chat({**there, "model": "m"}), "m")
    assert back["system"] == [{"type": "text", "text": "sys one\n\nsys two"}]
    assert back["messages"][1]["content"] == [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "t1", "name": "read", "input": {"p": "a.py"}},
        {"type": "tool_use", "id": "t2", "name": "read", "input": {"p": "b.py"}}]
    assert back["messages"][2]["content"][:2] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "one"},
        {"type": "tool_result", "tool_use_id": "t2", "content": "two"}]
    assert back["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert back["max_tokens"] == 100 and back["tools"][0]["input_schema"] == {"type": "object"}


# ---- replies -----------------------------------------------------------------------------------------------

def test_an_anthropic_message_becomes_a_chat_completion() -> None:
    message = {"id": "msg_up", "type": "message", "role": "assistant", "model": "claude-up",
               "content": [{"type": "thinking", "thinking": "…", "signature": "s"},
                           {"type": "text", "text": "Two calls:"},
                           {"type": "tool_use", "id": "t1", "name": "a", "input": {"x": 1}},
                           {"type": "tool_use", "id": "t2", "name": "b", "input": {}}],
               "stop_reason": "tool_use",
               "usage": {"input_tokens": 100, "cache_read_input_tokens": 4000,
                         "cache_creation_input_tokens": 1200, "output_tokens": 500,
                         "cache_creation": {"ephemeral_5m_input_tokens": 1000,
                                            "ephemeral_1h_input_tokens": 200}}}
    asked = chat({"model": "claude", "messages": [{"role": "user", "content": "hi"}]})
    answer = CHAT_FORMAT.exchange(14).reply(CHAT, asked, json.dumps(message).encode())
    assert answer.usage == Usage(100, 500, cache_read=4000, cache_write_5m=1000, cache_write_1h=200)
    body = json.loads(answer.body)
    assert (body["id"], body["object"], body["model"]) == ("chatcmpl-rid", "chat.completion", "claude")
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] == "Two calls:"
    assert [c["function"] for c in choice["message"]["tool_calls"]] == [
        {"name": "a", "arguments": '{"x":1}'}, {"name": "b", "arguments": "{}"}]
    assert body["usage"] == {"prompt_tokens": 5300, "completion_tokens": 500, "total_tokens": 5800,
                             "prompt_tokens_details": {"cached_tokens": 4000}}


def test_a_chat_completion_becomes_an_anthropic_message() -> None:
    completion = {"id": "up", "object": "chat.completion", "model": "gpt-up", "choices": [{
        "index": 0, "finish_reason": "length", "message": {
            "role": "assistant", "content": "Hi", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": [1]}'}},
                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "not json"}}]}}],
        "usage": {"prompt_tokens": 2000, "completion_tokens": 300,
                  "prompt_tokens_details": {"cached_tokens": 1500}}}
    asked = messages({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    answer = MESSAGES_FORMAT.exchange(1).reply(MESSAGES, asked, json.dumps(completion).encode())
    assert answer.usage == Usage(500, 300, cache_read=1500)
    body = json.loads(answer.body)
    assert (body["id"], body["type"], body["model"], body["stop_reason"]) == ("msg_rid", "message", "m",
                                                                              "max_tokens")
    assert body["content"] == [{"type": "text", "text": "Hi"},
                               {"type": "tool_use", "id": "c1", "name": "f", "input": {"a": [1]}},
                               {"type": "tool_use", "id": "c2", "name": "g", "input": {}}]
    assert body["usage"] == {"input_tokens": 500, "cache_read_input_tokens": 1500,
                             "cache_creation_input_tokens": 0, "output_tokens": 300}


def test_a_reply_without_usage_is_billed_on_the_count_the_reply_shows() -> None:
    asked = messages({"model": "m", "max_tokens": 5,
                      "messages": [{"role": "user", "content": "hello there"}]})
    completion = {"choices": [{"index": 0, "finish_reason": "stop", "message": {"content": "a reply"}}]}
    answer = MESSAGES_FORMAT.exchange(43).reply(MESSAGES, asked, json.dumps(completion).encode())
    assert answer.usage == Usage(count_all(["hello there"]), count_all(["a reply"]), estimated=True)
    assert json.loads(answer.body)["usage"]["output_tokens"] == count_all(["a reply"])


@pytest.mark.parametrize(("reason", "finish"), [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("pause_turn", "stop"), ("max_tokens", "length"),
    ("model_context_window_exceeded", "length"), ("tool_use", "tool_calls"), ("refusal", "content_filter"),
    ("something_new", "stop")])
def test_stop_reasons_become_finish_reasons(reason: str, finish: str) -> None:
    asked = chat({"model": "c", "messages": [{"role": "user", "content": "hi"}]})
    body = {"content": [], "stop_reason": reason, "usage": {"input_tokens": 1, "output_tokens": 1}}
    answer = CHAT_FORMAT.exchange(14).reply(CHAT, asked, json.dumps(body).encode())
    assert json.loads(answer.body)["choices"][0]["finish_reason"] == finish


@pytest.mark.parametrize(("finish", "reason"), [
    ("stop", "end_turn"), ("length", "max_tokens"), ("tool_calls", "tool_use"), ("function_call", "tool_use"),
    ("content_filter", "refusal"), ("weird", "end_turn")])
def test_finish_reasons_become_stop_reasons(finish: str, reason: str) -> None:
    asked = messages({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    body = {"choices": [{"index": 0, "finish_reason": finish, "message": {"content": "x"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
    answer = MESSAGES_FORMAT.exchange(1).reply(MESSAGES, asked, json.dumps(body).encode())
    assert json.loads(answer.body)["stop_reason"] == reason


# ---- streams: Anthropic upstream → OpenAI caller -----------------------------------------------------------

def anthropic_stream(*, usage_start: dict[str, Any], usage_delta: dict[str, Any]) -> list[bytes]:
    return [
        sse("message_start", {"type": "message_start", "message": {
            "id": "msg_up", "type": "message", "role": "assistant", "content": [], "usage": usage_start}}),
        sse("ping", {"type": "ping"}),
        sse("content_block_start", {"type": "content_block_start", "index": 0,
                                    "content_block": {"type": "thinking", "thinking": ""}}),
        sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                    "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
        sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                    "delta": {"type": "signature_delta", "signature": "sig"}}),
        sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        sse("content_block_start", {"type": "content_block_start", "index": 1,
                                    "content_block": {"type": "text", "text": ""}}),
        sse("content_block_delta", {"type": "content_block_delta", "index": 1,
                                    "delta": {"type": "text_delta", "text": "Calling two."}}),
        sse("content_block_stop", {"type": "content_block_stop", "index": 1}),
        sse("content_block_start", {"type": "content_block_start", "index": 2,
                                    "content_block": {"type": "tool_use", "id": "t1", "name": "a",
                                                      "input": {}}}),
        sse("content_block_delta", {"type": "content_block_delta", "index": 2,
                                    "delta": {"type": "input_json_delta", "partial_json": '{"x":'}}),
        sse("content_block_delta", {"type": "content_block_delta", "index": 2,
                                    "delta": {"type": "input_json_delta", "partial_json": "1}"}}),
        sse("content_block_stop", {"type": "content_block_stop", "index": 2}),
        sse("content_block_start", {"type": "content_block_start", "index": 3,
                                    "content_block": {"type": "tool_use", "id": "t2", "name": "b",
                                                      "input": {}}}),
        sse("content_block_delta", {"type": "content_block_delta", "index": 3,
                                    "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
        sse("content_block_stop", {"type": "content_block_stop", "index": 3}),
        sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                              "usage": usage_delta}),
        sse("message_stop", {"type": "message_stop"})]


@pytest.mark.parametrize("include_usage", [True, False])
def test_an_anthropic_stream_becomes_chunks_with_tool_calls_indexed_over_tool_blocks(
        include_usage: bool) -> None:
    asked = chat({"model": "claude", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                  "stream_options": {"include_usage": include_usage}})
    mapper = CHAT_FORMAT.exchange(14).stream(CHAT, asked, Target(14), count_all)
    assert isinstance(mapper, ChatFromAnthropicStream)
    start = {"input_tokens": 100, "cache_read_input_tokens": 4000, "cache_creation_input_tokens": 50,
             "output_tokens": 1}
    written = [mapper.event(e) for e in anthropic_stream(usage_start=start,
                                                          usage_delta={"output_tokens": 42})]
    assert written[1] == b"" and written[3] == b"" and written[4] == b""  # ping, thinking: nothing
    out = chunks_of(b"".join(written) + mapper.end())
    assert out[-1] == "[DONE]" and mapper.end() == b""
    assert all(c["id"] == "chatcmpl-rid" and c["model"] == "claude" for c in out[:-1])
    deltas = [c["choices"][0]["delta"] for c in out[:-1] if c["choices"]]
    assert deltas[0] == {"role": "assistant", "content": ""} and deltas[1] == {"content": "Calling two."}
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    seen = [(c["index"], c.get("id"), c["function"].get("name"), c["function"]["arguments"]) for c in calls]
    assert seen == [
        (0, "t1", "a", ""), (0, None, None, '{"x":'), (0, None, None, "1}"), (1, "t2", "b", ""),
        (1, None, None, "{}")]  # the text block before them does not shift the index
    finishes = [c["choices"][0]["finish_reason"] for c in out[:-1] if c["choices"]]
    assert finishes[-1] == "tool_calls" and finishes.count("tool_calls") == 1
    assert mapper.usage == Usage(100, 42, cache_read=4000, cache_write_5m=50)  # overwritten, never added
    usage_chunks = [c for c in out[:-1] if not c["choices"]]
    if include_usage:
        assert usage_chunks == [dict(usage_chunks[0], usage={
            "prompt_tokens": 4150, "completion_tokens": 42, "total_tokens": 4192,
            "prompt_tokens_details": {"cached_tokens": 4000}})]
    else:
        assert usage_chunks == []
    assert "".join(mapper.delivered()) == 'Calling two.a{"x":1}b{}'


def test_an_anthropic_error_event_or_a_fragment_of_a_closed_block_breaks_the_stream() -> None:
    asked = chat({"model": "c", "messages": [{"role": "user", "content": "hi"}], "stream": True})
    mapper = CHAT_FORMAT.exchange(14).stream(CHAT, asked, Target(14), count_all)
    with pytest.raises(StreamBroken):
        mapper.event(sse("error", {"type": "error", "error": {"type": "overloaded_error", "message": "x"}}))
    events = anthropic_stream(usage_start={"input_tokens": 1}, usage_delta={"output_tokens": 2})
    for event in events[:13]:  # up to the first tool block's stop
        mapper.event(event)
    with pytest.raises(StreamBroken):
        mapper.event(sse("content_block_delta", {"type": "content_block_delta", "index": 2,
                                                 "delta": {"type": "input_json_delta", "partial_json": "x"}}))
    error = chunks_of(mapper.error(502, "upstream_failed", "broken (request id: rid)"))
    assert error == [{"error": {"message": "broken (request id: rid)", "type": "server_error", "param": None,
                                "code": "upstream_failed"}}]


# ---- streams: OpenAI upstream → Anthropic caller -----------------------------------------------------------

def openai_stream(usage: dict[str, Any] | None) -> list[bytes]:
    events = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Two "}), chunk({"content": "calls."}),
        chunk({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                               "function": {"name": "a", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"x":1}'}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "c2", "type": "function",
                               "function": {"name": "b", "arguments": "{}"}}]}),
        chunk({}, "tool_calls")]
    if usage is not None:
        events.append(chunk(usage=usage, choices=False))
    return [*events, b"data: [DONE]\n\n"]


@pytest.mark.parametrize("with_usage", [True, False])
def test_chunks_become_an_anthropic_stream(with_usage: bool) -> None:
    asked = messages({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hello there"}],
                      "stream": True})
    mapper = MESSAGES_FORMAT.exchange(1).stream(MESSAGES, asked, Target(1), count_all)
    usage = {"prompt_tokens": 2000, "completion_tokens": 300,
             "prompt_tokens_details": {"cached_tokens": 1500}}
    raw = b"".join(mapper.event(e) for e in openai_stream(usage if with_usage else None)) + mapper.end()
    out = events_of(raw)
    assert [name for name, _ in out] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_stop", "content_block_start", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
    assert all(name == data["type"] for name, data in out)
    start = out[0][1]["message"]
    assert (start["id"], start["model"], start["content"]) == ("msg_rid", "m", [])
    assert start["usage"] == {"input_tokens": count_all(["hello there"]), "cache_read_input_tokens": 0,
                              "cache_creation_input_tokens": 0, "output_tokens": 0}
    blocks = [(d["index"], d["content_block"]) for n, d in out if n == "content_block_start"]
    assert blocks == [(0, {"type": "text", "text": ""}),
                      (1, {"type": "tool_use", "id": "c1", "name": "a", "input": {}}),
                      (2, {"type": "tool_use", "id": "c2", "name": "b", "input": {}})]
    assert [d["index"] for n, d in out if n == "content_block_stop"] == [0, 1, 2]
    deltas = [(d["index"], d["delta"]) for n, d in out if n == "content_block_delta"]
    assert deltas == [(0, {"type": "text_delta", "text": "Two "}),
                      (0, {"type": "text_delta", "text": "calls."}),
                      (1, {"type": "input_json_delta", "partial_json": '{"x":1}'}),
                      (2, {"type": "input_json_delta", "partial_json": "{}"})]
    final = out[-2][1]
    assert final["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    if with_usage:
        assert final["usage"] == {"input_tokens": 500, "cache_read_input_tokens": 1500,
                                  "cache_creation_input_tokens": 0, "output_tokens": 300}
        assert mapper.usage == Usage(500, 300, cache_read=1500)
    else:  # Tollway's own count, which the settlement bills too
        assert mapper.usage is None
        assert final["usage"]["output_tokens"] == count_all(["".join(mapper.delivered())]) > 0


def test_message_delta_waits_for_the_usage_chunk_after_the_finish_and_nothing_more() -> None:
    asked = messages({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
                      "stream": True})
    mapper = MESSAGES_FORMAT.exchange(1).stream(MESSAGES, asked, Target(1), count_all)
    assert [n for n, _ in events_of(mapper.event(chunk({"content": "x"})))] == [
        "message_start", "content_block_start", "content_block_delta"]
    assert [n for n, _ in events_of(mapper.event(chunk({}, "stop")))] == ["content_block_stop"]
    usage = {"prompt_tokens": 3, "completion_tokens": 1}
    assert [n for n, _ in events_of(mapper.event(chunk(usage=usage, choices=False)))] == [
        "message_delta", "message_stop"]
    assert mapper.event(b"data: [DONE]\n\n") == b"" and mapper.end() == b""


def test_an_arguments_fragment_for_a_closed_tool_block_ends_the_stream() -> None:
    asked = messages({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
                      "stream": True})
    mapper = MESSAGES_FORMAT.exchange(1).stream(MESSAGES, asked, Target(1), count_all)
    for event in openai_stream(None)[:6]:  # call 0 opened, then closed by call 1
        mapper.event(event)
    late = chunk({"tool_calls": [{"index": 0, "function": {"arguments": "more"}}]})
    with pytest.raises(StreamBroken) as broken:
        mapper.event(late)
    assert broken.value.written == b""
    error = events_of(mapper.error(502, "upstream_failed", "broken (request id: rid)"))
    assert error == [("error", {"type": "error", "error": {"type": "api_error",
                                                           "message": "broken (request id: rid)"}})]
    with pytest.raises(StreamBroken):  # an upstream error chunk
        MESSAGES_FORMAT.exchange(1).stream(MESSAGES, asked, Target(1), count_all).event(
            b'data: {"error": {"message": "boom"}}\n\n')


def test_a_tool_call_whose_id_repeats_in_each_fragment_stays_one_block() -> None:
    """Some OpenAI-compatible upstreams send the call's id with every fragment."""
    asked = messages({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
                      "stream": True})
    mapper = MESSAGES_FORMAT.exchange(40).stream(MESSAGES, asked, Target(40), count_all)
    raw = b"".join(mapper.event(chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {
        "name": "f" if i == 0 else None, "arguments": part}}]})) for i, part in enumerate(['{"a"', ":1}"]))
    names = [n for n, _ in events_of(raw)]
    assert names.count("content_block_start") == 1 and names.count("content_block_delta") == 2
