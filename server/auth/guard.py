"""The request pipeline: small steps in one ordered list, run before every handler.

1. request id     — `X-Request-Id` echoed or made
2. client ip      — peer or trusted `X-Forwarded-For`
3. rate limits    — `/api` global and critical limits per IP (Redis or in process)
4. current view   — `/api`: read the version counters of the cached shared state and catch up if this
                    worker is behind (users, options, channels changed on another worker a moment ago)
5. access         — the route's declared level; login, `New-Api-User`, role, session-only

and after every handler: the request id header and, when the session slid or rotated, its cookie.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from sanic import Request
from sanic.response import BaseHTTPResponse

from quota.backends.base import Limit
from server.auth.identity import authenticate, check_user_header
from server.auth.sessions import COOKIE, SESSION_TTL
from server.context import State
from server.errors import Forbidden, RateLimited
from server.web.access import Access
from server.web.client_ip import client_ip
from server.web.request_id import request_id_from

Step = Callable[[Request, State], Awaitable[None]]


async def assign_request_id(request: Request, state: State) -> None:
    request.ctx.request_id = request_id_from(request.headers.get("x-request-id"))


async def resolve_client_ip(request: Request, state: State) -> None:
    request.ctx.client_ip = client_ip(request, state.config.trusted_proxies)


async def limit_rate(request: Request, state: State) -> None:
    if not request.path.startswith("/api"):
        return
    configured = [("api", state.config.global_rate_limit)]
    if request.route is not None and getattr(request.route.ctx, "critical", False):
        configured.append(("critical", state.config.critical_rate_limit))
    limits = [Limit(f"rl:{name}:{request.ctx.client_ip}", rate.count, rate.period)
              for name, rate in configured if rate.enabled]
    if not limits:
        return
    result = await state.backend.gcra_many(limits)  # both or neither are charged
    if not result.allowed:
        raise RateLimited(retry_after=result.retry_after)


async def catch_up(request: Request, state: State) -> None:
    if request.path.startswith("/api"):
        await state.versions.refresh()


async def check_access(request: Request, state: State) -> None:
    request.ctx.principal = None
    route = request.route
    if route is None:
        return
    access = getattr(route.ctx, "access", None)
    if access is None:
        raise Forbidden("route has no declared access level")
    if access in (Access.PUBLIC, Access.API_KEY):
        return
    principal = await authenticate(state, request)
    check_user_header(request, principal)
    if not access.admits(principal.role):
        raise Forbidden("permission denied")
    if getattr(route.ctx, "session_only", False) and principal.via != "session":
        raise Forbidden("this action requires a login session")
    request.ctx.principal = principal


PIPELINE: tuple[Step, ...] = (assign_request_id, resolve_client_ip, limit_rate, catch_up, check_access)


def secure_cookies(state: State) -> bool:
    """The session cookie gets `Secure` when users reach the site over https: `PUBLIC_URL` or the
    `ServerAddress` option (changeable at run time, so read on every use) starts with `https://`."""
    return state.config.secure_cookies or str(state.options["ServerAddress"]).lower().startswith("https://")


def set_session_cookie(response: BaseHTTPResponse, raw: str, *, secure: bool) -> None:
    response.add_cookie(COOKIE, raw, path="/", max_age=SESSION_TTL, httponly=True, samesite="Strict",
                        secure=secure)


def clear_session_cookie(response: BaseHTTPResponse, *, secure: bool) -> None:
    response.add_cookie(COOKIE, "", path="/", max_age=0, httponly=True, samesite="Strict", secure=secure)


async def finish(request: Request, response: BaseHTTPResponse, state: State) -> None:
    ctx: Any = request.ctx
    rid = getattr(ctx, "request_id", None)
    if rid and "x-request-id" not in response.headers:
        response.headers["X-Request-Id"] = rid
    raw = getattr(ctx, "set_session_cookie", None)
    if raw and not response.cookies.has_cookie(COOKIE):
        set_session_cookie(response, raw, secure=secure_cookies(state))
