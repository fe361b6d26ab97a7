"""The request pipeline: small steps in one order, run before every handler (the app's `pipeline` hook,
server/app.py: `identify`, then each of `checks_for(request)`).

1. request id     — `X-Request-Id` echoed or made                      ┐ `identify`, synchronous,
2. client ip      — peer or trusted `X-Forwarded-For`                  ┘ every request
3. rate limits    — `/api` global and critical limits per IP (Redis or in process)   ┐ `checks`, for
4. same site      — a state-changing route (`same_site_only`) that a browser sent    │ every route but
                    from another site is a 403 (server/auth/origin.py)               │ the model calls
5. current view   — `/api`: read the version counters of the cached shared state and │
                    catch up if this worker is behind (users, options, channels      │
                    changed on another worker a moment ago)                          │
6. access         — the route's declared level; login, `New-Api-User`, role,         │
                    session-only                                                     ┘

Steps 3–6 do nothing for a route outside `/api` that is public or authenticated by API key — the
model-call routes, whose key and limits the relay checks itself — so `checks_for` gives those routes none
(decided once per route, step 4 only to the routes it concerns), and a model call runs no awaited step
here. After every handler (`Guard.finish`): the request id header, `Cache-Control: no-store` on a route
declared `secret` (server/web/no_store.py) and, when the session slid or rotated, its cookie.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from sanic import Request
from sanic.response import BaseHTTPResponse

from backend.base import Limit, RateLimits
from backend.versions import VersionTracker
from server import logging_setup
from server.auth.cookies import SessionCookies
from server.auth.identity import Identity, check_user_header
from server.auth.origin import SameSite
from server.components.sessions import COOKIE
from server.config import RateLimit
from server.errors import Forbidden, TooManyRequests
from server.web.access import Access, same_site_only
from server.web.client_ip import Network, client_ip
from server.web.no_store import NO_STORE
from server.web.request_id import request_id_from

Step = Callable[[Request], Awaitable[None]]


class Guard:
    """Built once per worker with what the steps use; `checks` is the one ordered list the app runs."""

    def __init__(self, *, trusted_proxies: tuple[Network, ...], global_limit: RateLimit,
                 critical_limit: RateLimit, backend: RateLimits, versions: VersionTracker, identity: Identity,
                 cookies: SessionCookies, same_site: SameSite) -> None:
        self.trusted_proxies = trusted_proxies
        self.global_limit = global_limit
        self.critical_limit = critical_limit
        self.backend = backend
        self.versions = versions
        self.identity = identity
        self.cookies = cookies
        self.same_site = same_site
        self.checks: tuple[Step, ...] = (self.limit_rate, self.catch_up, self.check_access)
        self.checks_same_site: tuple[Step, ...] = (self.limit_rate, self.check_origin, self.catch_up,
                                                   self.check_access)
        self._checks_by_route: dict[str, tuple[Step, ...]] = {}

    def identify(self, request: Request) -> None:
        """Steps 1–2: the request id and the client IP."""
        ctx = request.ctx
        ctx.request_id = request_id_from(request.headers.get("x-request-id"))
        logging_setup.request_id.set(ctx.request_id)  # for the lines the request writes (LOG_FORMAT=json)
        ctx.client_ip = client_ip(request, self.trusted_proxies)

    def checks_for(self, request: Request) -> tuple[Step, ...]:
        """Steps 3–6 (step 4 only for a `same_site_only` route), or none for a route outside `/api` that is
        public or authenticated by API key."""
        route = request.route
        if route is None:
            return self.checks
        checks = self._checks_by_route.get(route.name)
        if checks is None:
            access = getattr(route.ctx, "access", None)
            api = route.path.startswith("api") or route.path.startswith("/api")
            if any(same_site_only(method, route.ctx) for method in route.methods):
                checks = self.checks_same_site
            else:
                checks = self.checks if api or access not in (Access.PUBLIC, Access.API_KEY) else ()
            self._checks_by_route[route.name] = checks
        if not checks:
            request.ctx.principal = None  # as check_access leaves it for these levels
        return checks

    async def limit_rate(self, request: Request) -> None:
        if not request.path.startswith("/api"):
            return
        configured = [("api", self.global_limit)]
        if request.route is not None and getattr(request.route.ctx, "critical", False):
            configured.append(("critical", self.critical_limit))
        # the client's limits share a hash tag: one slot, one atomic step on a Redis Cluster too
        limits = [Limit(f"rl:{name}:{{{request.ctx.client_ip}}}", rate.count, rate.period)
                  for name, rate in configured if rate.enabled]
        if not limits:
            return
        result = await self.backend.gcra_many(limits)  # both or neither are charged
        if not result.allowed:
            raise TooManyRequests(retry_after=result.retry_after)

    async def check_origin(self, request: Request) -> None:
        self.same_site.check(request)

    async def catch_up(self, request: Request) -> None:
        if request.path.startswith("/api"):
            await self.versions.refresh()

    async def check_access(self, request: Request) -> None:
        request.ctx.principal = None
        route = request.route
        if route is None:
            return
        access = getattr(route.ctx, "access", None)
        if access is None:
            raise Forbidden("route has no declared access level")
        if access in (Access.PUBLIC, Access.API_KEY):
            return
        principal = await self.identity.authenticate(request)
        logging_setup.user_id.set(principal.id)  # for the request's log lines and its access line
        check_user_header(request, principal)
        if not access.admits(principal.role):
            raise Forbidden("permission denied")
        if getattr(route.ctx, "session_only", False) and principal.via != "session":
            raise Forbidden("this action requires a login session")
        request.ctx.principal = principal

    def finish(self, request: Request, response: BaseHTTPResponse) -> None:
        ctx: Any = request.ctx
        rid = getattr(ctx, "request_id", None)
        if rid and "x-request-id" not in response.headers:
            response.headers["X-Request-Id"] = rid
        if getattr(getattr(request.route, "ctx", None), "secret", False):
            response.headers.update(NO_STORE)
        raw = getattr(ctx, "set_session_cookie", None)
        if raw and not response.cookies.has_cookie(COOKIE):
            self.cookies.set(response, raw)
