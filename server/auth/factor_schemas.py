"""Request and reply schemas of two-factor authentication and secure verification."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from server.web.no_store import Secret
from server.web.schema import Reply, Schema, TextRule

CODE_MAX = 32  # far above any code we issue (6 digits, `XXXX-XXXX`); refused before any lookup

Code = Annotated[str, TextRule(min_len=1, max_len=CODE_MAX)]


class CodeBody(Schema):
    code: Code = Field(description="a 6-digit TOTP code, or a backup code (`ABCD-EFGH`; case, spaces and "
                                   "dashes do not matter) where the route accepts one")


class VerifyBody(Schema):
    method: Annotated[str, TextRule(min_len=1, max_len=16)] = Field(description="`2fa` or `passkey`")
    code: Annotated[str, TextRule(max_len=CODE_MAX)] | None = Field(
        None, description="with `2fa`: a TOTP or backup code")


class TwoFactorStatus(Reply):
    """Your second factor as it stands."""

    enabled: bool = Field(description="a password login asks for a TOTP or backup code")
    locked: bool = Field(description="2FA checks are refused for a while after 5 failures in a row")
    backup_codes_remaining: int = Field(description="backup codes not used yet; 0 while 2FA is off")

    @classmethod
    def of(cls, *, enabled: bool, locked: bool, backup_codes_remaining: int) -> TwoFactorStatus:
        return cls(enabled=enabled, locked=locked, backup_codes_remaining=backup_codes_remaining)


class TwoFactorSetup(Reply):
    """Shown once: the secret, the `otpauth://` URI to show as a QR code, and the backup codes."""

    secret: Secret = Field(description="the TOTP secret, base32, for an app that cannot scan the code")
    qr_code_data: Secret = Field(description="the `otpauth://` URI that the QR code of "
                                             "`GET /api/user/2fa/qr` holds")
    backup_codes: list[Secret] = Field(description="single-use codes that stand in for a TOTP code")

    @classmethod
    def of(cls, *, secret: str, uri: str, backup_codes: list[str]) -> TwoFactorSetup:
        return cls(secret=secret, qr_code_data=uri, backup_codes=backup_codes)


class BackupCodes(Reply):
    """Shown once: the new backup codes (every earlier one stops working)."""

    backup_codes: list[Secret] = Field(description="single-use codes that stand in for a TOTP code")

    @classmethod
    def of(cls, codes: list[str]) -> BackupCodes:
        return cls(backup_codes=codes)


class TwoFactorStats(Reply):
    """How widely 2FA is used among the users not deleted."""

    total_users: int = Field(description="users not deleted")
    enabled_users: int = Field(description="of them, those with 2FA on")
    enabled_rate: str = Field(description='a percentage with one decimal, e.g. "12.5%"')

    @classmethod
    def of(cls, *, total: int, enabled: int) -> TwoFactorStats:
        rate = 100.0 * enabled / total if total else 0.0
        return cls(total_users=total, enabled_users=enabled, enabled_rate=f"{rate:.1f}%")


class Verified(Reply):
    """This session is now verified for the actions that ask for it."""

    verified: bool = Field(description="always true (a failed check is an error instead)")
    expires_at: int = Field(description="when the verification stops being valid (unix seconds)")

    @classmethod
    def of(cls, expires_at: int) -> Verified:
        return cls(verified=True, expires_at=expires_at)


class VerificationStatus(Reply):
    """Whether this session holds a secure verification now."""

    verified: bool = Field(description="a verification is held and has not expired")
    method: str = Field(description='`2fa`, `passkey`, or "" when not verified')
    expires_at: int = Field(description="unix seconds; 0 when not verified")

    @classmethod
    def of(cls, found: tuple[str, int] | None) -> VerificationStatus:
        """From `verification_of(...)`: the method and expiry held, or None."""
        if found is None:
            return cls(verified=False, method="", expires_at=0)
        method, expires_at = found
        return cls(verified=True, method=method, expires_at=expires_at)
