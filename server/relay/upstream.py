"""The worker's upstream HTTP client: one pooled transport, fed the providers' `UpstreamCall`s.

A provider describes a request as plain data (`server/relay/providers/base.py` `UpstreamCall`); this is the
one place that turns it into an httpx request, so the transport under it can change without touching a
provider or the pipeline.
"""

from __future__ import annotations

import httpx

from server.destinations import DestinationPolicy, Network
from server.relay.providers.base import UpstreamCall
from server.relay.transports import build_transport


class Upstream:
    """httpx requests and responses over one pooled transport.

    Requests go straight to the transport (httpx's public transport API) rather than through
    `httpx.AsyncClient.send`: the gateway needs none of the client's layers (base URL and header merging,
    redirects, auth, event hooks), and the client's cookie jar would carry one upstream's cookies into
    another caller's request. Skipping them is a third of the client's CPU per call
    (`scripts/bench_transport.py`). Timeouts: connect at most 10 s, then `timeout` for each read, write and
    pool wait. The default transport is httpx-aiohttp's (measured faster than httpx's own, see README).
    Connections reach only the addresses `allow_private` and the public internet allow
    (`server/relay/transports.py`). Only the channel's key and `header_override` (never replacing the key
    header) go upstream; the caller's credentials and query string never do."""

    def __init__(self, timeout: float, *, transport: str = "aiohttp", max_connections: int = 1000,
                 allow_private: tuple[Network, ...] = ()) -> None:
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections,
                              keepalive_expiry=60.0)
        self.policy = DestinationPolicy(allow_private)
        self.transport = build_transport(transport, limits, self.policy)
        self.extensions = {"timeout": httpx.Timeout(timeout, connect=min(10.0, timeout)).as_dict()}

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
