"""Where a channel's key may be sent: the private-address policy, shared by the channel rules (checked when
a `base_url` is saved) and the upstream transports (checked when a connection is opened).

Every model call sends a provider key to its channel's address. An address inside the deployment's own
network — loopback, the private ranges (RFC 1918, ULA `fc00::/7`), link-local (`169.254.0.0/16` with the
cloud metadata services, `fe80::/10`), carrier-grade NAT (`100.64.0.0/10`), unspecified, multicast,
reserved and documentation ranges, and the IPv6 forms that embed such an IPv4 address (`::ffff:127.0.0.1`,
6to4, NAT64) — is refused unless the operator allowed it with `UPSTREAM_ALLOW_PRIVATE` (`true`, or the
networks allowed, e.g. `10.1.2.0/24`). The setting is process configuration, not a site option: whoever
runs the process decides what its network exposes; no web account, root included, can open it.

The check at connect time is on the address actually connected to (after DNS), so a name that resolved to
a public address when it was saved and to 127.0.0.1 later (DNS rebinding) is still refused. It costs one
dictionary lookup per new connection (verdicts are cached per address) and nothing on a kept-alive one.
"""

from __future__ import annotations

import asyncio
import socket
import time
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

Network = IPv4Network | IPv6Network
IPAddress = IPv4Address | IPv6Address

ANY_ADDRESS: tuple[Network, ...] = (ip_network("0.0.0.0/0"), ip_network("::/0"))
SHARED_SPACE = ip_network("100.64.0.0/10")  # carrier-grade NAT (RFC 6598)
NAT64 = ip_network("64:ff9b::/96")
HINT = "set UPSTREAM_ALLOW_PRIVATE to allow private destinations"
RESOLVE_TTL = 10.0  # seconds a connect-time resolution is reused (aiohttp's own DNS cache default)
SAVE_RESOLVE_TIMEOUT = 3.0  # seconds; a name that does not resolve by then is accepted on save
VERDICTS_MAX = 4096
RESOLVED_MAX = 1024


class DestinationRefused(OSError):
    """An address the policy forbids (an `OSError`, so a transport treats it as a failed connect)."""


def embedded_ipv4(ip: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, 6to4, NAT64), if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in NAT64:
        return IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_public(ip: IPAddress) -> bool:
    """A globally routable unicast address, not one of the internal ranges named in the module doc."""
    if isinstance(ip, IPv6Address):
        inner = embedded_ipv4(ip)
        if inner is not None:
            return is_public(inner)
        if ip.is_site_local:
            return False
    if ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_unspecified or ip.is_multicast \
            or ip.is_reserved or ip in SHARED_SPACE:
        return False
    return ip.is_global


def literal_ip(host: str) -> IPAddress | None:
    """`host` as an IP address when it is one (brackets and an IPv6 zone accepted), else None."""
    text = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ip_address(text.split("%", 1)[0])
    except ValueError:
        return None


class DestinationPolicy:
    """Which addresses upstream connections may reach: public ones, plus the `allowed` networks."""

    def __init__(self, allowed: tuple[Network, ...] = ()) -> None:
        self.allowed = allowed
        self.allows_all = all(any(n.version == v and n.prefixlen == 0 for n in allowed) for v in (4, 6))
        self._verdicts: dict[str, str | None] = {}
        self._resolved: dict[tuple[str, int], tuple[float, list[str]]] = {}

    def refusal(self, address: str) -> str | None:
        """None when `address` (an IP address) may be contacted, else why not — for a log line or a 400."""
        if self.allows_all:
            return None
        try:
            return self._verdicts[address]
        except KeyError:
            pass
        ip = literal_ip(address)
        if ip is None:
            verdict: str | None = f"{address!r} is not an IP address"
        elif is_public(ip) or any(ip.version == n.version and ip in n for n in self.allowed) or (
                isinstance(ip, IPv6Address) and (inner := embedded_ipv4(ip)) is not None
                and any(n.version == 4 and inner in n for n in self.allowed)):
            verdict = None
        else:
            verdict = f"{address} is a private or internal address ({HINT})"
        if len(self._verdicts) >= VERDICTS_MAX:
            self._verdicts.clear()
        self._verdicts[address] = verdict
        return verdict

    def check(self, address: str) -> None:
        """Raise `DestinationRefused` for a forbidden address."""
        reason = self.refusal(address)
        if reason is not None:
            raise DestinationRefused(reason)

    async def addresses(self, host: str, port: int) -> list[str]:
        """The addresses of `host` that may be contacted, in resolver order (cached `RESOLVE_TTL` s).

        Raises `DestinationRefused` when every address is forbidden, `OSError` (`socket.gaierror`) when
        the name does not resolve."""
        ip = literal_ip(host)
        if ip is not None:
            self.check(str(ip))
            return [str(ip)]
        key = (host, port)
        now = time.monotonic()
        cached = self._resolved.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        found = await resolve(host, port)
        usable = [a for a in found if self.refusal(a) is None]
        if not usable:
            raise DestinationRefused(self.refusal(found[0]) if found else f"{host} has no address")
        if len(self._resolved) >= RESOLVED_MAX:
            self._resolved.clear()
        self._resolved[key] = (now + RESOLVE_TTL, usable)
        return usable

    async def host_refusal(self, host: str) -> str | None:
        """Why `host` (a name or a literal address) may not be a channel's destination, or None.

        Used when a `base_url` is saved: every address the name resolves to must be allowed. A name that
        does not resolve (yet) is accepted — the connect-time check still applies to it."""
        if self.allows_all:
            return None
        ip = literal_ip(host)
        if ip is not None:
            return self.refusal(str(ip))
        name = host.rstrip(".").lower()
        if name == "localhost" or name.endswith(".localhost"):
            return f"{host} is a loopback name ({HINT})"
        try:
            async with asyncio.timeout(SAVE_RESOLVE_TIMEOUT):
                found = await resolve(host, 443)
        except (OSError, TimeoutError):
            return None
        for address in found:
            reason = self.refusal(address)
            if reason is not None:
                return f"{host} resolves to {reason}"
        return None


async def resolve(host: str, port: int) -> list[str]:
    """The distinct addresses of `host` for a TCP connection, in resolver order."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))
