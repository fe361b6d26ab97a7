"""The pooled HTTP clients under the upstream client (`server/upstream/client.py`), each refusing forbidden
destinations at connect time (`server/destinations.py`).

- aiohttp (the default): one `aiohttp.ClientSession` per worker (`aiohttp_session`), called directly on
  the model-call path and through httpx-aiohttp's transport by `Upstream.send`; its connector gets a
  `socket_factory` that checks the address of every socket it opens — after DNS and after aiohttp's own
  DNS cache, literal addresses included — so no resolution is added and a kept-alive connection costs
  nothing.
- httpx's own transport: its connection pool gets a network backend that resolves the host itself
  (cached briefly), drops the forbidden addresses and connects to an allowed one by address; TLS still
  verifies the certificate against the URL's host name.

A refusal is a connect error to the caller of the transport (`httpx.ConnectError`), like an unreachable
host: the gateway tries the next channel, and answers its usual error when none is left.

Both raise httpx's errors for what happened (`fault`): only a timeout is an `httpx.TimeoutException`
(httpx-aiohttp's own mapping calls every aiohttp connection error a `ConnectTimeout`; `fault` corrects
it, keeping the aiohttp error as the `__cause__`).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import aiohttp
import httpcore
import httpx

from server.destinations import DestinationPolicy, DestinationRefused


def fault(exc: BaseException, *, reading: bool) -> BaseException:
    """What to raise for a failure of the aiohttp client: the httpx error that says what it was, its
    `__cause__` the aiohttp error (`exc` itself when it is no transport failure).

    httpx-aiohttp maps every aiohttp connection error — a refused connection, a host that closed the
    socket, a read timeout — to `httpx.ConnectTimeout`. Here a timeout is the matching
    `httpx.TimeoutException` (connect or read) and anything else a connect error (before the answer) or a
    read error (while reading it)."""
    cause = exc
    if isinstance(exc, httpx.TransportError):
        if not isinstance(exc.__cause__, aiohttp.ClientError):
            return exc
        cause = exc.__cause__
    error: httpx.TransportError
    if isinstance(cause, aiohttp.ConnectionTimeoutError):
        error = httpx.ConnectTimeout(str(cause))
    elif isinstance(cause, TimeoutError):  # aiohttp's socket/server timeouts are TimeoutErrors
        error = (httpx.ReadTimeout if reading else httpx.ConnectTimeout)(str(cause) or "timed out")
    elif isinstance(cause, aiohttp.ClientConnectorError):
        reason = cause.os_error
        error = httpx.ConnectError(str(reason) if isinstance(reason, DestinationRefused) else str(cause))
    elif isinstance(cause, aiohttp.ClientConnectionError | aiohttp.ClientPayloadError | OSError):
        error = (httpx.ReadError if reading else httpx.ConnectError)(str(cause))
    else:
        return exc
    error.__cause__ = cause
    return error


def aiohttp_session(limits: httpx.Limits, policy: DestinationPolicy, ssl_context: ssl.SSLContext,
                    timeout: httpx.Timeout) -> aiohttp.ClientSession:
    """The pooled aiohttp session (build it inside the worker's event loop): no cookie jar (one upstream's
    cookies never reach another caller's call), no decompression (the bytes pass through as they came),
    connections only where `policy` allows (checked by the connector's socket factory)."""
    def factory(addr_info: Any) -> socket.socket:
        family, type_, proto, _, sockaddr = addr_info
        policy.check(str(sockaddr[0]))
        return socket.socket(family=family, type=type_, proto=proto)

    connector = aiohttp.TCPConnector(
        keepalive_timeout=limits.keepalive_expiry, ssl=ssl_context, limit=limits.max_connections or 0,
        socket_factory=None if policy.allows_all else factory)
    return aiohttp.ClientSession(
        connector=connector, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False,
        timeout=aiohttp.ClientTimeout(sock_connect=timeout.connect, sock_read=timeout.read,
                                      connect=timeout.pool))


def build_transport(kind: str, limits: httpx.Limits, policy: DestinationPolicy,
                    session: Callable[[], aiohttp.ClientSession] | None = None) -> httpx.AsyncBaseTransport:
    """`aiohttp` (over `session()`, the pool the upstream client shares) or `httpx`, pooled with
    `limits`, connecting only where `policy` allows."""
    if kind == "aiohttp":
        assert session is not None
        return _aiohttp_transport(session)
    return GuardedHTTPTransport(limits, policy)


def _aiohttp_transport(session: Callable[[], aiohttp.ClientSession]) -> httpx.AsyncBaseTransport:
    """httpx-aiohttp's transport over the shared session, its failures mapped by `fault`."""
    from httpx_aiohttp import AiohttpTransport
    from httpx_aiohttp.transport import AiohttpResponseStream

    class Stream(AiohttpResponseStream):
        """The response body, its failures mapped like the request's (`fault`, reading)."""

        async def __aiter__(self) -> AsyncIterator[bytes]:
            try:
                async for chunk in self._aiohttp_response.content.iter_chunked(self.CHUNK_SIZE):
                    yield chunk
            except Exception as exc:
                raise fault(exc, reading=True)  # noqa: B904 (its __cause__ is set)

        async def aclose(self) -> None:
            try:
                await super().aclose()
            except Exception as exc:
                raise fault(exc, reading=True)  # noqa: B904 (its __cause__ is set)

    class Transport(AiohttpTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            try:
                response = await super().handle_async_request(request)
            except Exception as exc:
                raise fault(exc, reading=False)  # noqa: B904 (its __cause__ is set)
            stream = response.stream
            if isinstance(stream, AiohttpResponseStream):
                response.stream = Stream(stream._aiohttp_response)
            return response

        async def aclose(self) -> None:  # the session is the upstream client's to close
            return None

    return Transport(client=session)


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

