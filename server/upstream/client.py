"""The worker's upstream HTTP client: one pooled client, fed the providers' `UpstreamCall`s.

A provider describes a request as plain data (`server/upstream/providers/base.py` `UpstreamCall`); this is the
one place that sends it, so the HTTP client under it can change without touching a provider or the
pipeline.

- `open(call)` → `UpstreamResponse` (status, headers, `read()` or `next_chunk()`, `close()`): the model-call
  path. With the default aiohttp client it calls the pooled `aiohttp.ClientSession` directly — no
  `httpx.Request` / `httpx.Response` built around aiohttp's (that wrapping cost ~100 µs of CPU per call,
  docs/ARCHITECTURE.md#per-call-budget).
- `exchange(call)` → (status, body): a whole request and reply, for the administrative calls (channel test,
  balance, model lists).
- `send(call)` → `httpx.Response`: the same request through httpx's transport API over the same pool, for
  callers that want httpx's response object.

Every failure is httpx's error for what happened (`transports.fault`: a timeout is an
`httpx.TimeoutException`, a refused or dropped connection a `ConnectError` / `ReadError`, the aiohttp
error kept as the `__cause__`), on every method and both clients, so `faults.is_timeout` / `describe`
read them alike.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

import aiohttp
import httpx
from yarl import URL

from server.destinations import DestinationPolicy, Network
from server.upstream.providers.base import UpstreamCall
from server.upstream.transports import aiohttp_session, build_transport, fault


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
    """httpx's response (`UPSTREAM_TRANSPORT=httpx`) behind the same interface."""

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
            self._chunks = self._raw.aiter_raw()
        async for chunk in self._chunks:
            if chunk:
                return chunk
        return b""

    async def close(self) -> None:
        await self._raw.aclose()


URL_CACHE_SIZE = 1024


class Upstream:
    """One pooled HTTP client per worker (aiohttp's by default, or httpx's own).

    No client-level cookie jar (which would carry one upstream's cookies into another caller's call), no
    redirects, no header merging, no decompression: the upstream's bytes pass through as they came. The
    wire is the call's method, URL, headers and body, plus what HTTP/1.1 needs (`Host`, `Content-Length`)
    and the client's defaults (`Accept-Encoding`, `User-Agent`). Timeouts: connect at most 10 s, then
    `timeout` for each read, write and pool wait. Connections reach only the addresses `allow_private`
    and the public internet allow (`server/upstream/transports.py`). Only the channel's key and
    `header_override` (never replacing the key header, never a header that frames the request:
    `core/headers.py`) go upstream; the caller's credentials and query string never do."""

    def __init__(self, timeout: float, *, transport: str = "aiohttp", max_connections: int = 1000,
                 allow_private: tuple[Network, ...] = ()) -> None:
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections,
                              keepalive_expiry=60.0)
        self.kind = transport
        self.policy = DestinationPolicy(allow_private)
        self.timeouts = httpx.Timeout(timeout, connect=min(10.0, timeout))
        self.extensions = {"timeout": self.timeouts.as_dict()}
        self._limits = limits
        self._session: aiohttp.ClientSession | None = None
        self._urls: dict[str, URL] = {}
        self.transport = build_transport(transport, limits, self.policy, self.session)

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

    async def open(self, call: UpstreamCall) -> UpstreamResponse:
        """Send `call`; the reply with its body not read yet (`read()` or `next_chunk()`, then `close()`)."""
        if self.kind != "aiohttp":
            return _HttpxResponse(await self.send(call))
        try:
            raw = await self.session().request(call.method, self._url(call.url), headers=call.headers,
                                               data=call.body or None, allow_redirects=False)
        except Exception as exc:
            raise fault(exc, reading=False)  # noqa: B904 (its __cause__ is set)
        return _AiohttpResponse(raw)

    async def exchange(self, call: UpstreamCall) -> tuple[int, bytes]:
        """Send `call` and read the whole reply: (status, body). For the administrative calls."""
        response = await self.open(call)
        try:
            return response.status, await response.read()
        finally:
            await response.close()

    async def send(self, call: UpstreamCall, *, seconds: float | None = None) -> httpx.Response:
        """The response with its body not read yet: `aread()` it or iterate `aiter_raw()`, then `aclose()`.
        `seconds` replaces the client's timeout for this request (the administrative calls' tighter bound)."""
        extensions = self.extensions if seconds is None else {
            "timeout": httpx.Timeout(seconds, connect=min(10.0, seconds)).as_dict()}
        request = httpx.Request(call.method, call.url, headers=call.headers, content=call.body,
                                extensions=extensions)
        response = await self.transport.handle_async_request(request)
        response.request = request
        return response

    async def aclose(self) -> None:
        await self.transport.aclose()
        if self._session is not None:
            await self._session.close()
