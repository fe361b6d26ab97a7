"""Access levels, declared once per route (with `route(...)`, defined in `server.web.routing` and
re-exported here).

Every route registers through `route(...)`, which stores `access`, `critical` and `session_only` (and
the route's schemas) in the Sanic route's `ctx`. The guard middleware (server.auth.guard) and the
access-matrix test read them from there; a route without a declared level is refused at start-up.
"""

from __future__ import annotations

from enum import IntEnum

from core.identity import Role


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


from server.web.routing import Wire, route  # noqa: E402  (re-exported: every routes.py imports it from here)

__all__ = ["Access", "Role", "Wire", "route"]
