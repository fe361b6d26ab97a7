"""`/api/status`, `/api/setup`, `/api/option/`, and the API document (`/api/openapi.json`, `/api/docs`)."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse, html, json

from server.system.schemas import Option, OptionUpdate, SetupRequest, SetupState, Status
from server.web.access import Access, Wire, route
from server.web.envelope import ok
from server.web.openapi import DOCS_PAGE, ApiDocument, document
from server.web.site import request_site
from server.web.state import principal_of, services_of

bp = Blueprint("system")


@route(bp, "GET", "/api/status", access=Access.PUBLIC, reply=Status)
async def get_status(request: Request) -> HTTPResponse:
    """The site's public settings and whether it is set up.
    The passkey relying party is shown as resolved for this request (options, else `ServerAddress`, else
    the request's host)."""
    system = services_of(request).system
    return ok(system.status(await system.is_set_up(), request_site(request)))


@route(bp, "GET", "/api/setup", access=Access.PUBLIC, reply=SetupState)
async def get_setup(request: Request) -> HTTPResponse:
    """Whether the first-run setup is done (and, until then, whether root exists and the database kind)."""
    return ok(await services_of(request).system.setup_state())


@route(bp, "POST", "/api/setup", access=Access.PUBLIC, critical=True, body=SetupRequest, reply=None)
async def post_setup(request: Request, body: SetupRequest) -> HTTPResponse:
    """Run the first-run setup: create root.
    Works once; afterwards it is a 409."""
    await services_of(request).system.run_setup(
        username=body.username, password=body.password, confirm=body.confirmPassword,
        self_use=body.SelfUseModeEnabled, demo=body.DemoSiteEnabled,
    )
    return ok(None, "setup complete")


@route(bp, "GET", "/api/option/", access=Access.ROOT, reply=list[Option])
async def get_options(request: Request) -> HTTPResponse:
    """Every option with its stored value, except the secrets (keys, tokens, secrets are never listed)."""
    return ok(services_of(request).system.visible_options())


@route(bp, "PUT", "/api/option/", access=Access.ROOT, body=OptionUpdate, reply=None)
async def put_option(request: Request, body: OptionUpdate) -> HTTPResponse:
    """Change one option.
    The value is checked against the option's kind and rule; the change is logged (without the value)
    and applies on every node."""
    actor = principal_of(request)
    await services_of(request).system.update_option(actor.id, actor.user.username, body.key, body.value)
    return ok()


@route(bp, "GET", "/api/openapi.json", access=Access.PUBLIC, reply=ApiDocument, wire=Wire.RAW)
async def get_openapi(request: Request) -> HTTPResponse:
    """This API described as an OpenAPI 3.1 document, generated from the route table."""
    return json(document(request.app))


@route(bp, "GET", "/api/docs", access=Access.PUBLIC, reply=str, wire=Wire.RAW, media_type="text/html")
async def get_docs(request: Request) -> HTTPResponse:
    """A page listing every route of this API, read from `/api/openapi.json` (no external resources)."""
    return html(DOCS_PAGE)
