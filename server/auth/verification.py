"""Secure verification: whether the caller proved, recently and with a second factor, that they are who
their session says (docs/API.md#revealing-a-channels-key).

A few actions need it on top of their access level (revealing a channel's key). The service that guards
such an action receives a `SecureVerifier` from the container and calls `require(principal)` before
anything else; a refusal is a 403 whose `code` says why (`VERIFICATION_REQUIRED`, `VERIFICATION_EXPIRED`).

Two-factor login and passkeys, which a caller verifies with, do not exist yet, so nobody can be verified:
`NoVerificationYet` refuses every caller. The account-security work replaces it in `server/container.py`
with a verifier that reads the session's verification mark; the guarded services do not change.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, Protocol

from core.identity import Principal
from server.errors import Forbidden

VERIFICATION_REQUIRED = "VERIFICATION_REQUIRED"
VERIFICATION_EXPIRED = "VERIFICATION_EXPIRED"
REQUIRED_MESSAGE = "secure verification required"

Method = Literal["2fa", "passkey"]


class AuthMethod(StrEnum):
    """How a session's login was made (its record's `auth_method`)."""

    PASSWORD = "password"  # noqa: S105  (a login method, not a secret)
    PASSWORD_2FA = "password+2fa"  # noqa: S105
    PASSKEY = "passkey"


class SecondFactor(Protocol):
    async def enabled(self, user_id: int) -> bool:
        """Whether the user has TOTP two-factor authentication on (a password login then needs step 2)."""
        ...


class NoSecondFactorYet:
    """Until TOTP 2FA exists: nobody has it on."""

    async def enabled(self, user_id: int) -> bool:
        return False


class SecureVerifier(Protocol):
    async def require(self, principal: Principal, method: Method | None = None) -> None:
        """Return when `principal`'s session holds a fresh secure verification (made with `method`, when
        one is named); else raise `Forbidden` with the code that says why."""
        ...


class NoVerificationYet:
    """Until a caller can verify (two-factor login, passkeys): every caller is refused."""

    async def require(self, principal: Principal, method: Method | None = None) -> None:
        raise Forbidden(REQUIRED_MESSAGE, code=VERIFICATION_REQUIRED)
