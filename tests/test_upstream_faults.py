"""One fault vocabulary on both upstream transports (`server/upstream/client.py`, `transports.py`): every call
— a model call (`open(call)`) and an administrative one (`open(call, seconds=)`) — raises
httpx's error for what happened, from `open`, `read` and `next_chunk` alike. A refused connection is a
`ConnectError`; a connection closed before or during the answer, or an answer that is not HTTP, is a
transport error that is no timeout; only an upstream that does not answer in time is an
`httpx.TimeoutException` — at the client's timeout, or at the call's own `seconds`. With aiohttp the
aiohttp error stays the `__cause__`. So `faults.is_timeout` is a type check, and `UpstreamAdmin` tells
"no answer within" from "dropped the connection" on both transports.
"""

from __future__ import annotations

import socket

import aiohttp
import httpx
import pytest

from core.enums import ChannelType
from server.destinations import ANY_ADDRESS
from server.errors import UpstreamFailed
from server.upstream.admin import UpstreamAdmin
from server.upstream.client import Upstream, read_capped
from server.upstream.faults import describe, is_timeout
from server.upstream.providers import PROVIDERS
from server.upstream.providers.base import UpstreamCall
from tests.fakes.openai import FakeOpenAI

TRANSPORTS = ["aiohttp", "httpx"]
READERS = ["read", "next_chunk"]
CALLS = {"model-call": None, "admin-call": 20.0}
"""How a call is opened: as a model call (the client's timeout) or as an administrative one (its own
`seconds`, the body decoded)."""
BODY = b'{"input": "hello"}'
LIMIT = 10 * 1024 * 1024


def _call(url: str) -> UpstreamCall:
    return UpstreamCall("POST", f"{url}/v1/moderations", {"Content-Type": "application/json",
                                                          "Authorization": "Bearer k"}, BODY)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _check_cause(transport: str, exc: httpx.TransportError) -> None:
    if transport == "aiohttp":
        assert isinstance(exc.__cause__, aiohttp.ClientError), repr(exc.__cause__)
        assert describe(exc).startswith(type(exc.__cause__).__name__)


async def _fetch(upstream: Upstream, call: UpstreamCall, reader: str = "read",
                 seconds: float | None = None) -> bytes:
    """Open `call` as a model call (`seconds` None) or an administrative one, and read it with `reader`."""
    response = await upstream.open(call, seconds=seconds)
    try:
        if reader == "read":
            return await response.read()
        return await read_capped(response, LIMIT)  # next_chunk() until b""
    finally:
        await response.close()


@pytest.mark.parametrize("kind", CALLS)
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_refused_connection_is_a_connect_error(transport: str, reader: str, kind: str) -> None:
    upstream = Upstream(5.0, transport=transport, allow_private=ANY_ADDRESS)
    try:
        with pytest.raises(httpx.ConnectError) as raised:
            await _fetch(upstream, _call(f"http://127.0.0.1:{_closed_port()}"), reader, CALLS[kind])
        assert not is_timeout(raised.value)
        _check_cause(transport, raised.value)
    finally:
        await upstream.aclose()


@pytest.mark.parametrize("kind", CALLS)
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_connection_closed_before_or_during_the_answer_is_no_timeout(
        transport: str, reader: str, kind: str) -> None:
    upstream = Upstream(5.0, transport=transport, allow_private=ANY_ADDRESS)
    try:
        async with FakeOpenAI() as fake:
            for mode in ("drop", "drop_mid_stream"):
                fake.fail(mode, times=1)
                with pytest.raises(httpx.TransportError) as raised:
                    await _fetch(upstream, _call(fake.url), reader, CALLS[kind])
                assert not isinstance(raised.value, httpx.TimeoutException), (mode, repr(raised.value))
                assert not is_timeout(raised.value)
                _check_cause(transport, raised.value)
            assert b"results" in await _fetch(upstream, _call(fake.url), reader, CALLS[kind])  # next is fine
    finally:
        await upstream.aclose()


@pytest.mark.parametrize("kind", CALLS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_answer_that_is_not_http_is_a_protocol_error(transport: str, kind: str) -> None:
    """aiohttp raised its own `ClientResponseError` here, which no caller catches (a model call's 500)."""
    upstream = Upstream(5.0, transport=transport, allow_private=ANY_ADDRESS)
    try:
        async with FakeOpenAI() as fake:
            fake.fail("not_http", times=1)
            with pytest.raises(httpx.RemoteProtocolError) as raised:
                await _fetch(upstream, _call(fake.url), "read", CALLS[kind])
            assert not is_timeout(raised.value)
            _check_cause(transport, raised.value)
    finally:
        await upstream.aclose()


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_only_a_slow_upstream_is_a_timeout(transport: str, reader: str) -> None:
    upstream = Upstream(0.5, transport=transport, allow_private=ANY_ADDRESS)
    try:
        async with FakeOpenAI(slow_seconds=5.0) as fake:
            for mode in ("slow", "stall_mid_stream"):  # no answer; half an answer, then nothing
                fake.fail(mode, times=1)
                with pytest.raises(httpx.TimeoutException) as raised:
                    await _fetch(upstream, _call(fake.url), reader)
                assert is_timeout(raised.value)
                _check_cause(transport, raised.value)
    finally:
        await upstream.aclose()


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_calls_own_seconds_bound_it_and_expire_as_a_read_timeout(transport: str, reader: str
                                                                           ) -> None:
    """The client waits 60 s; the administrative call's `seconds` (0.5) is what expires — before the answer
    (`slow`) or in the middle of its body (`stall_mid_stream`, which closes the connection after 10 s: a
    `seconds` not applied would read that as a drop, not a timeout). On a busy machine the 0.5 s may run
    out while connecting (a connect timeout): that is still the call's own seconds expiring, so any
    timeout passes, and the call that must succeed gets time to spare."""
    upstream = Upstream(60.0, transport=transport, allow_private=ANY_ADDRESS)
    try:
        async with FakeOpenAI(slow_seconds=10.0) as fake:
            for mode in ("slow", "stall_mid_stream"):
                fake.fail(mode, times=1)
                with pytest.raises(httpx.TimeoutException) as raised:
                    await _fetch(upstream, _call(fake.url), reader, seconds=0.5)
                assert is_timeout(raised.value), mode
                _check_cause(transport, raised.value)
            assert b"results" in await _fetch(upstream, _call(fake.url), reader, seconds=30)
    finally:
        await upstream.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_administrative_call_tells_a_timeout_from_a_drop(transport: str) -> None:
    """Through `UpstreamAdmin` (its deadline is both the call's `seconds` and an `asyncio.timeout`): no answer
    in time, or half an answer, is "no answer within"; a refused, dropped or non-HTTP connection is "could
    not be reached or dropped the connection" — each a 502, never a 500."""
    upstream = Upstream(60.0, transport=transport, allow_private=ANY_ADDRESS)
    admin = UpstreamAdmin(upstream, PROVIDERS, timeout=0.5)
    try:
        async with FakeOpenAI(slow_seconds=10.0, valid_keys=["k"]) as fake:
            target = admin.target(ChannelType.OPENAI, fake.url)
            assert await admin.models(target, "k") == list(fake.models)
            expected = {"slow": "no answer within 0.5 s", "stall_mid_stream": "no answer within 0.5 s",
                        "drop": "dropped the connection", "drop_mid_stream": "dropped the connection",
                        "not_http": "dropped the connection"}
            for mode, message in expected.items():
                fake.fail(mode)  # every request: aiohttp sends a GET again when a reused connection drops
                with pytest.raises(UpstreamFailed) as raised:
                    await admin.models(target, "k")
                assert message in raised.value.message, (mode, raised.value.message)
                fake.reset()
            refused = admin.target(ChannelType.OPENAI, f"http://127.0.0.1:{_closed_port()}")
            with pytest.raises(UpstreamFailed, match="could not be reached"):
                await admin.models(refused, "k")
    finally:
        await upstream.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_administrative_call_reads_a_compressed_answer(transport: str) -> None:
    """An upstream that gzips (as CDNs do when asked) still gives a readable model list: the administrative
    calls read the body decoded by its `Content-Encoding`, as every call does."""
    upstream = Upstream(10.0, transport=transport, allow_private=ANY_ADDRESS)
    admin = UpstreamAdmin(upstream, PROVIDERS, timeout=10.0)
    try:
        async with FakeOpenAI(valid_keys=["k"]) as fake:
            fake.compress = True
            target = admin.target(ChannelType.OPENAI, fake.url, {"Accept-Encoding": "gzip"})
            assert await admin.models(target, "k") == list(fake.models)
            assert "gzip" in fake.last.headers["accept-encoding"]
    finally:
        await upstream.aclose()
