"""`/api/status`, `/api/setup`, `/api/option/`."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.errors import BadRequest
from server.system import service
from server.web.access import Access, route
from server.web.body import Fields
from server.web.envelope import ok
from server.web.state import principal_of, state_of

bp = Blueprint("system")


@route(bp, "GET", "/api/status", access=Access.PUBLIC)
async def get_status(request: Request) -> HTTPResponse:
    state = state_of(request)
    return ok(service.status(state, await service.is_set_up(state)))


@route(bp, "GET", "/api/setup", access=Access.PUBLIC)
async def get_setup(request: Request) -> HTTPResponse:
    return ok(await service.setup_state(state_of(request)))


@route(bp, "POST", "/api/setup", access=Access.PUBLIC, critical=True)
async def post_setup(request: Request) -> HTTPResponse:
    f = Fields.of(request)
    await service.run_setup(
        state_of(request),
        username=f.string("username", required=True, trim=True),
        password=f.string("password", required=True),
        confirm=f.string("confirmPassword", required=True),
        self_use=f.boolean("SelfUseModeEnabled", default=False),
        demo=f.boolean("DemoSiteEnabled", default=False),
    )
    return ok(None, "setup complete")


@route(bp, "GET", "/api/option/", access=Access.ROOT)
async def get_options(request: Request) -> HTTPResponse:
    return ok(state_of(request).options.visible())


@route(bp, "PUT", "/api/option/", access=Access.ROOT)
async def put_option(request: Request) -> HTTPResponse:
    f = Fields.of(request)
    key = f.string("key", required=True, min_len=1)
    if "value" not in f.data or not isinstance(f.data["value"], str | int | float | bool):
        raise BadRequest("value: must be a string, number or boolean")
    actor = principal_of(request)
    await service.update_option(state_of(request), actor.id, actor.user.username, key, f.data["value"])
    return ok()
