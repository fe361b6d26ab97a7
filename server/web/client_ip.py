"""The client's IP: the peer address, or the `X-Forwarded-For` hop just before our trusted proxies."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from sanic import Request

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _trusted(addr: str, proxies: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return False
    return any(ip in net for net in proxies)


def client_ip(request: Request, proxies: Sequence[Network]) -> str:
    peer = str(request.conn_info.client_ip) if request.conn_info else ""
    if not proxies or not _trusted(peer, proxies):
        return peer
    forwarded: str = request.headers.get("x-forwarded-for", "")
    hops = [h.strip() for h in forwarded.split(",") if h.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, proxies):
            return hop
    return hops[0] if hops else peer
