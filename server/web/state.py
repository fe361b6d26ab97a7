"""Typed access to the worker's `State` and the request's principal from a Sanic request."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from sanic import Request

from server.errors import Unauthorized

if TYPE_CHECKING:
    from core.identity import Principal
    from server.context import State


def state_of(request: Request) -> State:
    return cast("State", request.app.ctx.state)


def principal_of(request: Request) -> Principal:
    principal = getattr(request.ctx, "principal", None)
    if principal is None:
        raise Unauthorized()
    return cast("Principal", principal)
