"""Who is calling a model route, and may they (steps 1–5 of docs/API.md#gateway-admission-order, in order).

The key comes from `Authorization` (OpenAI routes) or the first of `x-goog-api-key`, `?key=`,
`Authorization` (Gemini routes). Key and owner come from the shared record caches (no SQL once cached);
an expired or exhausted key found here has that status persisted.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import lru_cache

from sanic import Request

from core.enums import KeyStatus
from core.identity import UserState
from core.settings import Settings
from server.auth.identity import bearer
from server.context import State
from server.keys.directory import KeyState
from server.relay.errors import GatewayError

AUTO_GROUP = "auto"


def raw_key(request: Request, gemini: bool) -> str:
    if gemini:
        header = str(request.headers.get("x-goog-api-key", ""))
        if header:
            return header.strip()
        query: str | None = request.args.get("key")
        if query:
            return str(query).strip()
    return bearer(request.headers.get("authorization", ""))


@lru_cache(maxsize=4096)
def _networks(allow_ips: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    out = []
    for line in allow_ips.replace(",", "\n").splitlines():
        line = line.strip()
        if line:
            try:
                out.append(ipaddress.ip_network(line, strict=False))
            except ValueError:
                continue
    return tuple(out)


def ip_allowed(allow_ips: str, ip: str) -> bool:
    if not allow_ips.strip():
        return True
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return False
    return any(addr.version == net.version and addr in net for net in _networks(allow_ips))


@dataclass(frozen=True, slots=True)
class Caller:
    key: KeyState
    user: UserState
    group: str  # the group the call is routed and billed in ("auto" until the model is known)


def unauthenticated(code: str, message: str) -> GatewayError:
    return GatewayError(401, code, message)


async def authenticate(state: State, request: Request, *, gemini: bool, check_quota: bool = True) -> Caller:
    """Rows 1–5: the key, its status, its owner, the client IP and the key's group."""
    raw = raw_key(request, gemini)
    key = await state.keys.lookup(raw) if raw else None
    if key is None or key.deleted:
        raise unauthenticated("invalid_api_key", "invalid API key")
    now = state.clock.now_s()
    if key.status == KeyStatus.DISABLED:
        raise unauthenticated("token_disabled", "this API key is disabled")
    if key.status == KeyStatus.EXPIRED or key.expired(now):
        if key.status == KeyStatus.ENABLED:
            await state.keys.mark_status(key, KeyStatus.EXPIRED)
        raise unauthenticated("token_expired", "this API key has expired")
    if key.status == KeyStatus.EXHAUSTED:
        raise unauthenticated("token_exhausted", "this API key's quota is used up")
    user = await state.users.state(key.user_id)
    if user is None or not user.active:
        raise GatewayError(403, "user_disabled", "the owner of this API key is disabled")
    if not ip_allowed(key.allow_ips, request.ctx.client_ip):
        raise GatewayError(403, "ip_not_allowed", "this API key may not be used from this IP address")
    group = key.group or user.group
    if key.group and key.group != AUTO_GROUP and not group_usable(state.options.settings, user, key.group):
        raise GatewayError(403, "group_not_allowed", f"group {key.group} is not available to this API key")
    return Caller(key, user, group)


def group_usable(settings: Settings, user: UserState, group: str) -> bool:
    listed = group in settings.user_usable_groups or group == user.group
    return listed and group in settings.group_ratio


async def exhausted(state: State, key: KeyState) -> GatewayError:
    """Persist status 4 and say so (the reservation found nothing left on the key)."""
    await state.keys.mark_status(key, KeyStatus.EXHAUSTED)
    return unauthenticated("token_exhausted", "this API key's quota is used up")
