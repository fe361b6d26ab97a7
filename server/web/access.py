"""Access levels, declared once per route, and the route decorator that records them.

Every route registers through `route(...)`, which stores `access`, `critical` and `session_only` in the
Sanic route's `ctx`. The guard middleware (server.auth.guard) and the access-matrix test read them from
there; a route without a declared level is refused at start-up.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import Any

from sanic import Blueprint

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


Handler = Callable[..., Any]


def route(bp: Blueprint, method: str, path: str, *, access: Access, critical: bool = False,
          session_only: bool = False) -> Callable[[Handler], Handler]:
    """Register a handler with its access level (the only way routes are added)."""
    register: Callable[[Handler], Handler] = bp.route(
        path, methods=[method], ctx_access=access, ctx_critical=critical, ctx_session_only=session_only
    )
    return register
