"""`/api/verification`, `/api/oauth/email/bind`, `/api/reset_password`, `/api/user/reset`: e-mail codes,
binding an address, and password reset by e-mail (docs/api/auth.md#e-mail-codes-and-password-reset)."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.accounts.schemas import BindQuery, EmailQuery, PasswordReset
from server.web.access import Access, route
from server.web.envelope import ok
from server.web.state import principal_of, services_of

bp = Blueprint("email")


@route(bp, "GET", "/api/verification", access=Access.PUBLIC, critical=True, query=EmailQuery, reply=None)
async def send_code(request: Request, query: EmailQuery) -> HTTPResponse:
    """Mail a verification code to an address.
    The code has 6 digits, is valid for 10 minutes, replaces an older one and can be used once (to
    register or to bind the address); 409 if an account already uses the address. At most 2 e-mails per
    30 s per client and 5 per hour per address."""
    await services_of(request).email.send_code(query.email, request.ctx.client_ip)
    return ok()


@route(bp, "GET", "/api/oauth/email/bind", access=Access.USER, query=BindQuery, reply=None)
async def bind_email(request: Request, query: BindQuery) -> HTTPResponse:
    """Set your e-mail address.
    Needs the code mailed to it by `GET /api/verification`; 409 if another account uses the address."""
    await services_of(request).email.bind(principal_of(request), query.email, query.code)
    return ok()


@route(bp, "GET", "/api/reset_password", access=Access.PUBLIC, critical=True, query=EmailQuery, reply=None)
async def send_reset_link(request: Request, query: EmailQuery) -> HTTPResponse:
    """Mail a password reset link.
    Answers the same whether or not an account has the address; only an account's address gets the
    link, valid once for 15 minutes. Shares the e-mail limits of `GET /api/verification`."""
    await services_of(request).email.send_reset(query.email, request.ctx.client_ip)
    return ok()


@route(bp, "POST", "/api/user/reset", access=Access.PUBLIC, critical=True, body=PasswordReset, reply=None)
async def reset_password(request: Request, body: PasswordReset) -> HTTPResponse:
    """Choose a new password with a reset link.
    The link's token is used up and every session of the account ends; a password breaking the rules is
    refused and the link keeps working."""
    await services_of(request).email.reset(body.email, body.token, body.password)
    return ok()
