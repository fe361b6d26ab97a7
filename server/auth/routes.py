"""`/api/user/login`, `/api/user/login/2fa`, `/api/user/logout`, `/api/user/register`, `/api/user/token`."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.auth.factor_schemas import CodeBody
from server.auth.identity import session_cookie
from server.auth.schemas import Login, LoginReply, LoginView, Register, SecondFactorRequired
from server.web.access import Access, route
from server.web.envelope import ok
from server.web.no_store import Secret
from server.web.state import principal_of, services_of

bp = Blueprint("auth")


@route(bp, "POST", "/api/user/login", access=Access.PUBLIC, critical=True, body=Login, reply=LoginReply)
async def login(request: Request, body: Login) -> HTTPResponse:
    """Log in with a username (or e-mail) and password.
    Sets the `session` cookie. Repeated failures for one account from one address are refused for a
    while; a disabled or deleted account cannot log in. Any session cookie sent along is replaced."""
    services = services_of(request)
    result = await services.auth.login(
        username=body.username, password=body.password, client_ip=request.ctx.client_ip,
        old_session=session_cookie(request),
    )
    if result.require_2fa:
        response = ok(SecondFactorRequired.of(), "2FA code required")
    else:
        assert result.user is not None
        response = ok(LoginView.of(result.user))
    services.cookies.set(response, result.session_id)
    return response


@route(bp, "POST", "/api/user/login/2fa", access=Access.PUBLIC, critical=True, body=CodeBody,
       reply=LoginView)
async def login_second_step(request: Request, body: CodeBody) -> HTTPResponse:
    """Finish a password login that answered `require_2fa` with a TOTP or backup code.
    Needs the session cookie that login set, within 5 minutes (else 401 `login expired, please log in
    again`). A wrong code is a 401 and counts toward the 2FA lock (429 while locked). Success answers
    and sets the cookie like a password login."""
    services = services_of(request)
    done = await services.two_factor.finish_login(session_cookie(request), body.code)
    response = ok(LoginView.of(done.user))
    services.cookies.set(response, done.session_id)
    return response


@route(bp, "GET", "/api/user/logout", access=Access.PUBLIC, reply=None)
async def logout(request: Request) -> HTTPResponse:
    """Log out.
    Ends the session of the cookie sent (if any) and clears the cookie; always succeeds."""
    services = services_of(request)
    await services.auth.logout(session_cookie(request))
    response = ok()
    services.cookies.clear(response)
    return response


@route(bp, "POST", "/api/user/register", access=Access.PUBLIC, critical=True, body=Register, reply=None)
async def register(request: Request, body: Register) -> HTTPResponse:
    """Create an account.
    Only when registration is enabled. Usernames are unique regardless of case and width; an invitation
    code rewards the inviter and the new user as the options say. With e-mail verification on, `email`
    and the `verification_code` mailed to it are required; the code is checked last and used up."""
    await services_of(request).auth.register(username=body.username, password=body.password,
                                             email=body.email, aff_code=body.aff_code,
                                             verification_code=body.verification_code)
    return ok()


@route(bp, "GET", "/api/user/token", access=Access.USER, reply=Secret, secret=True)
async def access_token(request: Request) -> HTTPResponse:
    """Issue a new access token for your account.
    Shown once; the previous token stops working at once. Send it as `Authorization: Bearer <token>`
    with `New-Api-User`."""
    return ok(await services_of(request).auth.new_access_token(principal_of(request).id))
