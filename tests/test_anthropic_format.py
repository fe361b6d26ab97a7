"""The Anthropic dialect (server/upstream/providers/anthropic.py) and the Messages format
(server/upstream/formats/anthropic_messages.py) without a server: the caller's key, the error objects and
their statuses, the model lists, the admin calls, the body checks, the usage and its stream merge."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.errors import InvalidRequest
from server.upstream.formats.anthropic_messages import (
    MESSAGES,
    MessagesStream,
    read_count,
    read_messages,
    usage_of_messages,
)
from server.upstream.formats.chat_routes import MESSAGES_FORMAT
from server.upstream.providers import for_wire
from server.upstream.providers.anthropic import ANTHROPIC
from server.upstream.providers.base import Asked, ListedModel, Usage
from server.upstream.providers.openai import OPENAI
from server.web.routing import Wire


class Params(dict[str, str]):
    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(name.lower(), default)


class Target:
    base_url = "http://upstream.test"
    header_override: dict[str, Any] = {"x-api-key": "sk-override", "X-Extra": "1"}
    type = 14
    stream_include_usage = True


def test_the_callers_key_is_x_api_key_first_then_authorization() -> None:
    both = Params({"x-api-key": "sk-a", "authorization": "Bearer sk-b"})
    assert ANTHROPIC.caller_key(both, Params()) == "sk-a"
    assert ANTHROPIC.caller_key(Params({"authorization": "Bearer sk-b"}), Params()) == "sk-b"
    assert ANTHROPIC.caller_key(Params({"authorization": "sk-c"}), Params()) == "sk-c"
    assert ANTHROPIC.caller_key(Params(), Params()) == ""


@pytest.mark.parametrize(("status", "code", "kind", "sent"), [
    (400, "invalid_request", "invalid_request_error", 400),
    (401, "invalid_api_key", "authentication_error", 401),
    (403, "ip_not_allowed", "permission_error", 403), (404, "model_not_found", "not_found_error", 404),
    (413, "request_too_large", "request_too_large", 413),
    (429, "rate_limit_exceeded", "rate_limit_error", 429), (429, "insufficient_quota", "billing_error", 402),
    (503, "channel_unavailable", "api_error", 503),
    (504, "upstream_timeout", "timeout_error", 504), (500, "internal_error", "api_error", 500)])
def test_refusals_take_the_status_and_type_anthropic_gives_them(status: int, code: str, kind: str,
                                                                 sent: int) -> None:
    assert ANTHROPIC.refusal_status(status, code) == sent
    assert OPENAI.refusal_status(status, code) == status  # OpenAI's wire keeps its 429
    body = json.loads(ANTHROPIC.error_body(sent, code, "no (request id: abc123)", None, upstream=False))
    assert body == {"type": "error", "error": {"type": kind, "message": "no (request id: abc123)",
                                               "details": {"error_code": code}}, "request_id": "abc123"}
    assert ANTHROPIC.is_error_body(json.dumps(body).encode())


@pytest.mark.parametrize(("status", "kind"), [(400, "invalid_request_error"), (422, "invalid_request_error"),
                                              (404, "not_found_error"), (413, "request_too_large"),
                                              (409, "invalid_request_error"), (502, "api_error")])
def test_a_reshaped_upstream_answer_is_typed_by_its_status(status: int, kind: str) -> None:
    error = json.loads(ANTHROPIC.error_body(status, "upstream_error", "m (request id: r)", None,
                                            upstream=True))["error"]
    assert (error["type"], error["details"]["error_code"]) == (kind, "upstream_error")


def test_only_anthropic_shaped_bodies_pass_as_they_came() -> None:
    assert not ANTHROPIC.is_error_body(b'{"error": {"message": "openai"}}')
    assert not ANTHROPIC.is_error_body(b'{"type": "error", "error": "x"}')
    assert not ANTHROPIC.is_error_body(b"<html>")
    assert ANTHROPIC.is_error_body(b'{"type": "error", "error": {"type": "x", "message": "y"}}')


def test_the_model_list_and_the_wire_of_get_v1_models() -> None:
    listed = ANTHROPIC.model_list([ListedModel("a", 0, "anthropic"), ListedModel("b", 86400, "openai")])
    assert listed == {"data": [
        {"type": "model", "id": "a", "display_name": "a", "created_at": "1970-01-01T00:00:00Z"},
        {"type": "model", "id": "b", "display_name": "b", "created_at": "1970-01-02T00:00:00Z"}],
        "has_more": False, "first_id": "a", "last_id": "b"}
    assert ANTHROPIC.model_list([])["first_id"] is None
    assert for_wire(Wire.OPENAI_OR_ANTHROPIC, "/v1/models", anthropic_version=True) is ANTHROPIC
    assert for_wire(Wire.OPENAI_OR_ANTHROPIC, "/v1/models") is OPENAI
    assert for_wire(Wire.ANTHROPIC, "/v1/messages") is ANTHROPIC


def test_admin_calls_send_the_channel_key_never_an_override_credential() -> None:
    call = ANTHROPIC.models_call(Target(), "sk-channel")
    assert call.url == "http://upstream.test/v1/models?limit=1000"
    assert (call.headers["x-api-key"], call.headers["anthropic-version"], call.headers["X-Extra"]) == (
        "sk-channel", "2023-06-01", "1")
    assert ANTHROPIC.models_call(Target(), "k", "m-2").url.endswith("&after_id=m-2")
    page = ANTHROPIC.read_models(
        b'{"data": [{"id": "m-1"}, {"id": "m-2"}], "has_more": true, "last_id": "m-2"}')
    assert (page.ids, page.next_page) == (["m-1", "m-2"], "m-2")
    assert ANTHROPIC.read_models(b'{"data": [], "has_more": false, "last_id": null}').next_page is None
    test = ANTHROPIC.test_call(Target(), "sk-channel", "claude-x", {})
    assert (test.method, test.url) == ("POST", "http://upstream.test/v1/messages")
    assert json.loads(test.body) == {"model": "claude-x", "max_tokens": 1,
                                     "messages": [{"role": "user", "content": "hello"}]}
    assert ANTHROPIC.test_outcome(200, b'{"type": "message"}').ok
    assert ANTHROPIC.balance_query(Target(), "k", None) is None


def test_the_exchange_forwards_version_and_beta_and_maps_only_the_model() -> None:
    body = b'{"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}'
    asked = read_messages(body)
    exchange = MESSAGES_FORMAT.exchange(14)
    plain = exchange.request(Target(), "sk-channel", MESSAGES, asked, "c", body)
    assert (plain.url, plain.body, plain.headers["anthropic-version"]) == (
        "http://upstream.test/v1/messages", body, "2023-06-01")
    assert "anthropic-beta" not in plain.headers and plain.headers["x-api-key"] == "sk-channel"
    forwarded = Asked(asked.model, asked.texts, False, 5, asked.fields,
                      headers={"anthropic-version": "2024-10-22", "anthropic-beta": "b1"})
    mapped = exchange.request(Target(), "sk-channel", MESSAGES, forwarded, "c-upstream", body)
    assert (mapped.headers["anthropic-version"], mapped.headers["anthropic-beta"]) == ("2024-10-22", "b1")
    assert json.loads(mapped.body) == dict(json.loads(body), model="c-upstream")
    with pytest.raises(KeyError):
        MESSAGES_FORMAT.exchange(99)
    assert MESSAGES_FORMAT.exchange(1).conversion == ("anthropic", "openai")


def test_the_estimate_reads_system_blocks_tool_inputs_results_and_tools() -> None:
    body = {"model": "c", "max_tokens": 9, "system": [{"type": "text", "text": "sys"}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                      {"type": "image", "source": {"data": "xxxx"}}]},
                         {"role": "assistant",
                          "content": [{"type": "tool_use", "name": "f", "input": {"k": 1}}]},
                         {"role": "user", "content": [{"type": "tool_result", "content": [
                             {"type": "text", "text": "r"}]}]}],
            "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}}]}
    asked = read_messages(json.dumps(body).encode())
    assert asked.texts == ["sys", "a", '{"k":1}', "r", "f", "d", '{"type":"object"}']
    assert (asked.completion_tokens, asked.stream) == (9, False)
    del body["max_tokens"]
    assert read_count(json.dumps(body).encode()).texts == asked.texts  # count_tokens needs no max_tokens
    with pytest.raises(InvalidRequest, match=r"^max_tokens:"):
        read_messages(json.dumps(body).encode())


def test_usage_takes_the_split_writes_else_the_total_as_five_minute_writes() -> None:
    split = {"input_tokens": 100, "cache_read_input_tokens": 4000, "cache_creation_input_tokens": 1200,
             "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 200},
             "output_tokens": 500}
    assert usage_of_messages(split) == Usage(100, 500, 4000, 1000, 200)
    del split["cache_creation"]
    assert usage_of_messages(split) == Usage(100, 500, 4000, 1200, 0)
    assert usage_of_messages(None) is None


def sse(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


counts = st.integers(min_value=0, max_value=10**6)


@given(start=st.fixed_dictionaries({"input_tokens": counts, "output_tokens": counts,
                                    "cache_read_input_tokens": counts}),
       delta=st.dictionaries(st.sampled_from(["input_tokens", "output_tokens", "cache_read_input_tokens"]),
                             counts))
def test_a_streams_usage_is_message_start_overwritten_by_message_delta_never_added(
        start: dict[str, int], delta: dict[str, int]) -> None:
    stream = MessagesStream(MESSAGES, read_count(b'{"model": "c", "messages": [{"role": "user"}]}'), Target(),
                            lambda texts: 0)
    events = [sse("message_start", {"type": "message_start", "message": {"usage": start}}),
              sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": "Hi"}}),
              sse("message_delta", {"type": "message_delta", "usage": delta})]
    assert [stream.event(raw) for raw in events] == events  # written unchanged
    # message_start's output count is a placeholder (Anthropic sends 1): only message_delta's counts
    merged = {**start, "output_tokens": 0, **delta}
    assert stream.usage == Usage(merged["input_tokens"], merged["output_tokens"],
                                 merged["cache_read_input_tokens"])
    assert stream.usage.prompt <= max(start["input_tokens"], delta.get("input_tokens", 0)) + max(
        start["cache_read_input_tokens"], delta.get("cache_read_input_tokens", 0))
    assert stream.delivered() == ["Hi"]


def test_a_cut_stream_ends_with_one_anthropic_error_event() -> None:
    stream = MessagesStream(MESSAGES, read_count(b'{"model": "c", "messages": [{"role": "user"}]}'), Target(),
                            lambda texts: 0)
    for code, kind in (("upstream_failed", "api_error"), ("upstream_timeout", "timeout_error")):
        raw = stream.error(504, code, "cut (request id: r)")
        assert raw.startswith(b"event: error\ndata: ") and raw.endswith(b"\n\n")
        assert json.loads(raw.split(b"data: ", 1)[1]) == {"type": "error", "error": {
            "type": kind, "message": "cut (request id: r)"}}
