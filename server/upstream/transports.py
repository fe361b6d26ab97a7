"""The pooled HTTP clients under the upstream client (`server/upstream/client.py`), each refusing forbidden
destinations at connect time (`server/destinations.py`). A worker runs one of them, never both.

- aiohttp (the default): one `aiohttp.ClientSession` per worker (`aiohttp_session`), called directly by
  `Upstream.open` for every upstream call; its connector gets a `socket_factory` that checks the address
  of every socket it opens — after DNS and after aiohttp's own DNS cache, literal addresses included — so
  no resolution is added and a kept-alive connection costs nothing. Its failures become httpx's errors
  (`fault`).
- httpx's own transport (`UPSTREAM_TRANSPORT=httpx`, `GuardedHTTPTransport`): its connection pool gets a
  network backend that resolves the host itself (cached briefly), drops the forbidden addresses and
  connects to an allowed one by address; TLS still verifies the certificate against the URL's host name.
  It raises httpx's errors itself.

A refusal is a connect error to the caller (`httpx.ConnectError`), like an unreachable host: the gateway
tries the next channel, and answers its usual error when none is left. Only a timeout is an
`httpx.TimeoutException`, on both clients.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import aiohttp
import httpcore
import httpx

from server.destinations import DestinationPolicy, DestinationRefused


def fault(exc: BaseException, *, reading: bool) -> BaseException:
    """What to raise for a failure of the aiohttp client: httpx's error for what happened, its `__cause__`
    the aiohttp error (`exc` itself when it is no transport failure). A timeout is a timeout and nothing
    else is, as with httpx's own transport (which calls a drop a `RemoteProtocolError`: neither client
    calls it a timeout).

    - a timeout is an `httpx.TimeoutException`: `ConnectTimeout` for the connection (or the wait for a
      pooled one), `ReadTimeout` for an upstream that sends nothing for a read timeout (before the
      answer's head or within its body);
    - no connection (refused, unreachable, unresolvable, a forbidden destination) is a `ConnectError`;
    - an answer that is not HTTP is a `RemoteProtocolError`;
    - a connection closed or reset by the upstream is a `ConnectError` before the answer and a
      `ReadError` while reading it.

    The order matters: aiohttp's timeouts are connection errors too (`ServerTimeoutError` is a
    `ClientConnectionError` and a `TimeoutError`), so they are matched first."""
    error: httpx.TransportError
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        error = httpx.ConnectTimeout(str(exc) or "connecting timed out")
    elif isinstance(exc, aiohttp.SocketTimeoutError):
        error = httpx.ReadTimeout(str(exc) or "reading timed out")
    elif isinstance(exc, TimeoutError):  # any other timeout of aiohttp's
        error = (httpx.ReadTimeout if reading else httpx.ConnectTimeout)(str(exc) or "timed out")
    elif isinstance(exc, aiohttp.ClientConnectorError):
        reason = exc.os_error
        error = httpx.ConnectError(str(reason) if isinstance(reason, DestinationRefused) else str(exc))
    elif isinstance(exc, aiohttp.ClientResponseError):  # the answer's head is not HTTP
        error = httpx.RemoteProtocolError(str(exc))
    elif isinstance(exc, aiohttp.ClientConnectionError | aiohttp.ClientPayloadError | OSError):
        error = (httpx.ReadError if reading else httpx.ConnectError)(str(exc))
    else:
        return exc
    error.__cause__ = exc
    return error


def aiohttp_timeout(timeout: httpx.Timeout) -> aiohttp.ClientTimeout:
    """aiohttp's form of the client's timeouts: `sock_connect` the connect timeout, `sock_read` the read
    timeout (each wait for bytes), `connect` the pool wait plus the connection."""
    return aiohttp.ClientTimeout(sock_connect=timeout.connect, sock_read=timeout.read, connect=timeout.pool)


def aiohttp_session(limits: httpx.Limits, policy: DestinationPolicy, ssl_context: ssl.SSLContext,
                    timeout: httpx.Timeout) -> aiohttp.ClientSession:
    """The pooled aiohttp session (build it inside the worker's event loop): no cookie jar (one upstream's
    cookies never reach another caller's call), bodies decoded by their `Content-Encoding` (the gateway
    never passes the upstream's on), connections only where `policy` allows (checked by the connector's socket
    factory)."""
    def factory(addr_info: Any) -> socket.socket:
        family, type_, proto, _, sockaddr = addr_info
        policy.check(str(sockaddr[0]))
        return socket.socket(family=family, type=type_, proto=proto)

    connector = aiohttp.TCPConnector(
        keepalive_timeout=limits.keepalive_expiry, ssl=ssl_context, limit=limits.max_connections or 0,
        socket_factory=None if policy.allows_all else factory)
    return aiohttp.ClientSession(
        connector=connector, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=True,
        timeout=aiohttp_timeout(timeout))


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

