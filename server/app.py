"""`create_app(config)`: builds the Sanic app — routes, the request pipeline, the error handler, and the
listeners that open the worker's infrastructure and build its services — and does no work until a server
starts it."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from sanic import Request, Sanic
from sanic.response import BaseHTTPResponse

from server.accounts.email_routes import bp as email_bp
from server.accounts.routes import bp as accounts_bp
from server.auth.factor_routes import bp as two_factor_bp
from server.auth.passkey_routes import bp as passkeys_bp
from server.auth.routes import bp as auth_bp
from server.channels.balance_routes import bp as channel_balances_bp
from server.channels.key_routes import bp as channel_keys_bp
from server.channels.probe_routes import bp as channel_probes_bp
from server.channels.routes import bp as channels_bp
from server.channels.tag_routes import bp as channel_tags_bp
from server.channels.tool_routes import bp as channel_tools_bp
from server.clock import Clock
from server.config import Config
from server.console.routes import bp as console_bp
from server.console.routes import page_not_found
from server.container import Services, build_services
from server.context import State
from server.keys.routes import bp as keys_bp
from server.logs.routes import bp as logs_bp
from server.observability.routes import bp as observability_bp
from server.payments.routes import bp as payments_bp
from server.pricing.routes import bp as pricing_bp
from server.redemptions.routes import bp as redemptions_bp
from server.relay.errors import shape_for
from server.relay.routes import bp as relay_bp
from server.system.routes import bp as system_bp
from server.topups.routes import bp as topups_bp
from server.web import errors
from server.web.connections import END_MARGIN, ConnectionLimits, ended_at_deadline
from server.web.page_headers import protect_html
from server.web.state import services_of

BLUEPRINTS = (system_bp, auth_bp, two_factor_bp, passkeys_bp, accounts_bp, email_bp, channels_bp,
              channel_tags_bp, channel_keys_bp, channel_probes_bp, channel_balances_bp, channel_tools_bp,
              logs_bp, keys_bp, pricing_bp, redemptions_bp, topups_bp, payments_bp, relay_bp,
              observability_bp, console_bp)
APP_NAME = "tollway"
READINESS_TASK = "readiness"


def undeclared_routes(app: Sanic[Any, Any]) -> list[str]:
    """Routes registered without an access level (start-up refuses them; the matrix test lists them)."""
    return sorted(f"{sorted(r.methods)} /{r.path}" for r in app.router.routes
                  if getattr(r.ctx, "access", None) is None)


class _NoMiddleware(tuple[Any, ...]):
    """An empty middleware list that Sanic takes as set: it falls back to the app's response middleware
    when a route's list is empty (falsy), so this one is truthy."""

    def __bool__(self) -> bool:
        return True


def without_middleware(app: Sanic[Any, Any], blueprint_name: str) -> int:
    """Let the routes of `blueprint_name` (the model calls) run without the app's middleware; returns how
    many. Sanic wraps every route in the app's request and response middleware: two signal dispatches
    around each, a measurable share of a model call's CPU (docs/PERFORMANCE.md#figures-behind-the-code). The
    model-call routes need none of the guard's awaited steps
    (`Guard.checks_for`) and identify the request themselves (`server/relay/routes.py` `incoming`); their
    replies carry the request id. Call it once the app has finalized its middleware (Sanic's start-up
    does, before `before_server_start`); should Sanic finalize again, the middleware simply runs again."""
    prefix = f"{app.name}.{blueprint_name}."
    lean = [r for r in app.router.routes if r.name.startswith(prefix)]
    for r in lean:
        r.extra.request_middleware = deque()
        r.extra.response_middleware = _NoMiddleware()
    return len(lean)


def new_api_errors(request: Request) -> bool:
    """Whether `/api` refusals answer as new-api's do now: the option `NewApiCompatibleErrors`, read from
    the worker's in-memory option snapshot (no SQL per error) — never on a route declared with
    `real_statuses` (the payment webhook: its provider takes any 2xx as delivered and never retries)."""
    if getattr(getattr(request.route, "ctx", None), "real_statuses", False):
        return False
    state: State | None = getattr(request.app.ctx, "state", None)
    return state is not None and state.options.settings.new_api_compatible_errors


async def watch_readiness(state: State, services: Services) -> None:
    """Run the worker's first round of readiness checks before it accepts a connection, so `/readyz`
    answers from a real result from the first request on; then the task `readiness` runs one every
    `READY_INTERVAL` (server/observability/service.py says why the route itself asks nothing)."""
    await services.observability.check()
    stop = asyncio.Event()
    state.tasks.start(READINESS_TASK, services.observability.watch(stop), stop=stop.set)


def create_app(config: Config, *, clock: Clock | None = None, name: str = APP_NAME) -> Sanic[Any, Any]:
    app: Sanic[Any, Any] = Sanic(name)
    app.config.REQUEST_MAX_SIZE = config.max_body_size
    app.config.FALLBACK_ERROR_FORMAT = "json"
    app.config.ACCESS_LOG = False
    app.config.NOISY_EXCEPTIONS = False
    # The connection deadlines are kept by `Connection` (server/web/connections.py), the protocol every
    # server of this app is given; these are Sanic's names for the same limits, set to agree with it.
    limits = ConnectionLimits.of(config)
    app.config.KEEP_ALIVE_TIMEOUT = limits.keep_alive
    app.config.REQUEST_TIMEOUT = limits.head
    app.config.RESPONSE_TIMEOUT = limits.send_idle
    app.config.GRACEFUL_SHUTDOWN_TIMEOUT = limits.grace + END_MARGIN
    app.ctx.config = config

    for bp in BLUEPRINTS:
        # Sanic appends the routes of every app a blueprint is registered on to that blueprint: each app
        # registers a copy of its own, so apps built in one process (a test run builds thousands) do not
        # keep one another alive, nor make each registration slower than the one before.
        app.blueprint(bp.copy(bp.name, with_registration=False, with_ctx=True))
    errors.register(app, page_not_found(shape_for), new_api_errors)

    @app.before_server_start
    async def open_state(app: Sanic[Any, Any]) -> None:
        missing = undeclared_routes(app)
        if missing:
            raise RuntimeError(f"routes without an access level: {', '.join(missing)}")
        state = await State.open(config, clock)
        app.ctx.state = state  # the infrastructure: closed below; tests inspect its stores directly
        app.ctx.services = services = build_services(state)
        await watch_readiness(state, services)
        without_middleware(app, relay_bp.name)

    @app.after_server_stop
    async def close_state(app: Sanic[Any, Any]) -> None:
        state: State | None = getattr(app.ctx, "state", None)
        if state is not None:
            await state.close()

    @app.on_request
    async def pipeline(request: Request) -> None:  # the guard's steps; a model call awaits nothing here
        guard = services_of(request).guard
        guard.identify(request)
        if ended_at_deadline(request):  # answered 408 and nothing else: no rate limit counted, no lookup
            request.ctx.principal = None
            return
        for step in guard.checks_for(request):
            await step(request)

    @app.on_response
    def after(request: Request, response: BaseHTTPResponse) -> None:
        if getattr(getattr(request.route, "ctx", None), "cors", False):
            response.headers["access-control-allow-origin"] = "*"
        protect_html(response)  # no framing, no sniffing, a Content-Security-Policy on every page
        services_of(request).guard.finish(request, response)

    return app
