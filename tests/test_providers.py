"""The providers (`server/upstream/providers/`): each reads its callers' requests, builds its upstream
requests, reads usage and errors, and writes our answers in its own wire format — tested on small byte
fixtures, without a server. The administrative requests (upstream model list, channel test, balance),
which routes of a later issue send, are also sent to the fake providers over a real socket here.
"""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from core.enums import ChannelType
from server.destinations import ANY_ADDRESS
from server.errors import InvalidRequest, UnknownMethod
from server.upstream.admin import MAX_BODY
from server.upstream.client import Upstream, read_capped
from server.upstream.formats.gemini_generate import GENERATE_FORMAT, GenerateStream
from server.upstream.formats.openai_moderation import MODERATION_FORMAT
from server.upstream.formats.sse import Events
from server.upstream.providers import SERVED_TYPES, default_base, for_wire, lister, owned_by, provider
from server.upstream.providers.anthropic import ANTHROPIC
from server.upstream.providers.balances import BALANCE_TYPES, balance_query
from server.upstream.providers.base import (
    SSE,
    Asked,
    ListedModel,
    Money,
    Operation,
    UnreadableReply,
    UpstreamCall,
    Usage,
)
from server.upstream.providers.gemini import ARRAY, GEMINI
from server.upstream.providers.openai import OPENAI
from server.web.routing import Wire
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI

TTS = "gemini-2.5-flash-preview-tts"


@dataclass
class Channel:
    base_url: str = ""
    header_override: dict[str, Any] = field(default_factory=dict)
    type: int = ChannelType.OPENAI
    stream_include_usage: bool = True


class Params(dict[str, str]):
    """Headers or query parameters (headers are looked up case-insensitively by the caller's server)."""

    def get(self, name: str, /) -> str | None:  # type: ignore[override]
        return super().get(name.lower())


NONE = Params()


def json_of(call: UpstreamCall) -> Any:
    return json.loads(call.body)


# ---- the registry ----------------------------------------------------------------------------------------

def test_the_registry_serves_gemini_anthropic_and_openai_channels() -> None:
    assert provider(ChannelType.GEMINI) is GEMINI and provider(ChannelType.OPENAI) is OPENAI
    assert provider(ChannelType.ANTHROPIC) is ANTHROPIC and lister(ChannelType.ANTHROPIC) is ANTHROPIC
    served = {ChannelType.GEMINI, ChannelType.OPENAI, ChannelType.CUSTOM, ChannelType.OPENROUTER,
              ChannelType.MOONSHOT, ChannelType.SILICONFLOW, ChannelType.DEEPSEEK, ChannelType.ANTHROPIC}
    assert served == SERVED_TYPES
    assert all(provider(t) is OPENAI for t in SERVED_TYPES - {ChannelType.GEMINI, ChannelType.ANTHROPIC})
    assert (owned_by(ChannelType.GEMINI), owned_by(ChannelType.OPENAI), owned_by(ChannelType.AZURE),
            owned_by(ChannelType.ANTHROPIC)) == ("google", "openai", "custom", "anthropic")
    assert default_base(ChannelType.ANTHROPIC) == "https://api.anthropic.com"
    with pytest.raises(KeyError):
        provider(ChannelType.AZURE)


def test_default_addresses_and_model_listers_of_every_type() -> None:
    assert default_base(ChannelType.GEMINI) == "https://generativelanguage.googleapis.com"
    assert default_base(ChannelType.OPENAI) == "https://api.openai.com"
    assert default_base(ChannelType.DEEPSEEK) == "https://api.deepseek.com"
    assert default_base(ChannelType.CUSTOM) == "" and default_base(ChannelType.AZURE) == ""
    assert lister(ChannelType.GEMINI) is GEMINI
    assert lister(ChannelType.OPENAI) is OPENAI and lister(ChannelType.MOONSHOT) is OPENAI


def test_a_route_wire_picks_the_error_shape() -> None:
    assert for_wire(Wire.GOOGLE, "/v1beta/models") is GEMINI
    assert for_wire(Wire.OPENAI, "/v1/moderations") is OPENAI
    assert for_wire(Wire.GOOGLE_OR_OPENAI, f"/v1/models/{TTS}:generateContent") is GEMINI
    assert for_wire(Wire.GOOGLE_OR_OPENAI, "/v1/models/x") is OPENAI
    assert for_wire(Wire.GOOGLE_OR_OPENAI, "/v1/chat/completions") is OPENAI
    assert for_wire(Wire.ENVELOPE, "/api/status") is None


# ---- Gemini: the caller's request ------------------------------------------------------------------------

def test_gemini_reads_the_key_from_the_header_then_the_query_then_authorization() -> None:
    both = Params({"x-goog-api-key": " sk-a ", "authorization": "Bearer sk-c"})
    assert GEMINI.caller_key(both, Params(key="sk-b")) == "sk-a"
    assert GEMINI.caller_key(Params(authorization="Bearer sk-c"), Params(key="sk-b")) == "sk-b"
    assert GEMINI.caller_key(Params(authorization="bearer  sk-c"), NONE) == "sk-c"
    assert GEMINI.caller_key(NONE, NONE) == ""


def test_gemini_operation_from_the_path() -> None:
    assert GEMINI.operation(f"{TTS}:generateContent", NONE) == Operation("generateContent", TTS)
    assert GEMINI.operation(f"models%2F{TTS}%3AgenerateContent", NONE).model == TTS
    stream = GEMINI.operation(f"{TTS}:streamGenerateContent", Params(alt="sse"))
    assert (stream.stream, stream.form) == (True, SSE)
    assert GEMINI.operation(f"{TTS}:streamGenerateContent", NONE).form == ARRAY
    with pytest.raises(UnknownMethod, match="countTokens"):
        GEMINI.operation(f"{TTS}:countTokens", NONE)
    with pytest.raises(InvalidRequest, match=r"^model: must not be empty"):
        GEMINI.operation(":generateContent", NONE)
    with pytest.raises(InvalidRequest, match=r"^model: must be at most 255"):
        GEMINI.operation("a\x00b:generateContent", NONE)


def test_gemini_body_gives_the_estimate_and_refuses_naming_the_field() -> None:
    op = GEMINI.operation(f"{TTS}:generateContent", NONE)
    speech = {"contents": [{"parts": [{"text": "Say hi"}]}], "systemInstruction": {"parts": [{"text": "Be"}]},
              "generationConfig": {"responseModalities": ["audio"]}}
    asked = GEMINI.read_body(op, json.dumps(speech).encode())
    assert asked == Asked(TTS, ["Say hi", "Be"], True, 2 * len("Say hi"))
    speech["generation_config"] = speech.pop("generationConfig")
    speech["generation_config"]["max_output_tokens"] = 7  # type: ignore[index]
    assert GEMINI.read_body(op, json.dumps(speech).encode()).completion_tokens == 7
    for body, field_name in ((b'{"contents": []}', "contents"), (b"[1]", "request body"),
                             (b'{"contents": [{"parts": "x"}]}', "contents[0].parts"),
                             (b'{"contents": [{"parts": []}], "generationConfig": {}, '
                              b'"generation_config": {}}', "generationConfig")):
        with pytest.raises(InvalidRequest, match=f"^{re.escape(field_name)}"):
            GEMINI.read_body(op, body)


# ---- Gemini: the upstream call -----------------------------------------------------------------------

def test_gemini_upstream_request_carries_the_channel_key_and_the_callers_bytes() -> None:
    body = b'{"contents": [{"parts": [{"text": "hi"}]}]}'
    op = GEMINI.operation(f"{TTS}:generateContent", NONE)
    asked = GEMINI.read_body(op, body)
    channel = Channel(header_override={"X-Team": "a", "Authorization": "steal", "x-goog-api-key": "steal",
                                       "Api-Key": "steal", "X-Number": 1, "Content-Length": "5",
                                       "Host": "elsewhere", "Proxy-Authorization": "p", "Content-Length ": "",
                                       "content-type": "application/json+x"})
    call = GEMINI.upstream_call(channel, "k1", op, asked, "mapped-model", body)
    assert call == UpstreamCall(  # the override's framing headers never go; one it repeats replaces ours
        "POST", "https://generativelanguage.googleapis.com/v1beta/models/mapped-model:generateContent",
        {"Accept": "application/json", "X-Team": "a", "content-type": "application/json+x",
         "x-goog-api-key": "k1"}, body)
    stream = GEMINI.operation(f"{TTS}:streamGenerateContent", NONE)  # the caller's form: a JSON array
    call = GEMINI.upstream_call(Channel("http://up.example"), "k1", stream, asked, TTS, body)
    assert call.url == f"http://up.example/v1beta/models/{TTS}:streamGenerateContent?alt=sse"
    assert (call.stream, call.headers["Accept"]) == (True, "text/event-stream")


def test_gemini_usage_from_a_reply_and_from_stream_events() -> None:
    op = GEMINI.operation(f"{TTS}:generateContent", NONE)
    asked = GEMINI.read_body(op, b'{"contents": [{"parts": [{"text": "hi"}]}]}')
    native = GENERATE_FORMAT.exchange(ChannelType.GEMINI)

    def usage(body: bytes) -> Usage | None:
        return native.reply(op, asked, body).usage

    reply = {"candidates": [], "usageMetadata": {
        "promptTokenCount": 5, "toolUsePromptTokenCount": 2, "candidatesTokenCount": 40,
        "cachedContentTokenCount": 3,
        "thoughtsTokenCount": 3, "candidatesTokensDetails": [{"modality": "AUDIO", "tokenCount": 38},
                                                              {"modality": "TEXT", "tokenCount": 2}]}}
    assert usage(json.dumps(reply).encode()) == Usage(4, 43, cache_read=3, audio_output=38, text_output=2)
    total_only = b'{"usageMetadata": {"promptTokenCount": 5, "totalTokenCount": 12}}'
    assert usage(total_only) == Usage(5, 7)
    assert usage(b'{"candidates": []}') is None
    with pytest.raises(UnreadableReply):  # not a reply at all: the attempt fails over
        usage(b"not json")
    sse = GEMINI.operation(f"{TTS}:streamGenerateContent", Params(alt="sse"))
    mapper = native.stream(sse, asked, Channel(), len)
    events = Events().feed(b'data: {"candidates": []}\r\n\r\ndata: {"usageMetadata": {"promptTokenCount"'
                           b': 4, "candidatesTokenCount": 9}}\r\n\r\n')
    assert [mapper.event(e) for e in events] == events  # written as they came
    assert mapper.usage == Usage(4, 9)


def test_gemini_reads_a_bad_key_answer_as_a_401() -> None:
    info = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}
    bad_key = json.dumps({"error": {"code": 400, "message": "API key not valid.",
                                    "status": "INVALID_ARGUMENT", "details": [info]}}).encode()
    error = GEMINI.upstream_error(400, bad_key)
    assert (error.status, error.message) == (401, "API key not valid.")
    other = b'{"error": {"code": 400, "message": "API_KEY_INVALID is only a word here", "details": []}}'
    assert GEMINI.upstream_error(400, other).status == 400
    assert GEMINI.upstream_error(502, b"<html>bad gateway</html>").message == "<html>bad gateway</html>"


# ---- Gemini: our answers -------------------------------------------------------------------------------

def test_gemini_error_objects() -> None:
    body = json.loads(GEMINI.error_body(404, "model_not_found", "no model é", None, upstream=False))
    assert body == {"error": {"code": 404, "message": "no model é", "status": "NOT_FOUND", "details": [
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "model_not_found",
         "domain": "tollway"}]}}

    def status_of(status: int) -> str:
        return str(json.loads(GEMINI.error_body(status, "x", "m", None, upstream=True))["error"]["status"])

    assert [status_of(s) for s in (418, 502, 429)] == ["INVALID_ARGUMENT", "INTERNAL", "RESOURCE_EXHAUSTED"]
    assert GEMINI.is_error_body(b'{"error": {"code": 429, "message": "slow", "status": "UNAVAILABLE"}}')
    assert not GEMINI.is_error_body(b'{"error": {"code": true, "message": "m", "status": "S"}}')
    assert not GEMINI.is_error_body(b'{"error": {"message": "an OpenAI error"}}')
    assert GEMINI.stream_error(504, "late") == (
        b'{"error": {"code": 504, "message": "late", "status": "DEADLINE_EXCEEDED"}}')
    payload = GEMINI.stream_error(503, "m")
    assert GenerateStream(SSE).error(503, "x", "m") == b"data: " + payload + b"\r\n\r\n"
    array = GenerateStream(ARRAY)
    assert array.start() + array.error(503, "x", "m") == b"[" + payload + b"]"
    array = GenerateStream(ARRAY)
    joined = array.start() + array.event(b'data: {"a": 1}\n\n') + array.event(b'data: {"b": 2}\n\n')
    assert joined + array.error(503, "x", "m") == b'[{"a": 1},\r\n{"b": 2},\r\n' + payload + b"]"


def test_gemini_model_list() -> None:
    assert GEMINI.model_list([ListedModel(TTS, 5, "google")]) == {"models": [
        {"name": f"models/{TTS}", "displayName": TTS,
         "supportedGenerationMethods": ["generateContent", "streamGenerateContent"]}]}


# ---- Gemini: channel administration ----------------------------------------------------------------------

def test_gemini_administrative_requests() -> None:
    channel = Channel("http://g.example")
    listing = GEMINI.models_call(channel, "k", page="a/b=")
    assert (listing.method, listing.url) == ("GET", "http://g.example/v1beta/models?pageToken=a%2Fb%3D")
    assert listing.headers["x-goog-api-key"] == "k"
    page = GEMINI.read_models(b'{"models": [{"name": "models/a"}, {"name": "b"}, 3], "nextPageToken": "t"}')
    assert (page.ids, page.next_page) == (["a", "b"], "t")
    assert GEMINI.read_models(b"{}").next_page is None
    with pytest.raises(UnreadableReply):
        GEMINI.read_models(b"[]")
    speech = GEMINI.test_call(channel, "k", TTS, {"speech_output": True})
    assert speech.url == f"http://g.example/v1beta/models/{TTS}:generateContent"
    config = json_of(speech)["generationConfig"]
    assert config["responseModalities"] == ["AUDIO"]
    assert config["speechConfig"]["voiceConfig"]["prebuiltVoiceConfig"]["voiceName"]
    text = GEMINI.test_call(channel, "k", "gemini-2.5-flash", {"speech_output": False})
    assert (text.url, json_of(text)["generationConfig"]) == (
        "http://g.example/v1beta/models/gemini-2.5-flash:generateContent", {"maxOutputTokens": 1})
    embed = GEMINI.test_call(channel, "k", "gemini-embedding-001", {"speech_output": False})
    assert (embed.url, json_of(embed)) == ("http://g.example/v1beta/models/gemini-embedding-001:embedContent",
                                           {"content": {"parts": [{"text": "hello"}]}})
    assert GEMINI.test_outcome(200, b"{}").ok
    failed = GEMINI.test_outcome(403, b'{"error": {"code": 403, "message": "denied", "status": "X"}}')
    assert (failed.ok, failed.message) == (False, "status code 403: denied")
    assert GEMINI.balance_query(channel, "k", datetime.date(2025, 3, 9)) is None


# ---- OpenAI --------------------------------------------------------------------------------------------

def test_openai_caller_and_operation() -> None:
    headers = Params({"authorization": "Bearer sk-x", "x-goog-api-key": "no"})
    assert OPENAI.caller_key(headers, Params(key="no")) == "sk-x"
    assert OPENAI.operation("moderations", NONE) == Operation("moderations")
    with pytest.raises(UnknownMethod):
        OPENAI.operation("chat/completions", NONE)


def test_openai_moderation_body() -> None:
    op = OPENAI.operation("moderations", NONE)
    asked = OPENAI.read_body(op, b'{"input": ["a", "b"]}')
    assert (asked.model, asked.texts, asked.completion_tokens) == ("omni-moderation-latest", ["a", "b"], 0)
    parts = b'{"input": [{"type": "text", "text": "t"}, {"type": "image_url", "image_url": {"url": "u"}}], ' \
            b'"model": " text-moderation-latest "}'
    assert OPENAI.read_body(op, parts).model == "text-moderation-latest"
    for body, param in ((b'{"input": ""}', "input"), (b'{"input": [1]}', "input"),
                        (b'{"input": "x", "model": 3}', "model")):
        with pytest.raises(InvalidRequest) as refused:
            OPENAI.read_body(op, body)
        assert refused.value.param == param and refused.value.message.startswith(param)


def test_openai_upstream_request_replaces_only_a_mapped_model() -> None:
    op = OPENAI.operation("moderations", NONE)
    body = '{"input": "é", "model": "omni-moderation-latest", "extra": 1}'.encode()
    asked = OPENAI.read_body(op, body)
    exchange = MODERATION_FORMAT.exchange(ChannelType.OPENAI)
    same = exchange.request(Channel(), "k", op, asked, "omni-moderation-latest", body)
    assert (same.url, same.body, same.headers["Authorization"]) == (
        "https://api.openai.com/v1/moderations", body, "Bearer k")
    mapped = exchange.request(Channel("http://o.example"), "k", op, asked, "other", body)
    assert mapped.url == "http://o.example/v1/moderations"
    assert json_of(mapped) == {"input": "é", "model": "other", "extra": 1}
    assert exchange.reply(op, asked, b'{"usage": {"prompt_tokens": 1}}').usage is None


def test_openai_error_objects_and_model_list() -> None:
    def error(status: int, code: str, upstream: bool = False) -> dict[str, Any]:
        error: dict[str, Any] = json.loads(OPENAI.error_body(status, code, "m", "input", upstream=upstream))
        return dict(error["error"])

    assert error(400, "invalid_request") == {"message": "m", "type": "invalid_request_error",
                                             "param": "input", "code": "invalid_request"}
    assert [error(s, c)["type"] for s, c in ((401, "a"), (403, "b"), (429, "insufficient_quota"),
                                            (429, "rate_limit_exceeded"), (503, "c"))] == [
        "authentication_error", "permission_error", "insufficient_quota", "rate_limit_error", "server_error"]
    assert error(409, "upstream_error", upstream=True) == {"message": "m", "type": "upstream_error",
                                                           "param": "input", "code": "409"}
    assert OPENAI.is_error_body(b'{"error": {"message": "x"}}')
    assert not OPENAI.is_error_body(b'{"error": "x"}')
    assert OPENAI.model_list([ListedModel("m", 7, "google")]) == {
        "object": "list", "data": [{"id": "m", "object": "model", "created": 7, "owned_by": "google"}]}


def test_openai_administrative_requests() -> None:
    channel = Channel("http://o.example", {"OpenAI-Organization": "org"})
    assert OPENAI.models_call(channel, "k").url == "http://o.example/v1/models"
    assert OPENAI.read_models(b'{"data": [{"id": "a"}, {"x": 1}]}').ids == ["a"]
    with pytest.raises(UnreadableReply):
        OPENAI.read_models(b'{"data": 1}')
    moderation = OPENAI.test_call(channel, "k", "omni-moderation-latest", {"moderation": True})
    assert (moderation.method, moderation.url, json_of(moderation)) == (
        "POST", "http://o.example/v1/moderations", {"model": "omni-moderation-latest", "input": "hello"})
    assert moderation.headers["OpenAI-Organization"] == "org"
    chat = OPENAI.test_call(channel, "k", "gpt-x", {"moderation": False})
    assert (chat.url, json_of(chat)) == ("http://o.example/v1/chat/completions", {
        "model": "gpt-x", "max_tokens": 1, "messages": [{"role": "user", "content": "hello"}]})
    embed = OPENAI.test_call(channel, "k", "text-embedding-3-small", {"moderation": False})
    assert (embed.url, json_of(embed)) == ("http://o.example/v1/embeddings",
                                           {"model": "text-embedding-3-small", "input": "hello"})


def test_openai_balance_is_the_hard_limit_minus_the_usage_in_cents() -> None:
    query = OPENAI.balance_query(Channel("http://o.example"), "k", datetime.date(2025, 3, 9))
    assert query is not None and query.then is not None
    assert (query.first.method, query.first.url) == ("GET", "http://o.example/v1/dashboard/billing/subscription")
    assert query.first.headers["Authorization"] == "Bearer k"
    paying = b'{"hard_limit_usd": 120.5, "has_payment_method": true}'
    assert query.then(paying).url == (
        "http://o.example/v1/dashboard/billing/usage?start_date=2025-03-01&end_date=2025-03-09")
    assert query.then(b'{"hard_limit_usd": 5}').url.endswith("start_date=2024-11-29&end_date=2025-03-09")
    assert query.read(paying, b'{"total_usage": 2050}') == Money(pytest.approx(100.0), "USD")
    with pytest.raises(UnreadableReply):
        query.read(b'{"hard_limit_usd": "lots"}', b'{"total_usage": 0}')
    with pytest.raises(UnreadableReply):
        query.read(paying, b"<html>")


BALANCE_CASES = [
    (ChannelType.OPENROUTER, "/v1/credits", b'{"data": {"total_credits": 10.5, "total_usage": 0.5}}',
     Money(10.0, "USD")),
    (ChannelType.MOONSHOT, "/v1/users/me/balance",
     b'{"code": 0, "data": {"available_balance": 73.0}, "scode": "0x0", "status": true}', Money(73.0, "CNY")),
    (ChannelType.SILICONFLOW, "/v1/user/info", b'{"code": 20000, "data": {"totalBalance": "14.60"}}',
     Money(14.6, "CNY")),
    (ChannelType.DEEPSEEK, "/user/balance",
     b'{"balance_infos": [{"currency": "USD", "total_balance": "2"}, {"currency": "CNY", '
     b'"total_balance": "3.5"}]}', Money(3.5, "CNY")),
    (ChannelType.DEEPSEEK, "/user/balance", b'{"balance_infos": [{"currency": "USD", "total_balance": "2"}]}',
     Money(2.0, "USD")),
]


@pytest.mark.parametrize(("channel_type", "path", "body", "money"), BALANCE_CASES)
def test_the_balance_of_each_provider(channel_type: int, path: str, body: bytes, money: Money) -> None:
    channel = Channel("http://b.example", {"X-Org": "o", "Authorization": "no"})
    query = balance_query(channel_type, channel, "k", datetime.date(2025, 3, 9))
    assert query is not None and query.then is None
    assert (query.first.method, query.first.url) == ("GET", f"http://b.example{path}")
    assert query.first.headers["Authorization"] == "Bearer k" and query.first.headers["X-Org"] == "o"
    assert query.read(body, b"") == money
    for unreadable in (b"<html>", b"[]", b'{"data": {"total_credits": "many"}}', b'{"code": 1, "data": {}}',
                       b'{"balance_infos": [{"currency": "EUR", "total_balance": "1"}]}'):
        with pytest.raises(UnreadableReply):
            query.read(unreadable, b"")


def test_which_types_publish_a_balance() -> None:
    assert {1, 8, 20, 25, 40, 43} == BALANCE_TYPES
    channel = Channel("http://b.example")
    assert balance_query(ChannelType.CUSTOM, channel, "k", datetime.date(2025, 3, 9)) is not None
    assert balance_query(ChannelType.GEMINI, channel, "k", datetime.date(2025, 3, 9)) is None


def test_a_test_answer_must_be_a_json_object() -> None:
    assert GEMINI.test_outcome(200, b'{"models": []}').ok
    garbage = OPENAI.test_outcome(200, b"<html>")
    assert (garbage.ok, garbage.message) == (False, "status code 200, but the reply is not JSON")


# ---- against the fake providers ------------------------------------------------------------------------

async def _send(upstream: Upstream, call: UpstreamCall) -> tuple[int, bytes]:
    response = await upstream.open(call, seconds=10.0)  # as the administrative calls do
    try:
        return response.status, await read_capped(response, MAX_BODY)
    finally:
        await response.close()


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_administrative_requests_work_against_the_fake_providers(transport: str) -> None:
    upstream = Upstream(10.0, transport=transport, allow_private=ANY_ADDRESS)
    try:
        async with FakeGemini(valid_keys=["gk"]) as gemini, FakeOpenAI(valid_keys=["ok"]) as openai:
            g, o = Channel(gemini.url), Channel(openai.url)
            ids: list[str] = []
            page: str | None = None
            while True:
                status, body = await _send(upstream, GEMINI.models_call(g, "gk", page))
                assert status == 200
                listed = GEMINI.read_models(body)
                ids += listed.ids
                if listed.next_page is None:
                    break
                page = listed.next_page
            assert ids == [m.removeprefix("models/") for m in gemini.models]
            assert GEMINI.test_outcome(*await _send(upstream, GEMINI.test_call(g, "gk", TTS,
                                                                                 {"speech_output": True}))).ok
            bad = GEMINI.test_outcome(*await _send(upstream, GEMINI.test_call(g, "nope", TTS,
                                                                                {"speech_output": True})))
            assert not bad.ok and "API key not valid" in bad.message
            status, body = await _send(upstream, OPENAI.models_call(o, "ok"))
            assert OPENAI.read_models(body).ids == list(openai.models)
            moderation = OPENAI.test_call(o, "ok", "omni-moderation-latest", {"moderation": True})
            assert OPENAI.test_outcome(*await _send(upstream, moderation)).ok
    finally:
        await upstream.aclose()
