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
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable
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

    class Transport(AiohttpTransport):
        """httpx-aiohttp maps every aiohttp connection error to `httpx.ConnectTimeout`; a host that
        refused, did not resolve or was refused by the policy is a `ConnectError` (not a timeout)."""

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            try:
                return await super().handle_async_request(request)
            except httpx.ConnectTimeout as exc:
                cause = exc.__cause__
                if not isinstance(cause, aiohttp.ClientConnectorError):
                    raise
                reason = cause.os_error
                message = str(reason) if isinstance(reason, DestinationRefused) else str(cause)
                raise httpx.ConnectError(message, request=request) from cause

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

