"""The fake upstreams' transport: real sockets, recording, keep-alive, streaming, and every failure mode.

These run against FakeOpenAI and FakeGemini alike where the behaviour is the base server's; the providers'
own shapes are in test_fake_gemini.py and test_fake_openai.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.fakes import FakeGemini, FakeOpenAI
from tests.fakes.base import HUGE_BYTES, NOT_HTTP, FakeServer
from tests.fakes.fixtures import client_for

MODERATE = "/v1/moderations"
SSE_PATH = "/v1beta/models/gemini-2.5-flash-preview-tts:streamGenerateContent"
AUDIO_BODY = {"contents": [{"parts": [{"text": "say hello"}]}],
              "generationConfig": {"responseModalities": ["AUDIO"]}}


async def test_serves_on_a_free_local_port_and_stops() -> None:
    fake = FakeOpenAI()
    with pytest.raises(RuntimeError):
        _ = fake.url
    await fake.start()
    assert fake.url.startswith("http://127.0.0.1:") and fake.port > 0
    async with client_for() as client:
        assert (await client.get(f"{fake.url}/v1/models")).status_code == 200
    await fake.stop()
    await fake.stop()  # twice is harmless
    async with client_for() as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{fake.port}/v1/models")


async def test_two_fakes_get_different_ports(gemini_fake: FakeGemini, openai_fake: FakeOpenAI) -> None:
    assert gemini_fake.url != openai_fake.url


async def test_records_each_request(openai_fake: FakeOpenAI) -> None:
    async with client_for(openai_fake) as client:
        await client.post(f"{MODERATE}?a=1&b=", json={"input": "hi"}, headers={"X-Trace": "T1"})
        await client.post(MODERATE, content=b"not json", headers={"Content-Type": "text/plain"})
        await client.get("/v1/models%3Alist")
    first, second, third = openai_fake.received
    assert (first.method, first.path, first.query) == ("POST", MODERATE, {"a": "1", "b": ""})
    assert first.headers["x-trace"] == "T1" and first.headers["content-type"] == "application/json"
    assert json.loads(first.body) == {"input": "hi"} and first.json == {"input": "hi"}
    assert second.body == b"not json" and second.json is None
    assert (third.path, third.raw_path) == ("/v1/models:list", "/v1/models%3Alist")
    assert openai_fake.last is third and openai_fake.requests_to("moderations") == [first, second]


async def test_reads_a_chunked_request_body(openai_fake: FakeOpenAI) -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b'{"input": '
        yield b'"hello"}'

    async with client_for(openai_fake) as client:
        response = await client.post(MODERATE, content=body())
    assert response.status_code == 200
    assert openai_fake.last.headers["transfer-encoding"] == "chunked"
    assert openai_fake.last.json == {"input": "hello"}


async def test_keep_alive_reuses_the_connection(openai_fake: FakeOpenAI) -> None:
    async with client_for(openai_fake) as client:
        for _ in range(3):
            assert (await client.get("/v1/models")).headers["connection"] == "keep-alive"
        closing = await client.get("/v1/models", headers={"Connection": "close"})
        assert closing.headers["connection"] == "close"
        await client.get("/v1/models")
    connections = [r.connection for r in openai_fake.received]
    assert connections[:4] == [connections[0]] * 4 and connections[4] != connections[0]


async def test_stream_chunks_are_flushed_one_by_one() -> None:
    async with FakeGemini(audio_tokens=30, chunk_delay=0.05) as fake, client_for() as client:
        sent_when_received = []
        async with client.stream("POST", f"{fake.url}{SSE_PATH}?alt=sse", json=AUDIO_BODY) as response:
            assert response.headers["transfer-encoding"] == "chunked"
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    sent_when_received.append(fake.chunks_sent)
    assert len(sent_when_received) == 3
    # When event i reached the client the server had flushed at most i + 1 chunks: not all at once.
    assert all(sent <= i + 1 for i, sent in enumerate(sent_when_received))


@pytest.mark.parametrize("mode", ["400", "401", "403", "429", "500"])
@pytest.mark.parametrize("kind", [FakeGemini, FakeOpenAI])
async def test_error_mode_then_back_to_normal(kind: type[FakeServer], mode: str) -> None:
    async with kind() as fake, client_for(fake) as client:
        fake.fail(mode, times=2)
        assert fake.failure == mode
        path = "/v1/models" if kind is FakeOpenAI else "/v1beta/models"
        statuses = [(await client.get(path)).status_code for _ in range(3)]
        assert statuses == [int(mode), int(mode), 200]
        assert fake.failure is None and len(fake.received) == 3


async def test_failure_forever_until_reset(openai_fake: FakeOpenAI) -> None:
    openai_fake.fail("500")
    async with client_for(openai_fake) as client:
        assert [(await client.get("/v1/models")).status_code for _ in range(4)] == [500] * 4
        openai_fake.reset()
        assert (await client.get("/v1/models")).status_code == 200


def test_unknown_failure_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown failure mode"):
        FakeOpenAI().fail("bad_key")  # Gemini only
    with pytest.raises(ValueError, match="times"):
        FakeGemini().fail("500", times=0)
    FakeGemini().fail("bad_key")


async def test_slow_answers_normally_after_the_delay(openai_fake: FakeOpenAI) -> None:
    openai_fake.slow_seconds = 0.05
    openai_fake.fail("slow", times=1)
    async with client_for(openai_fake) as client:
        response = await client.post(MODERATE, json={"input": "hi"})
    assert response.status_code == 200 and response.json()["results"][0]["flagged"] is False


async def test_slow_makes_a_short_client_timeout_fire_and_stop_does_not_wait() -> None:
    async with FakeOpenAI() as fake, client_for(fake, timeout=0.2) as client:
        fake.fail("slow")  # slow_seconds is 5: stop() must cancel the sleep, not wait for it
        with pytest.raises(httpx.ReadTimeout):
            await client.get("/v1/models")


@pytest.mark.parametrize("kind", [FakeGemini, FakeOpenAI])
async def test_drop_closes_without_a_response(kind: type[FakeServer]) -> None:
    async with kind() as fake, client_for(fake) as client:
        fake.fail("drop", times=1)
        with pytest.raises(httpx.RemoteProtocolError):
            await client.get("/v1/models")
        assert (await client.get("/v1/models")).status_code in (200, 404)
        assert len(fake.received) == 2


async def test_drop_mid_stream_sends_the_first_chunk_then_closes(gemini_fake: FakeGemini) -> None:
    gemini_fake.fail("drop_mid_stream", times=1)
    events = []
    async with client_for() as client:
        with pytest.raises(httpx.RemoteProtocolError):
            async with client.stream("POST", f"{gemini_fake.url}{SSE_PATH}?alt=sse", json=AUDIO_BODY) as r:
                assert r.status_code == 200
                async for line in r.aiter_lines():
                    if line.startswith("data: "):
                        events.append(json.loads(line.removeprefix("data: ")))
        assert len(events) == 1 and "finishReason" not in events[0]["candidates"][0]
        again = await client.post(f"{gemini_fake.url}{SSE_PATH}?alt=sse", json=AUDIO_BODY)
        assert again.text.count("data: ") == 3


async def test_drop_mid_stream_cuts_a_plain_body(openai_fake: FakeOpenAI) -> None:
    openai_fake.fail("drop_mid_stream")
    async with client_for(openai_fake) as client:
        with pytest.raises(httpx.RemoteProtocolError, match=r"incomplete|complete message"):
            await client.get("/v1/models")


async def test_stall_mid_stream_sends_the_first_chunk_then_goes_quiet(gemini_fake: FakeGemini) -> None:
    gemini_fake.fail("stall_mid_stream", times=1)  # slow_seconds is 5: the client's read timeout fires first
    events = []
    async with client_for(timeout=0.3) as client:
        with pytest.raises(httpx.ReadTimeout):
            async with client.stream("POST", f"{gemini_fake.url}{SSE_PATH}?alt=sse", json=AUDIO_BODY) as r:
                assert r.status_code == 200
                async for line in r.aiter_lines():
                    if line.startswith("data: "):
                        events.append(json.loads(line.removeprefix("data: ")))
    assert len(events) == 1


@pytest.mark.parametrize("kind", [FakeGemini, FakeOpenAI])
async def test_extra_headers_go_on_every_reply(kind: type[FakeServer]) -> None:
    async with kind() as fake, client_for(fake) as client:
        fake.extra_headers = {"Set-Cookie": "a=b", "x-ratelimit-remaining-requests": "7"}
        path = "/v1/models" if kind is FakeOpenAI else "/v1beta/models"
        ok = await client.get(path)
        fake.fail("400", times=1)
        error = await client.get(path)
        for response in (ok, error):
            assert response.headers["set-cookie"] == "a=b"
            assert response.headers["x-ratelimit-remaining-requests"] == "7"


@pytest.mark.parametrize("kind", [FakeGemini, FakeOpenAI])
async def test_echo_key_quotes_the_key_in_error_messages(kind: type[FakeServer]) -> None:
    headers = {"x-goog-api-key": "the-key-1234"} if kind is FakeGemini else {
        "Authorization": "Bearer the-key-1234"}
    async with kind() as fake, client_for(fake, headers=headers) as client:
        path = "/v1/models" if kind is FakeOpenAI else "/v1beta/models"
        fake.fail("400", times=1)
        assert "the-key-1234" not in (await client.get(path)).text
        fake.echo_key = True
        fake.fail("400", times=1)
        assert "(key: the-key-1234)" in (await client.get(path)).json()["error"]["message"]


@pytest.mark.parametrize("kind", [FakeGemini, FakeOpenAI])
async def test_garbage_and_huge_are_200s_no_client_can_use(kind: type[FakeServer]) -> None:
    async with kind() as fake, client_for(fake) as client:
        fake.fail("garbage", times=1)
        garbage = await client.get("/v1/models")
        assert garbage.status_code == 200 and garbage.headers["content-type"] == "text/html"
        with pytest.raises(ValueError):
            json.loads(garbage.content)
        fake.fail("huge", times=1)
        async with client.stream("GET", "/v1/models") as huge:
            assert huge.status_code == 200 and huge.headers["transfer-encoding"] == "chunked"
            assert len(await huge.aread()) > HUGE_BYTES
        assert (await client.get("/v1/models")).status_code in (200, 404)  # then back to normal


@pytest.mark.parametrize("kind", [FakeGemini, FakeOpenAI])
async def test_not_http_answers_another_protocol_then_closes(kind: type[FakeServer]) -> None:
    async with kind() as fake:
        fake.fail("not_http", times=1)
        reader, writer = await asyncio.open_connection("127.0.0.1", fake.port)
        writer.write(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        assert await reader.read() == NOT_HTTP  # everything until the fake closed the connection
        writer.close()
        async with client_for(fake) as client:
            assert (await client.get("/v1/models")).status_code in (200, 404)  # then back to normal
        assert len(fake.received) == 2


async def test_compress_gzips_whole_replies_for_a_client_that_accepts_gzip(openai_fake: FakeOpenAI) -> None:
    openai_fake.compress = True
    async with client_for(openai_fake) as client:
        for accepted, encoded in (("gzip, deflate", True), ("identity", False)):
            response = await client.get("/v1/models", headers={"Accept-Encoding": accepted})
            assert response.status_code == 200
            assert (response.headers.get("content-encoding") == "gzip") is encoded, response.headers
            assert json.loads(response.content)["object"] == "list"  # httpx decodes it


async def test_hang_never_answers_and_stop_does_not_wait() -> None:
    async with FakeGemini() as fake, client_for(fake, timeout=0.2) as client:
        fake.fail("hang")
        with pytest.raises(httpx.ReadTimeout):
            await client.get("/v1beta/models")
