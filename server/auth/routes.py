"""`/api/user/login`, `/api/user/logout`, `/api/user/register`, `/api/user/token`."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.accounts.rules import PASSWORD_MAX, USERNAME_MAX
from server.accounts.views import login_view
from server.auth import service
from server.auth.guard import clear_session_cookie, secure_cookies, set_session_cookie
from server.auth.identity import session_cookie
from server.auth.service import EMAIL_MAX
from server.web.access import Access, route
from server.web.body import Fields
from server.web.envelope import ok
from server.web.state import principal_of, state_of

bp = Blueprint("auth")
# Nothing longer can name an account or be its password: refused before any lookup, hash or counter.
LOGIN_NAME_MAX = max(USERNAME_MAX, EMAIL_MAX)


@route(bp, "POST", "/api/user/login", access=Access.PUBLIC, critical=True)
async def login(request: Request) -> HTTPResponse:
    f = Fields.of(request)
    state = state_of(request)
    result = await service.login(
        state,
        username=f.string("username", required=True, trim=True, min_len=1, max_len=LOGIN_NAME_MAX),
        password=f.string("password", required=True, min_len=1, max_len=PASSWORD_MAX),
        client_ip=request.ctx.client_ip,
        old_session=session_cookie(request),
    )
    if result.require_2fa:
        response = ok({"require_2fa": True}, "2FA code required")
    else:
        assert result.user is not None
        response = ok(login_view(result.user))
    set_session_cookie(response, result.session_id, secure=secure_cookies(state))
    return response


@route(bp, "GET", "/api/user/logout", access=Access.PUBLIC)
async def logout(request: Request) -> HTTPResponse:
    state = state_of(request)
    await service.logout(state, session_cookie(request))
    response = ok()
    clear_session_cookie(response, secure=secure_cookies(state))
    return response


@route(bp, "POST", "/api/user/register", access=Access.PUBLIC, critical=True)
async def register(request: Request) -> HTTPResponse:
    f = Fields.of(request)
    await service.register(
        state_of(request),
        username=f.string("username", required=True, trim=True),
        password=f.string("password", required=True),
        email=f.string("email", default="", trim=True),
        aff_code=f.string("aff_code", default=""),  # a code: never trimmed (README decision 9)
    )
    return ok()


@route(bp, "GET", "/api/user/token", access=Access.USER)
async def access_token(request: Request) -> HTTPResponse:
    return ok(await service.new_access_token(state_of(request), principal_of(request).id))
