"""Both upstream transports raise httpx's error for what happened (`server/upstream/transports.py`): a refused
or dropped connection is a connect or read error, never a timeout; only a slow upstream is an
`httpx.TimeoutException`. httpx-aiohttp alone calls every aiohttp connection error a `ConnectTimeout`;
ours keeps the aiohttp error as the `__cause__`. So `faults.is_timeout` is a type check.
"""

from __future__ import annotations

import socket

import aiohttp
import httpx
import pytest

from server.destinations import ANY_ADDRESS
from server.upstream.client import Upstream
from server.upstream.faults import describe, is_timeout
from server.upstream.providers.base import UpstreamCall
from tests.fakes.openai import FakeOpenAI

TRANSPORTS = ["aiohttp", "httpx"]
BODY = b'{"input": "hello"}'


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


async def _read(upstream: Upstream, call: UpstreamCall) -> bytes:
    response = await upstream.send(call)
    try:
        return await response.aread()
    finally:
        await response.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_refused_connection_is_a_connect_error(transport: str) -> None:
    upstream = Upstream(5.0, transport=transport, allow_private=ANY_ADDRESS)
    try:
        with pytest.raises(httpx.ConnectError) as raised:
            await _read(upstream, _call(f"http://127.0.0.1:{_closed_port()}"))
        assert not is_timeout(raised.value)
        _check_cause(transport, raised.value)
    finally:
        await upstream.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_connection_closed_before_or_during_the_answer_is_no_timeout(transport: str) -> None:
    upstream = Upstream(5.0, transport=transport, allow_private=ANY_ADDRESS)
    try:
        async with FakeOpenAI() as fake:
            for mode in ("drop", "drop_mid_stream"):
                fake.fail(mode, times=1)
                with pytest.raises(httpx.TransportError) as raised:
                    await _read(upstream, _call(fake.url))
                assert not isinstance(raised.value, httpx.TimeoutException), (mode, repr(raised.value))
                assert not is_timeout(raised.value)
                _check_cause(transport, raised.value)
            assert b"results" in await _read(upstream, _call(fake.url))  # and the next call is fine
    finally:
        await upstream.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_only_a_slow_upstream_is_a_timeout(transport: str) -> None:
    upstream = Upstream(0.5, transport=transport, allow_private=ANY_ADDRESS)
    try:
        async with FakeOpenAI(slow_seconds=5.0) as fake:
            fake.fail("slow", times=1)
            with pytest.raises(httpx.TimeoutException) as raised:
                await _read(upstream, _call(fake.url))
            assert is_timeout(raised.value)
            _check_cause(transport, raised.value)
    finally:
        await upstream.aclose()
