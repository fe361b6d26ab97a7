"""Access levels, declared once per route (with `route(...)`, defined in `server.web.routing` and
re-exported here).

Every route registers through `route(...)`, which stores `access`, `critical` and `session_only` (and
the route's schemas) in the Sanic route's `ctx`. The guard middleware (server.auth.guard) and the
access-matrix test read them from there; a route without a declared level is refused at start-up.
`same_site_only` is the one rule of which routes a browser may send only from this site (the guard's
cross-site refusal, server/auth/origin.py; the API document says so on each).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from core.identity import Role

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class Access(IntEnum):
    PUBLIC = 0
    USER = 1
    ADMIN = 10
    ROOT = 100
    API_KEY = -1  # model-call routes and others authenticated by an API key, not a login

    def admits(self, role: int) -> bool:
        if self is Access.ROOT:
            return role == Role.ROOT
        return role >= int(self)


def same_site_only(method: str, ctx: Any) -> bool:
    """Whether a browser may send this route's requests only from this site (the guard refuses a
    cross-site one: server/auth/origin.py): every route whose method changes state (not GET, HEAD or
    OPTIONS) — login and every other route that sets a session among them —, except those authenticated by
    an API key (no cookie a page of another site could ride) and the passthrough routes (the payment
    webhook: a provider's server that proves itself by its signature)."""
    return (method.upper() not in SAFE_METHODS and getattr(ctx, "access", None) is not Access.API_KEY
            and not getattr(ctx, "passthrough", False))


from server.web.routing import Wire, route  # noqa: E402  (re-exported: every routes.py imports it from here)

__all__ = ["SAFE_METHODS", "Access", "Role", "Wire", "route", "same_site_only"]
