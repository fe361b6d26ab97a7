"""The worker's upstream HTTP client: one pooled client, fed the providers' `UpstreamCall`s.

A provider describes a request as plain data (`server/upstream/providers/base.py` `UpstreamCall`); this is the
one place that sends it, so the HTTP client under it can change without touching a provider, the pipeline
or an administrative caller. Every upstream call goes through one method:

- `open(call, *, seconds=None)` → `UpstreamResponse` (status, headers, `read()` or `next_chunk()`,
  `close()`): the model calls, the administrative calls (channel test, balance, model lists:
  `server/upstream/admin.py`) and the payment checkout (`server/payments/checkout.py`). `seconds` replaces
  the client's timeout for that one call (the administrative calls' tighter bound). A body always comes
  decoded by its `Content-Encoding`: the gateway answers with our headers only (never the upstream's
  `Content-Encoding`), so a compressed reply passed on as it came would reach the caller as unreadable
  bytes. `read_capped(response, limit)` reads a body whole through `next_chunk()`, up to a limit (the
  administrative readers' byte caps).

With the default aiohttp client it calls the pooled `aiohttp.ClientSession` directly — no `httpx.Request` /
`httpx.Response` built around aiohttp's (that wrapping was a large share of a call's CPU,
docs/PERFORMANCE.md#figures-behind-the-code); with `UPSTREAM_TRANSPORT=httpx` it hands an `httpx.Request` to
httpx's own transport. Only that one client is on the wire.

Every failure is httpx's error for what happened (`transports.fault` for aiohttp's; httpx raises its own):
a timeout is an `httpx.TimeoutException`, a refused or unreachable destination an `httpx.ConnectError`, a
connection dropped or an answer that breaks HTTP a `ConnectError` / `ReadError` / `RemoteProtocolError`
(the aiohttp error kept as the `__cause__`) — on `open`, `read`, `next_chunk` and `close`, on both
clients, so `faults.is_timeout` / `describe` read them alike.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

import aiohttp
import httpx
from yarl import URL

from server.destinations import DestinationPolicy, Network
from server.upstream.providers.base import UpstreamCall
from server.upstream.transports import GuardedHTTPTransport, aiohttp_session, aiohttp_timeout, fault


class Headers(Protocol):
    """Read access to an upstream reply's headers (case-insensitive)."""

    def get(self, name: str, /) -> str | None: ...

    def __contains__(self, name: object, /) -> bool: ...


class UpstreamResponse(Protocol):
    """An upstream reply whose body is not read yet: `read()` it whole, or `next_chunk()` until b"";
    then `close()` (always: it returns the connection to the pool, or drops a half-read one)."""

    status: int
    headers: Headers

    async def read(self) -> bytes: ...

    async def next_chunk(self) -> bytes: ...

    async def close(self) -> None: ...


class _AiohttpResponse:
    """aiohttp's response, its failures mapped to httpx's errors (`transports.fault`)."""

    __slots__ = ("_raw", "headers", "status")

    def __init__(self, raw: aiohttp.ClientResponse) -> None:
        self._raw = raw
        self.status = raw.status
        self.headers: Headers = raw.headers

    async def read(self) -> bytes:
        raw = self._raw
        try:
            body = await raw.read()
        except Exception as exc:
            raise fault(exc, reading=True)  # noqa: B904 (its __cause__ is set)
        raw.release()  # read to the end: the connection goes back to the pool
        return body

    async def next_chunk(self) -> bytes:
        try:
            return await self._raw.content.readany()
        except Exception as exc:
            raise fault(exc, reading=True)  # noqa: B904 (its __cause__ is set)

    async def close(self) -> None:
        raw = self._raw
        try:
            raw.release()
            await raw.wait_for_close()
        except Exception as exc:
            raise fault(exc, reading=True)  # noqa: B904 (its __cause__ is set)


class _HttpxResponse:
    """httpx's response (`UPSTREAM_TRANSPORT=httpx`) behind the same interface: `read()` and
    `next_chunk()` give the body decoded by its `Content-Encoding` (`aread`, `aiter_bytes`)."""

    __slots__ = ("_chunks", "_raw", "headers", "status")

    def __init__(self, raw: httpx.Response) -> None:
        self._raw = raw
        self._chunks: AsyncIterator[bytes] | None = None
        self.status = raw.status_code
        self.headers: Headers = raw.headers

    async def read(self) -> bytes:
        return await self._raw.aread()

    async def next_chunk(self) -> bytes:
        if self._chunks is None:
            self._chunks = self._raw.aiter_bytes()
        async for chunk in self._chunks:
            if chunk:
                return chunk
        return b""

    async def close(self) -> None:
        await self._raw.aclose()


class BodyTooLarge(Exception):
    """An answer longer than its reader's limit (`read_capped`)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the answer is larger than {limit} bytes")
        self.limit = limit


async def read_capped(response: UpstreamResponse, limit: int) -> bytes:
    """The whole body, read by `next_chunk()`; `BodyTooLarge` as soon as more than `limit` bytes came
    (reading stops there). The caller closes the response."""
    chunks: list[bytes] = []
    size = 0
    while chunk := await response.next_chunk():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


URL_CACHE_SIZE = 1024


class Upstream:
    """One pooled HTTP client per worker (aiohttp's by default, or httpx's own).

    No client-level cookie jar (which would carry one upstream's cookies into another caller's call), no
    redirects, no header merging; a body is decoded by its `Content-Encoding` (the gateway never passes
    the upstream's on). The wire is the call's method, URL, headers and body, plus what
    HTTP/1.1 needs (`Host`, `Content-Length`) and, with aiohttp, its defaults (`Accept`,
    `Accept-Encoding`, `User-Agent`). Timeouts: connect at most 10 s, then `timeout` (or the call's
    `seconds`) for each read and pool wait. Connections reach only the addresses `allow_private` and the
    public internet allow (`server/upstream/transports.py`). Only the channel's key and `header_override`
    (never replacing the key header, never a header that frames the request: `core/headers.py`) go
    upstream; the caller's credentials and query string never do."""

    def __init__(self, timeout: float, *, transport: str = "aiohttp", max_connections: int = 1000,
                 allow_private: tuple[Network, ...] = ()) -> None:
        self.kind = transport
        self.policy = DestinationPolicy(allow_private)
        self.timeouts = _timeouts(timeout)
        self._limits = httpx.Limits(max_connections=max_connections,
                                    max_keepalive_connections=max_connections, keepalive_expiry=60.0)
        self._extensions = {"timeout": self.timeouts.as_dict()}
        self._session: aiohttp.ClientSession | None = None
        self._urls: dict[str, URL] = {}
        self._httpx = GuardedHTTPTransport(self._limits, self.policy) if transport == "httpx" else None

    def session(self) -> aiohttp.ClientSession:
        """The pooled aiohttp session, built on first use (inside the worker's event loop)."""
        session = self._session
        if session is None:
            session = self._session = aiohttp_session(self._limits, self.policy, httpx.create_ssl_context(),
                                                      self.timeouts)
        return session

    def _url(self, url: str) -> URL:
        """The parsed URL of a call (a channel's few URLs, parsed once)."""
        parsed = self._urls.get(url)
        if parsed is None:
            if len(self._urls) >= URL_CACHE_SIZE:
                self._urls.clear()
            parsed = self._urls[url] = URL(url)
        return parsed

    async def open(self, call: UpstreamCall, *, seconds: float | None = None) -> UpstreamResponse:
        """Send `call`; the reply with its body not read yet (`read()` or `next_chunk()`, then `close()`).
        `seconds` replaces the client's timeout for this call (connect at most 10 s, each read and pool
        wait `seconds`); a bound on the whole exchange is the caller's (`asyncio.timeout`)."""
        if self._httpx is not None:
            return await self._open_httpx(self._httpx, call, seconds)
        session = self.session()
        try:
            if seconds is None:  # a model call: the session's timeout
                raw = await session.request(call.method, self._url(call.url), headers=call.headers,
                                            data=call.body or None, allow_redirects=False)
            else:
                raw = await session.request(call.method, self._url(call.url), headers=call.headers,
                                            data=call.body or None, allow_redirects=False,
                                            timeout=aiohttp_timeout(_timeouts(seconds)))
        except Exception as exc:
            raise fault(exc, reading=False)  # noqa: B904 (its __cause__ is set)
        return _AiohttpResponse(raw)

    async def _open_httpx(self, transport: httpx.AsyncBaseTransport, call: UpstreamCall,
                          seconds: float | None) -> UpstreamResponse:
        extensions = self._extensions if seconds is None else {"timeout": _timeouts(seconds).as_dict()}
        request = httpx.Request(call.method, call.url, headers=call.headers, content=call.body,
                                extensions=extensions)
        response = await transport.handle_async_request(request)
        response.request = request
        return _HttpxResponse(response)

    async def aclose(self) -> None:
        if self._httpx is not None:
            await self._httpx.aclose()
        if self._session is not None:
            await self._session.close()


def _timeouts(seconds: float) -> httpx.Timeout:
    """The client's timeouts for `seconds`: connect at most 10 s, each read, write and pool wait
    `seconds`."""
    return httpx.Timeout(seconds, connect=min(10.0, seconds))
