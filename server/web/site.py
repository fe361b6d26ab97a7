"""`RequestSite`: how a request reached us (its `Host` header and scheme), for what is resolved per request
(the passkey relying party when no option names it: core/relying_party.py).

The scheme is the first value of `X-Forwarded-Proto` when it names http or https (a TLS-terminating proxy
in front), else the connection's own.
"""

from __future__ import annotations

from sanic import Request

from core.relying_party import RequestSite


def request_site(request: Request) -> RequestSite:
    forwarded = request.headers.get("x-forwarded-proto", "").split(",", 1)[0].strip().lower()
    scheme = forwarded if forwarded in ("http", "https") else request.scheme
    return RequestSite(host=request.headers.get("host", "").strip(), scheme=scheme)
