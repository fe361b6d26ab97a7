"""`/api/user/2fa/*`, `DELETE /api/user/:id/2fa` and `/api/verify`: two-factor authentication and secure
verification (the login's second step is with the login, in server/auth/routes.py)."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse, raw

from server.auth.factor_schemas import (
    BackupCodes,
    CodeBody,
    TwoFactorSetup,
    TwoFactorStats,
    TwoFactorStatus,
    VerificationStatus,
    Verified,
    VerifyBody,
)
from server.auth.qr import qr_svg
from server.web.access import Access, Wire, route
from server.web.envelope import ok
from server.web.no_store import Secret
from server.web.schema import UserPath
from server.web.state import principal_of, services_of

bp = Blueprint("two_factor")


@route(bp, "GET", "/api/user/2fa/status", access=Access.USER, reply=TwoFactorStatus)
async def two_factor_status(request: Request) -> HTTPResponse:
    """Whether your 2FA is on, locked after failed codes, and how many backup codes are left."""
    return ok(await services_of(request).two_factor.status(principal_of(request).id))


@route(bp, "POST", "/api/user/2fa/setup", access=Access.USER, reply=TwoFactorSetup, secret=True)
async def two_factor_setup(request: Request) -> HTTPResponse:
    """Start setting up 2FA: a new secret, its `otpauth://` URI and 10 backup codes, shown this once.
    Replaces a setup not yet enabled; 409 when 2FA is on. Nothing changes for logins until `enable`."""
    return ok(await services_of(request).two_factor.setup(principal_of(request)))


@route(bp, "GET", "/api/user/2fa/qr", access=Access.USER, session_only=True, reply=Secret, wire=Wire.RAW,
       media_type="image/svg+xml", secret=True)
async def two_factor_qr(request: Request) -> HTTPResponse:
    """The pending 2FA setup's `otpauth://` URI (`qr_code_data` of `setup`) as a QR code, an SVG image for
    an authenticator app to scan; never stored by the browser (`no-store`). 404 without a pending setup,
    409 when 2FA is on. Sessions only; the console fetches it (with `New-Api-User`, like every call) and
    shows it as an image."""
    uri = await services_of(request).two_factor.pending_uri(principal_of(request))
    return raw(qr_svg(uri), content_type="image/svg+xml", headers={"X-Content-Type-Options": "nosniff"})


@route(bp, "POST", "/api/user/2fa/enable", access=Access.USER, body=CodeBody, reply=None)
async def two_factor_enable(request: Request, body: CodeBody) -> HTTPResponse:
    """Turn 2FA on with a TOTP code of the secret from `setup`.
    404 without a pending setup, 409 when it is on already, 400 for a wrong code (not counted toward the
    lock). From then on a password login needs a code."""
    await services_of(request).two_factor.enable(principal_of(request).id, body.code)
    return ok()


@route(bp, "POST", "/api/user/2fa/disable", access=Access.USER, body=CodeBody, reply=None)
async def two_factor_disable(request: Request, body: CodeBody) -> HTTPResponse:
    """Turn 2FA off with a TOTP or backup code; the secret and backup codes are deleted.
    404 when 2FA is off, 400 for a wrong code, 429 while 2FA checks are locked."""
    await services_of(request).two_factor.disable(principal_of(request).id, body.code)
    return ok()


@route(bp, "POST", "/api/user/2fa/backup_codes", access=Access.USER, body=CodeBody, reply=BackupCodes,
       secret=True)
async def two_factor_backup_codes(request: Request, body: CodeBody) -> HTTPResponse:
    """Replace all your backup codes, with a TOTP code (not a backup code); the new ones are shown once.
    404 when 2FA is off, 400 for a wrong code, 429 while 2FA checks are locked."""
    codes = await services_of(request).two_factor.new_backup_codes(principal_of(request).id, body.code)
    return ok(BackupCodes.of(codes))


@route(bp, "GET", "/api/user/2fa/stats", access=Access.ADMIN, reply=TwoFactorStats)
async def two_factor_stats(request: Request) -> HTTPResponse:
    """How many users (not deleted) have 2FA on, and their share as a percentage."""
    return ok(await services_of(request).two_factor.stats())


@route(bp, "DELETE", "/api/user/<user_id>/2fa", access=Access.ADMIN, path_params=UserPath, reply=None)
async def two_factor_reset(request: Request, user_id: int) -> HTTPResponse:
    """Turn off another user's 2FA (they can then log in with their password alone).
    Only for a user whose role is below yours (403); 404 for no such user or 2FA off; written to the
    manage log."""
    await services_of(request).two_factor.admin_reset(principal_of(request), user_id)
    return ok()


@route(bp, "POST", "/api/verify", access=Access.USER, session_only=True, critical=True, body=VerifyBody,
       reply=Verified)
async def verify(request: Request, body: VerifyBody) -> HTTPResponse:
    """Verify this session with a second factor, for the actions that need it (valid 5 minutes).
    `2fa` takes a TOTP or backup code (a wrong one counts toward the 2FA lock; 429 while locked);
    `passkey` takes the passkey assertion made for this session in the last minute. 400 when you have
    neither 2FA nor a passkey, for an unknown method, `2fa` without 2FA, or a failed check."""
    return ok(await services_of(request).verification.verify(principal_of(request), body.method, body.code))


@route(bp, "GET", "/api/verify/status", access=Access.USER, reply=VerificationStatus)
async def verify_status(request: Request) -> HTTPResponse:
    """Whether this session holds a valid verification, made with which method, until when."""
    return ok(await services_of(request).verification.status(principal_of(request)))
