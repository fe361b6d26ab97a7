"""The client's IP: the peer address, or the `X-Forwarded-For` hop just before our trusted proxies.

The header is read only when the peer itself is a trusted proxy. Hops are walked from the right (the
nearest proxy's view first) past every trusted proxy; the first untrusted hop is the client. A hop that
is not an IP address ends the walk and the peer is used instead, so a malformed header never becomes a
rate-limit key. Addresses are returned in their canonical text form (`2001:DB8::05` → `2001:db8::5`).

Without trusted proxies nothing is parsed (the peer is the answer). With them, what an address text is
(canonical form, trusted or not) is remembered per text (`_classify`, bounded), so the common case — the
same proxies and clients again — parses nothing either.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from functools import lru_cache

from sanic import Request

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@lru_cache(maxsize=8192)
def _classify(addr: str, proxies: tuple[Network, ...]) -> tuple[str | None, bool]:
    """(canonical text or None when `addr` is no IP address, whether it is one of `proxies`)."""
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return None, False
    return str(ip), any(ip in net for net in proxies)


def in_networks(addr: str, networks: Sequence[Network]) -> bool:
    """Whether the address `addr` is in one of `networks`. An IPv4 client seen through an IPv6 socket
    (`::ffff:10.0.0.5`) counts as its IPv4 address; a text that is no IP address is in none."""
    try:
        ip: Address = ipaddress.ip_address(addr)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in net for net in networks)


def client_ip(request: Request, proxies: Sequence[Network]) -> str:
    peer = str(request.conn_info.client_ip) if request.conn_info else ""
    if not proxies:
        return peer
    trusted = tuple(proxies)
    canonical, peer_trusted = _classify(peer, trusted)
    if canonical is None or not peer_trusted:
        return peer
    forwarded: str = request.headers.get("x-forwarded-for", "")
    hops = [h.strip() for h in forwarded.split(",") if h.strip()]
    first = peer
    for hop in reversed(hops):
        ip, hop_trusted = _classify(hop, trusted)
        if ip is None:
            return peer
        if not hop_trusted:
            return ip
        first = ip
    return first
