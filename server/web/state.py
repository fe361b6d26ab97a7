"""Typed access, from a Sanic request, to the worker's services and to the request's principal.

Handlers reach their service with `services_of(request).<domain>` (the container built at start-up,
`server/container.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from sanic import Request

from server.errors import Unauthenticated

if TYPE_CHECKING:
    from core.identity import Principal
    from server.container import Services


def services_of(request: Request) -> Services:
    return cast("Services", request.app.ctx.services)


def principal_of(request: Request) -> Principal:
    principal = getattr(request.ctx, "principal", None)
    if principal is None:
        raise Unauthenticated()
    return cast("Principal", principal)
