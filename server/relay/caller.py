"""Who is calling a model route, and may they (steps 1–5 of docs/api/gateway.md#gateway-admission-order, in
order).

The key comes from where the route's provider puts it (`Provider.caller_key`). Key and owner come from the
shared record caches (no SQL once cached); an expired or exhausted key found here has that status
persisted.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection
from dataclasses import dataclass
from functools import lru_cache

from core import groups
from core.enums import KeyStatus
from core.identity import UserState
from core.settings import Settings
from server import logging_setup
from server.clock import Clock
from server.components.channel_table import ChannelTable
from server.components.keys import KeyDirectory, KeyState
from server.components.options import Options
from server.components.users import UserDirectory
from server.errors import (
    GroupNotAllowed,
    InvalidApiKey,
    IpNotAllowed,
    TokenDisabled,
    TokenExhausted,
    TokenExpired,
    UserDisabled,
)

AUTO_GROUP = "auto"


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


async def authenticate(keys: KeyDirectory, users: UserDirectory, options: Options, clock: Clock, raw: str,
                       client_ip: str) -> Caller:
    """Rows 1–5: the key (`raw`, as sent), its status, its owner, the client IP and the key's group."""
    key = await keys.lookup(raw) if raw else None
    if key is None or key.deleted:
        raise InvalidApiKey()
    logging_setup.user_id.set(key.user_id)  # the call's log lines and access line name the key's owner
    now = clock.now_s()
    if key.status == KeyStatus.DISABLED:
        raise TokenDisabled()
    if key.status == KeyStatus.EXPIRED or key.expired(now):
        if key.status == KeyStatus.ENABLED:
            await keys.mark_status(key, KeyStatus.EXPIRED)
        raise TokenExpired()
    if key.status == KeyStatus.EXHAUSTED:
        raise TokenExhausted()
    user = await users.state(key.user_id)
    if user is None or not user.active:
        raise UserDisabled()
    if not ip_allowed(key.allow_ips, client_ip):
        raise IpNotAllowed()
    group = key.group or user.group
    if key.group and key.group != AUTO_GROUP and not group_usable(options.settings, user, key.group):
        raise GroupNotAllowed(f"group {key.group} is not available to this API key")
    return Caller(key, user, group)


def group_usable(settings: Settings, user: UserState, group: str) -> bool:
    return groups.group_usable(settings, user.group, group)


def list_groups(settings: Settings, caller: Caller) -> list[str]:
    """The groups whose models a key may list: its own, or for `auto` the usable `AutoGroups`."""
    if caller.group != AUTO_GROUP:
        return [caller.group]
    return [g for g in settings.auto_groups if group_usable(settings, caller.user, g)]


def call_group(settings: Settings, channels: ChannelTable, caller: Caller, model: str, types: Collection[int]
               ) -> str:
    """The group a call of `model` is routed and billed in: the key's, or for `auto`
    (docs/api/channels.md#abilities-and-groups) the first group of `AutoGroups` usable by the user with an
    enabled ability for the model; failing that, the first that offers it at all (its channels are down:
    503), else the first usable one (nothing offers the model: 404)."""
    if caller.group != AUTO_GROUP:
        return caller.group
    usable = [g for g in settings.auto_groups if group_usable(settings, caller.user, g)]
    for group in usable:
        if channels.serving(group, model, types):
            return group
    for group in usable:
        if channels.offered(group, model, types):
            return group
    return usable[0] if usable else caller.user.group


async def exhausted(keys: KeyDirectory, key: KeyState) -> TokenExhausted:
    """Persist status 4 and say so (the reservation found nothing left on the key)."""
    await keys.mark_status(key, KeyStatus.EXHAUSTED)
    return TokenExhausted()
