"""The client's IP: the peer address, or the `X-Forwarded-For` hop just before our trusted proxies.

The header is read only when the peer itself is a trusted proxy. Hops are walked from the right (the
nearest proxy's view first) past every trusted proxy; the first untrusted hop is the client. A hop that
is not an IP address ends the walk and the peer is used instead, so a malformed header never becomes a
rate-limit key. Addresses are returned in their canonical text form (`2001:DB8::05` → `2001:db8::5`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from sanic import Request

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _parse(addr: str) -> Address | None:
    try:
        return ipaddress.ip_address(addr)
    except ValueError:
        return None


def _trusted(ip: Address, proxies: Sequence[Network]) -> bool:
    return any(ip in net for net in proxies)


def client_ip(request: Request, proxies: Sequence[Network]) -> str:
    peer = str(request.conn_info.client_ip) if request.conn_info else ""
    peer_ip = _parse(peer)
    if not proxies or peer_ip is None or not _trusted(peer_ip, proxies):
        return peer
    forwarded: str = request.headers.get("x-forwarded-for", "")
    hops = [h.strip() for h in forwarded.split(",") if h.strip()]
    first = peer
    for hop in reversed(hops):
        ip = _parse(hop)
        if ip is None:
            return peer
        if not _trusted(ip, proxies):
            return str(ip)
        first = str(ip)
    return first
