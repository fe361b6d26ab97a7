"""Calls to upstream providers: one pooled HTTP client per worker, the request each channel type expects,
and the judgement of an answer (success, retry elsewhere, pass through, auto-disable).

    Gemini (24)  POST {base}/v1beta/models/{model}:generateContent      x-goog-api-key
                 POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse
    OpenAI (1)   POST {base}/v1/moderations                             Authorization: Bearer

Only the channel's key and `header_override` (never replacing the auth header) go upstream; the caller's
credentials and query string never do.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from core.enums import ChannelType
from core.multikey import MultiKeyMode
from core.settings import Settings, status_in
from quota.backends.base import Backend
from server.channels.table import RoutedChannel
from server.destinations import DestinationPolicy, Network
from server.relay.transports import build_transport

DEFAULT_BASE = {ChannelType.GEMINI: "https://generativelanguage.googleapis.com",
                ChannelType.OPENAI: "https://api.openai.com"}
AUTH_HEADERS = {"authorization", "x-goog-api-key", "api-key"}


class Upstream:
    """The worker's upstream HTTP client: httpx requests and responses over one pooled transport.

    Requests go straight to the transport (httpx's public transport API) rather than through
    `httpx.AsyncClient.send`: the gateway needs none of the client's layers (base URL and header merging,
    redirects, auth, event hooks), and the client's cookie jar would carry one upstream's cookies into
    another caller's request. Skipping them is a third of the client's CPU per call
    (`scripts/bench_transport.py`). Timeouts: connect at most 10 s, then `timeout` for each read, write and
    pool wait. The default transport is httpx-aiohttp's (measured faster than httpx's own, see README).
    Connections reach only the addresses `allow_private` and the public internet allow
    (`server/relay/transports.py`)."""

    def __init__(self, timeout: float, *, transport: str = "aiohttp", max_connections: int = 1000,
                 allow_private: tuple[Network, ...] = ()) -> None:
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections,
                              keepalive_expiry=60.0)
        self.policy = DestinationPolicy(allow_private)
        self.transport = build_transport(transport, limits, self.policy)
        self.extensions = {"timeout": httpx.Timeout(timeout, connect=min(10.0, timeout)).as_dict()}

    def request(self, url: str, headers: dict[str, str], body: bytes) -> httpx.Request:
        return httpx.Request("POST", url, headers=headers, content=body, extensions=self.extensions)

    async def send(self, request: httpx.Request) -> httpx.Response:
        """The response with its body not read yet: `aread()` it or iterate `aiter_raw()`, then `aclose()`."""
        response = await self.transport.handle_async_request(request)
        response.request = request
        return response

    async def aclose(self) -> None:
        await self.transport.aclose()


async def choose_key(channel: RoutedChannel, backend: Backend) -> int:
    """Index of the key to use: the only one, or among the enabled keys at random / by a shared counter."""
    enabled = channel.enabled_keys()
    if not channel.multi_key or len(enabled) == 1:
        return enabled[0]
    if channel.multi_key_mode == MultiKeyMode.POLLING:
        n = await backend.incr(f"poll:channel:{channel.id}", 7 * 86_400)
        return enabled[(n - 1) % len(enabled)]
    return random.choice(enabled)


def _headers(channel: RoutedChannel, auth: dict[str, str], accept: str) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": accept}
    for name, value in channel.header_override.items():
        if isinstance(value, str) and name.lower() not in AUTH_HEADERS:
            headers[name] = value
    headers.update(auth)
    return headers


def gemini_request(upstream: Upstream, channel: RoutedChannel, key: str, upstream_model: str,
                   body: bytes, *, stream: bool) -> httpx.Request:
    base = channel.base_url or DEFAULT_BASE[ChannelType.GEMINI]
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    url = f"{base}/v1beta/models/{upstream_model}:{method}"
    accept = "text/event-stream" if stream else "application/json"
    return upstream.request(url, _headers(channel, {"x-goog-api-key": key}, accept), body)


def openai_request(upstream: Upstream, channel: RoutedChannel, key: str, path: str, body: bytes
                   ) -> httpx.Request:
    base = channel.base_url or DEFAULT_BASE[ChannelType.OPENAI]
    return upstream.request(f"{base}{path}", _headers(channel, {"Authorization": f"Bearer {key}"},
                                                       "application/json"), body)


def map_model(mapping: Mapping[str, Any], model: str) -> str:
    """Follow `model_mapping` from the requested name (chains followed; a cycle stops where it closes)."""
    seen = {model}
    current = model
    while isinstance(mapping.get(current), str) and mapping[current] and mapping[current] not in seen:
        current = mapping[current]
        seen.add(current)
    return current


def mapped_status(channel: RoutedChannel, status: int) -> int:
    """`status_code_mapping` rewrites only what the caller sees."""
    value = channel.status_code_mapping.get(str(status))
    try:
        mapped = int(value) if value is not None else status
    except (TypeError, ValueError):
        return status
    return mapped if 100 <= mapped <= 599 else status


def is_key_invalid(status: int, body: bytes) -> bool:
    """A Gemini 400 whose ErrorInfo reason is API_KEY_INVALID is a bad channel key (counts as 401)."""
    if status != 400 or b"API_KEY_INVALID" not in body:
        return False
    try:
        details = json.loads(body)["error"]["details"]
        return any(isinstance(d, dict) and d.get("reason") == "API_KEY_INVALID" for d in details)
    except (ValueError, KeyError, TypeError):
        return False


@dataclass(frozen=True, slots=True)
class Verdict:
    retry: bool  # try another channel
    disable: bool  # take the channel (or key) out of routing
    status: int  # effective upstream status (API_KEY_INVALID → 401)


def judge(settings: Settings, status: int, body: bytes, message: str) -> Verdict:
    """What a failed upstream answer means (docs/API.md#selection-and-retries, #auto-disable)."""
    effective = 401 if is_key_invalid(status, body) else status
    retry = status_in(effective, settings.automatic_retry_status_codes)
    keyword = retry and keyword_disables(settings, message)
    disable = status_in(effective, settings.automatic_disable_status_codes) or keyword
    return Verdict(retry or disable, disable, effective)


def keyword_disables(settings: Settings, message: str) -> bool:
    """The message holds one of the automatic-disable keywords (a connection-level failure disables
    only by keyword)."""
    lowered = message.lower()
    return any(word in lowered for word in settings.automatic_disable_keywords)
