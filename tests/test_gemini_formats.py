"""The Gemini formats on small byte fixtures, without a server: the usage normalization of generated text
(`usageMetadata` → input, cache reads, output) and of embeddings, the embedding bodies and upstream
request, and which format a Gemini path's method picks."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.enums import ChannelType
from server.errors import InvalidRequest, UnknownMethod
from server.upstream.formats.gemini_embed import EMBED_FORMAT, read_embed, usage_of_embed
from server.upstream.formats.gemini_generate import GENERATE_FORMAT
from server.upstream.formats.gemini_methods import gemini_format
from server.upstream.providers.base import Asked, Operation, Usage
from server.upstream.providers.gemini import usage_of_metadata
from tests.test_providers import Channel

MODEL = "gemini-embedding-001"
NO_ARGS: dict[str, str] = {}




count = st.one_of(st.none(), st.integers(0, 10**9))  # None: the field is absent (proto3 leaves zeros out)


def metadata(**counts: int | None) -> dict[str, int]:
    return {name: value for name, value in counts.items() if value is not None}


@given(prompt=count, tool_use=count, cached=count, candidates=count, thoughts=count)
def test_generate_usage_is_input_cache_reads_and_output(prompt: int | None, tool_use: int | None,
                                                        cached: int | None, candidates: int | None,
                                                        thoughts: int | None) -> None:
    meta = metadata(promptTokenCount=prompt, toolUsePromptTokenCount=tool_use, cachedContentTokenCount=cached,
                    candidatesTokenCount=candidates if candidates is not None else 0,
                    thoughtsTokenCount=thoughts)
    usage = usage_of_metadata(meta)
    p, t, c = prompt or 0, tool_use or 0, cached or 0
    assert usage == Usage(max(0, p + t - c), (candidates or 0) + (thoughts or 0), cache_read=c)
    assert usage is not None and usage.prompt == max(p + t, c)  # every input token, cached or not, once


@given(prompt=st.integers(0, 10**6), thoughts=st.integers(0, 10**6), candidates=st.integers(0, 10**6))
def test_without_candidates_the_output_is_the_total_less_the_prompt(prompt: int, thoughts: int,
                                                                    candidates: int) -> None:
    total = prompt + thoughts + candidates  # Google's total already holds the thoughts
    usage = usage_of_metadata({"promptTokenCount": prompt, "thoughtsTokenCount": thoughts,
                               "totalTokenCount": total})
    assert usage == Usage(prompt, thoughts + candidates)


def test_odd_counts_are_zero_and_no_metadata_is_no_usage() -> None:
    assert usage_of_metadata({"promptTokenCount": -5, "candidatesTokenCount": True,
                              "cachedContentTokenCount": "3", "thoughtsTokenCount": 2.5}) == Usage(0, 0)
    assert usage_of_metadata({"promptTokenCount": 10, "cachedContentTokenCount": 40,
                              "candidatesTokenCount": 1}) == Usage(0, 1, cache_read=40)
    assert usage_of_metadata(None) is None and usage_of_metadata([1]) is None


def test_embedding_usage_is_the_prompt_count_or_none() -> None:
    assert usage_of_embed({"embedding": {}, "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12}}
                          ) == Usage(12, 0)
    assert usage_of_embed({"usageMetadata": {"promptTokenCount": 0}}) == Usage(0, 0)  # a 0 is a value
    assert usage_of_embed({"embeddings": [], "usageMetadata": {"totalTokenCount": 12}}) is None
    assert usage_of_embed({"embedding": {"values": [0.1]}}) is None
    assert usage_of_embed({"usageMetadata": "12"}) is None and usage_of_embed(None) is None
    answer = EMBED_FORMAT.exchange(ChannelType.GEMINI).reply(
        Operation("embedContent", MODEL), Asked(MODEL, [], False, 0), b'{"embedding": {"values": [1]}}')
    assert (answer.body, answer.usage, answer.texts) == (b'{"embedding": {"values": [1]}}', None, [])


def test_a_path_method_picks_its_format_and_each_refuses_the_others() -> None:
    assert gemini_format(f"{MODEL}:embedContent") is EMBED_FORMAT
    assert gemini_format(f"models%2F{MODEL}%3AbatchEmbedContents") is EMBED_FORMAT
    for target in (f"{MODEL}:generateContent", f"{MODEL}:streamGenerateContent", f"{MODEL}:countTokens",
                   MODEL, "embedContent"):
        assert gemini_format(target) is GENERATE_FORMAT
    assert EMBED_FORMAT.operation(f"models/{MODEL}%3AbatchEmbedContents", NO_ARGS) == Operation(
        "batchEmbedContents", MODEL)
    assert EMBED_FORMAT.operation(f"{MODEL}:embedContent", NO_ARGS) == Operation("embedContent", MODEL)
    with pytest.raises(UnknownMethod, match="countTokens"):
        GENERATE_FORMAT.operation(f"{MODEL}:countTokens", NO_ARGS)
    with pytest.raises(UnknownMethod):
        EMBED_FORMAT.operation(f"{MODEL}:generateContent", NO_ARGS)
    with pytest.raises(InvalidRequest, match=r"^model: must not be empty"):
        EMBED_FORMAT.operation(":embedContent", NO_ARGS)


def test_embedding_bodies_give_the_texts_and_a_prompt_only_reservation() -> None:
    one = Operation("embedContent", MODEL)
    batch = Operation("batchEmbedContents", MODEL)
    body = {"content": {"parts": [{"text": "a"}, {"inlineData": {}}, {"text": "b"}]}, "taskType": "X"}
    assert read_embed(one, json.dumps(body).encode()) == Asked(MODEL, ["a", "b"], False, 0, floor=False)
    requests = {"requests": [{"model": "models/other", "content": {"parts": [{"text": "c"}]}},
                             {"content": {"role": "user", "parts": [{"text": "d"}, {"text": "e"}]}}]}
    assert read_embed(batch, json.dumps(requests).encode()) == Asked(MODEL, ["c", "d", "e"], False, 0,
                                                                     floor=False)
    for op, bad, message in (
            (one, {"contents": [{"parts": []}]}, "content: must be an object with a parts array"),
            (one, {"content": {"parts": None}}, "content.parts: must be an array of objects"),
            (batch, {"requests": {}}, "requests: must be a non-empty array of objects"),
            (batch, {"requests": ["x"]}, r"requests\[0\]: must be an object"),
            (batch, {"requests": [{"content": {"parts": []}}, {"content": []}]},
             r"requests\[1\].content: must be an object with a parts array"),
            (one, "not an object", "request body must be a JSON object")):
        with pytest.raises(InvalidRequest, match=f"^{message}"):
            read_embed(op, json.dumps(bad).encode())


def test_the_upstream_embedding_call_maps_only_the_path_model() -> None:
    body = b'{"requests": [{"model": "models/asked", "content": {"parts": [{"text": "x"}]}}]}'
    exchange = EMBED_FORMAT.exchange(ChannelType.GEMINI)
    op = Operation("batchEmbedContents", "asked")
    call = exchange.request(Channel("https://g.example", {"X-Extra": "1", "x-goog-api-key": "stolen"}), "k",
                            op, read_embed(op, body), "mapped", body)
    assert (call.method, call.url, call.body, call.stream) == (
        "POST", "https://g.example/v1beta/models/mapped:batchEmbedContents", body, False)
    assert call.headers == {"Content-Type": "application/json", "Accept": "application/json", "X-Extra": "1",
                            "x-goog-api-key": "k"}
    default = exchange.request(Channel(type=ChannelType.GEMINI), "k", Operation("embedContent", "m"),
                               Asked("m", [], False, 0), "m", b"{}")
    assert default.url == "https://generativelanguage.googleapis.com/v1beta/models/m:embedContent"
    with pytest.raises(KeyError):
        EMBED_FORMAT.exchange(ChannelType.OPENAI)
    assert exchange.upstream_error(400, b'{"error": {"code": 400, "message": "bad", "status": "X", '
                                        b'"details": [{"reason": "API_KEY_INVALID"}]}}').status == 401
