"""`/api/status`, `/api/setup`, `/api/option/` and `/api/option/schema`, the API document
(`/api/openapi.json`, `/api/docs`), and the routes new-api's web console reads that no other domain serves
(`/api/notice`, `/api/about`, `/api/home_page_content`, `/api/models`, `/api/prefill_group/`,
`/api/user/oauth/bindings`, `/api/uptime/status`, `/api/subscription/plans`, `/api/subscription/self`,
`/api/custom-oauth-provider/`: docs/api/options.md#coming-from-new-api)."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse, html, json

from server.components.catalog import models_by_channel_type
from server.system.schemas import (
    CustomOAuthProvider,
    OAuthBinding,
    Option,
    OptionSection,
    OptionUpdate,
    PrefillGroup,
    PrefillGroupQuery,
    SetupRequest,
    SetupState,
    Status,
    SubscriptionPlanItem,
    SubscriptionSelf,
    UptimeGroup,
)
from server.web.access import Access, Wire, route
from server.web.envelope import ok
from server.web.openapi import DOCS_PAGE, DOCS_SCRIPT, DOCS_STYLE, ApiDocument, document
from server.web.page_headers import inline_source
from server.web.site import request_site
from server.web.state import principal_of, services_of

bp = Blueprint("system")
# `/api/docs` runs its own inline script and style (allowed by their hashes), reads the API document from
# this origin, and loads nothing else; no site may frame it (server/web/page_headers.py)
DOCS_CSP = "; ".join((
    "default-src 'none'", f"script-src {inline_source(DOCS_SCRIPT)}",
    f"style-src {inline_source(DOCS_STYLE)}", "connect-src 'self'", "img-src 'self'", "base-uri 'none'",
    "form-action 'none'", "frame-ancestors 'none'",
))


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


@route(bp, "GET", "/api/option/schema", access=Access.ROOT, reply=list[OptionSection])
async def get_option_schema(request: Request) -> HTTPResponse:
    """How every option is edited, by section: its kind, label, bounds and whether it is write-only.
    Secrets are described too (never their value); the console's Settings page builds its fields from this."""
    return ok(services_of(request).system.option_schema())


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
    """A page listing every route of this API, read from `/api/openapi.json` (no external resources).
    Its `Content-Security-Policy` allows its own inline script and style and requests to this origin only,
    and no framing."""
    return html(DOCS_PAGE, headers={"Content-Security-Policy": DOCS_CSP})


# ---- what new-api's console reads -----------------------------------------------------------------------

@route(bp, "GET", "/api/notice", access=Access.PUBLIC, reply=str)
async def get_notice(request: Request) -> HTTPResponse:
    """The site notice: the option `Notice` (Markdown), "" when unset."""
    return ok(services_of(request).system.notice())


@route(bp, "GET", "/api/about", access=Access.PUBLIC, reply=str)
async def get_about(request: Request) -> HTTPResponse:
    """The about page: the option `About` (Markdown, HTML or a URL), "" when unset."""
    return ok(services_of(request).system.about())


@route(bp, "GET", "/api/home_page_content", access=Access.PUBLIC, reply=str)
async def get_home_page_content(request: Request) -> HTTPResponse:
    """The home page: the option `HomePageContent`, "" when unset.
    Markdown, HTML or a URL the console shows in a frame; stored as given."""
    return ok(services_of(request).system.home_page_content())


@route(bp, "GET", "/api/models", access=Access.USER, reply=dict[str, list[str]])
async def get_models_by_channel_type(request: Request) -> HTTPResponse:
    """The built-in models by channel type: `{"<type number>": [model, …]}`.
    What a new channel of that type is offered (new-api's shape); only the types the gateway serves are
    listed. The models you may call are `GET /api/user/models`."""
    return ok(models_by_channel_type())


@route(bp, "GET", "/api/prefill_group/", access=Access.ADMIN, query=PrefillGroupQuery,
       reply=list[PrefillGroup])
async def list_prefill_groups(request: Request, query: PrefillGroupQuery) -> HTTPResponse:
    """Saved model, tag and endpoint lists for the channel form: always empty.
    Tollway keeps no such lists; the route exists so new-api's console can open the channel form."""
    return ok([])


@route(bp, "GET", "/api/user/oauth/bindings", access=Access.USER, reply=list[OAuthBinding])
async def list_oauth_bindings(request: Request) -> HTTPResponse:
    """Your sign-in identities at other providers: always empty (Tollway signs in with a password only)."""
    return ok([])


@route(bp, "GET", "/api/uptime/status", access=Access.PUBLIC, reply=list[UptimeGroup])
async def get_uptime_status(request: Request) -> HTTPResponse:
    """Uptime monitor groups for the dashboard: always empty.
    new-api reads them from an Uptime Kuma it is configured with; Tollway has no such setting
    (`uptime_kuma_enabled` is false in `/api/status`)."""
    return ok([])


@route(bp, "GET", "/api/subscription/plans", access=Access.USER, reply=list[SubscriptionPlanItem])
async def list_subscription_plans(request: Request) -> HTTPResponse:
    """Subscription plans for sale: always empty (Tollway sells top-ups, not subscriptions)."""
    return ok([])


@route(bp, "GET", "/api/subscription/self", access=Access.USER, reply=SubscriptionSelf)
async def get_own_subscriptions(request: Request) -> HTTPResponse:
    """Your subscriptions: none, and every call is paid from the balance (`wallet_only`)."""
    return ok(SubscriptionSelf.of())


@route(bp, "GET", "/api/custom-oauth-provider/", access=Access.ROOT, reply=list[CustomOAuthProvider])
async def list_custom_oauth_providers(request: Request) -> HTTPResponse:
    """Sign-in providers configured by hand: always empty (Tollway signs in with a password or a passkey)."""
    return ok([])
