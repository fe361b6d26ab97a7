"""The pooled HTTP transports under the upstream client, each refusing forbidden destinations at connect
time (`server/destinations.py`).

- aiohttp (httpx-aiohttp, the default): the session's connector gets a `socket_factory` that checks the
  address of every socket it opens — after DNS and after aiohttp's own DNS cache, literal addresses
  included — so no resolution is added and a kept-alive connection costs nothing.
- httpx's own transport: its connection pool gets a network backend that resolves the host itself
  (cached briefly), drops the forbidden addresses and connects to an allowed one by address; TLS still
  verifies the certificate against the URL's host name.

A refusal is a connect error to the caller of the transport (`httpx.ConnectError`), like an unreachable
host: the gateway tries the next channel, and answers its usual error when none is left.

Both transports raise httpx's errors for what happened: only a timeout is an `httpx.TimeoutException`
(httpx-aiohttp's own mapping calls every aiohttp connection error a `ConnectTimeout`; the aiohttp
transport here corrects it, keeping the aiohttp error as the `__cause__`).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpcore
import httpx

from server.destinations import DestinationPolicy, DestinationRefused


def build_transport(kind: str, limits: httpx.Limits, policy: DestinationPolicy) -> httpx.AsyncBaseTransport:
    """`aiohttp` or `httpx`, pooled with `limits`, connecting only where `policy` allows."""
    if kind == "aiohttp":
        return _aiohttp_transport(limits, policy)
    return GuardedHTTPTransport(limits, policy)


def _aiohttp_transport(limits: httpx.Limits, policy: DestinationPolicy) -> httpx.AsyncBaseTransport:
    import aiohttp
    from httpx_aiohttp import AiohttpTransport
    from httpx_aiohttp.transport import AiohttpResponseStream

    def mapped(exc: Exception, request: httpx.Request | None, *, reading: bool
               ) -> httpx.TransportError | None:
        """The httpx error that says what an aiohttp failure was (None: keep what was raised).

        httpx-aiohttp maps every aiohttp connection error — a refused connection, a host that closed the
        socket, a read timeout — to `httpx.ConnectTimeout`. Here a timeout is the matching
        `httpx.TimeoutException` (connect or read) and anything else a connect error (before the answer)
        or a read error (while reading it). The aiohttp error stays the `__cause__`."""
        if isinstance(exc, httpx.TransportError):
            if not isinstance(exc.__cause__, aiohttp.ClientError):
                return None
            exc = exc.__cause__
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            return httpx.ConnectTimeout(str(exc), request=request)
        if isinstance(exc, TimeoutError):  # aiohttp's socket/server timeouts are TimeoutErrors
            return (httpx.ReadTimeout if reading else httpx.ConnectTimeout)(str(exc) or "timed out",
                                                                             request=request)
        if isinstance(exc, aiohttp.ClientConnectorError):
            reason = exc.os_error
            message = str(reason) if isinstance(reason, DestinationRefused) else str(exc)
            return httpx.ConnectError(message, request=request)
        if isinstance(exc, aiohttp.ClientConnectionError | aiohttp.ClientPayloadError | OSError):
            return (httpx.ReadError if reading else httpx.ConnectError)(str(exc), request=request)
        return None

    class Stream(AiohttpResponseStream):
        """The response body, its failures mapped like the request's (`mapped`, reading)."""

        async def __aiter__(self) -> AsyncIterator[bytes]:
            try:
                async for chunk in self._aiohttp_response.content.iter_chunked(self.CHUNK_SIZE):
                    yield chunk
            except Exception as exc:
                error = mapped(exc, None, reading=True)
                if error is None:
                    raise
                raise error from (exc.__cause__ if isinstance(exc, httpx.TransportError) else exc)

        async def aclose(self) -> None:
            try:
                await super().aclose()
            except Exception as exc:
                error = mapped(exc, None, reading=True)
                if error is None:
                    raise
                raise error from (exc.__cause__ if isinstance(exc, httpx.TransportError) else exc)

    class Transport(AiohttpTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            try:
                response = await super().handle_async_request(request)
            except Exception as exc:
                error = mapped(exc, request, reading=False)
                if error is None:
                    raise
                raise error from (exc.__cause__ if isinstance(exc, httpx.TransportError) else exc)
            stream = response.stream
            if isinstance(stream, AiohttpResponseStream):
                response.stream = Stream(stream._aiohttp_response)
            return response

    transport = Transport(limits=limits)

    def factory(addr_info: Any) -> socket.socket:
        family, type_, proto, _, sockaddr = addr_info
        policy.check(str(sockaddr[0]))
        return socket.socket(family=family, type=type_, proto=proto)

    def session() -> aiohttp.ClientSession:  # built lazily, inside the worker's event loop
        connector = aiohttp.TCPConnector(
            keepalive_timeout=limits.keepalive_expiry, ssl=transport.ssl_context,
            limit=limits.max_connections or 0, socket_factory=None if policy.allows_all else factory)
        return aiohttp.ClientSession(connector=connector)

    transport.client = session
    return transport


class GuardedHTTPTransport(httpx.AsyncHTTPTransport):
    """httpx's transport whose pool connects through `GuardedBackend` (httpcore's public pool and backend
    API; httpx offers no parameter for the backend, so the pool it built is replaced)."""

    def __init__(self, limits: httpx.Limits, policy: DestinationPolicy) -> None:
        ssl_context = httpx.create_ssl_context()
        super().__init__(verify=ssl_context, limits=limits)
        if policy.allows_all:
            return
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context, max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry, network_backend=GuardedBackend(policy))


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolves the host itself and connects to an allowed address only."""

    def __init__(self, policy: DestinationPolicy, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self.policy = policy
        self.inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,  # noqa: ASYNC109 (httpcore's backend interface)
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):  # resolving counts against the connect timeout
                addresses = await self.policy.addresses(host, port)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host} timed out") from None
        except DestinationRefused as exc:
            raise httpcore.ConnectError(str(exc)) from None
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc.strerror or exc}") from None
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self.inner.connect_tcp(address, port, timeout=timeout,
                                                    local_address=local_address,
                                                    socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(self, path: str, timeout: float | None = None,  # noqa: ASYNC109 (httpcore's backend interface)
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not upstream destinations")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)

