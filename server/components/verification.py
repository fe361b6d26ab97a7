"""Secure verification: whether the caller proved, recently and with a second factor, that they are who
their session says (docs/api/auth.md#secure-verification).

A few actions need it on top of their access level (revealing a channel's key). The service that guards
such an action receives a `SecureVerifier` from the container and calls `require(principal)` before
anything else; a refusal is a 403 whose `code` says why (`VERIFICATION_REQUIRED`, `VERIFICATION_EXPIRED`).

A session is verified by `POST /api/verify` (server/auth/verify.py) with a TOTP or backup code, or with a
passkey assertion made for it moments before; that writes `secure_verified_at` (unix seconds) and
`secure_verified_method` (`2fa` | `passkey`) into the session's record. `SessionVerifier` reads them from
the record the request was authenticated with: valid for `VERIFIED_SECONDS`, not consumed by use, and
only for that session (an access token has no session, so it is never verified).

Also here, for every domain that needs them: how a login was made (`AuthMethod`), whether an account has
its TOTP second factor on (`SecondFactor`, server/auth/second_factor.py) and how many passkeys it has
(`PasskeyPresence`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal, Protocol

from core.identity import Principal
from server.clock import Clock
from server.errors import Forbidden

VERIFICATION_REQUIRED = "VERIFICATION_REQUIRED"
VERIFICATION_EXPIRED = "VERIFICATION_EXPIRED"
REQUIRED_MESSAGE = "secure verification required"

VERIFIED_SECONDS = 300  # a verification is valid this long after it was made
PASSKEY_READY_SECONDS = 60  # a passkey assertion made for a verification must be used this soon
PASSKEY_READY_MARK = "secure_passkey_ready_at"  # the session field a passkey `verify/finish` leaves

Method = Literal["2fa", "passkey"]
METHODS: tuple[Method, ...] = ("2fa", "passkey")


class AuthMethod(StrEnum):
    """How a session's login was made (its record's `auth_method`)."""

    PASSWORD = "password"  # noqa: S105  (a login method, not a secret)
    PASSWORD_2FA = "password+2fa"  # noqa: S105
    PASSKEY = "passkey"


class SecondFactor(Protocol):
    async def enabled(self, user_id: int) -> bool:
        """Whether the user has TOTP two-factor authentication on (a password login then needs step 2)."""
        ...


class PasskeyPresence(Protocol):
    async def count(self, user_id: int) -> int:
        """How many passkeys the user has registered."""
        ...


class SecureVerifier(Protocol):
    async def require(self, principal: Principal, method: Method | None = None) -> None:
        """Return when `principal`'s session holds a fresh secure verification (made with `method`, when
        one is named); else raise `Forbidden` with the code that says why."""
        ...


def verification_of(session: dict[str, Any] | None, now: int) -> tuple[str, int] | None:
    """(method, expires_at) of the session's verification if it is still valid, else None."""
    at, method = _mark(session)
    if at <= 0 or now >= at + VERIFIED_SECONDS:
        return None
    return method, at + VERIFIED_SECONDS


def _mark(session: dict[str, Any] | None) -> tuple[int, str]:
    if not session:
        return 0, ""
    at, method = session.get("secure_verified_at"), session.get("secure_verified_method")
    when = at if isinstance(at, int) and not isinstance(at, bool) else 0
    return when, (method if isinstance(method, str) else "")


class SessionVerifier:
    """The verification mark of the caller's session record, on the service's clock."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    async def require(self, principal: Principal, method: Method | None = None) -> None:
        at, made_with = _mark(principal.session)
        if at <= 0 or (method is not None and made_with != method):
            raise Forbidden(REQUIRED_MESSAGE, code=VERIFICATION_REQUIRED)
        if self.clock.now_s() >= at + VERIFIED_SECONDS:
            raise Forbidden(REQUIRED_MESSAGE, code=VERIFICATION_EXPIRED)
