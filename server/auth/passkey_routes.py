"""`/api/user/passkey…`: passkey status, deletion, registration, login and verification, and the admin reset
(docs/api/auth.md#passkeys)."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.auth.identity import session_cookie
from server.auth.passkey_schemas import (
    AssertionCredential,
    PasskeyDeleteQuery,
    PasskeyOptions,
    PasskeyRegistered,
    PasskeysDeleted,
    PasskeyStatus,
    PasskeyVerified,
    RegistrationCredential,
)
from server.auth.schemas import LoginView
from server.web.access import Access, route
from server.web.envelope import ok
from server.web.schema import UserPath
from server.web.site import request_site
from server.web.state import principal_of, services_of

bp = Blueprint("passkeys")


@route(bp, "GET", "/api/user/passkey", access=Access.USER, reply=PasskeyStatus)
async def passkey_status(request: Request) -> HTTPResponse:
    """Your passkeys.
    How many you have, when one was last used, and each one's id, attachment and dates. Answers whether
    passkeys are switched on or not."""
    return ok(await services_of(request).passkeys.status(principal_of(request).id))


@route(bp, "DELETE", "/api/user/passkey", access=Access.USER, session_only=True, query=PasskeyDeleteQuery,
       reply=PasskeysDeleted)
async def delete_passkeys(request: Request, query: PasskeyDeleteQuery) -> HTTPResponse:
    """Delete one of your passkeys (`credential_id`) or all of them.
    Needs a secure verification made in the last 5 minutes (403 `VERIFICATION_REQUIRED` otherwise); 404
    when there is nothing to delete."""
    deleted = await services_of(request).passkeys.delete(principal_of(request), query.credential_id or None)
    return ok(PasskeysDeleted.of(deleted))


@route(bp, "POST", "/api/user/passkey/register/begin", access=Access.USER, session_only=True,
       reply=PasskeyOptions)
async def register_begin(request: Request) -> HTTPResponse:
    """Start adding a passkey: the options for `navigator.credentials.create()`.
    Excludes your existing passkeys; 409 once you have 10. With 2FA on, needs a secure verification made
    with 2FA. The challenge stays in your session for 120 s; a new begin replaces it."""
    options = await services_of(request).passkeys.register_begin(principal_of(request), request_site(request))
    return ok(PasskeyOptions.of(options))


@route(bp, "POST", "/api/user/passkey/register/finish", access=Access.USER, session_only=True,
       body=RegistrationCredential, reply=PasskeyRegistered)
async def register_finish(request: Request, body: RegistrationCredential) -> HTTPResponse:
    """Finish adding a passkey with the browser's answer.
    The pending challenge is used up whatever the outcome; 400 if the answer does not verify, 409 if the
    passkey is already registered or you have 10."""
    credential_id = await services_of(request).passkeys.register_finish(
        principal_of(request), request_site(request), body.model_dump(exclude_none=True))
    return ok(PasskeyRegistered.of(credential_id))


@route(bp, "POST", "/api/user/passkey/login/begin", access=Access.PUBLIC, critical=True, reply=PasskeyOptions)
async def login_begin(request: Request) -> HTTPResponse:
    """Start a passkey login: the options for `navigator.credentials.get()`.
    Any passkey registered here may answer (no credential list); the challenge is valid for 120 s."""
    return ok(PasskeyOptions.of(await services_of(request).passkeys.login_begin(request_site(request))))


@route(bp, "POST", "/api/user/passkey/login/finish", access=Access.PUBLIC, critical=True,
       body=AssertionCredential, reply=LoginView)
async def login_finish(request: Request, body: AssertionCredential) -> HTTPResponse:
    """Log in with the browser's passkey answer.
    Sets the `session` cookie like a password login, with no 2FA step. 401 if the challenge is unknown or
    expired, the passkey unknown, or the answer does not verify (a counter that went backwards also flags
    the passkey); 403 if the account is disabled."""
    services = services_of(request)
    result = await services.passkeys.login_finish(request_site(request), body.model_dump(exclude_none=True),
                                                  session_cookie(request))
    response = ok(LoginView.of(result.user))
    services.cookies.set(response, result.session_id)
    return response


@route(bp, "POST", "/api/user/passkey/verify/begin", access=Access.USER, session_only=True,
       reply=PasskeyOptions)
async def verify_begin(request: Request) -> HTTPResponse:
    """Start proving it is you with a passkey: options listing your passkeys.
    404 if you have none. The challenge stays in your session for 120 s."""
    options = await services_of(request).passkeys.verify_begin(principal_of(request), request_site(request))
    return ok(PasskeyOptions.of(options))


@route(bp, "POST", "/api/user/passkey/verify/finish", access=Access.USER, session_only=True,
       body=AssertionCredential, reply=PasskeyVerified)
async def verify_finish(request: Request, body: AssertionCredential) -> HTTPResponse:
    """Finish proving it is you with one of your passkeys.
    Marks your session as passkey-ready; confirm with `POST /api/verify` (method `passkey`) within 60 s.
    400 if the passkey is not yours or the answer does not verify."""
    await services_of(request).passkeys.verify_finish(principal_of(request), request_site(request),
                                                      body.model_dump(exclude_none=True))
    return ok(PasskeyVerified.of())


@route(bp, "DELETE", "/api/user/<user_id>/reset_passkey", access=Access.ADMIN, path_params=UserPath,
       reply=PasskeysDeleted)
async def reset_passkeys(request: Request, user_id: int) -> HTTPResponse:
    """Delete every passkey of a user.
    Only for users below your role (403 otherwise); 404 if the user does not exist or has no passkey.
    Logged as a manage action."""
    deleted = await services_of(request).passkeys.admin_reset(principal_of(request), user_id)
    return ok(PasskeysDeleted.of(deleted))
