"""Request and reply schemas of two-factor authentication and secure verification."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from server.web.no_store import Secret
from server.web.schema import Schema, TextRule

CODE_MAX = 32  # far above any code we issue (6 digits, `XXXX-XXXX`); refused before any lookup

Code = Annotated[str, TextRule(min_len=1, max_len=CODE_MAX)]


class CodeBody(Schema):
    code: Code = Field(description="a 6-digit TOTP code, or a backup code (`ABCD-EFGH`; case, spaces and "
                                   "dashes do not matter) where the route accepts one")


class VerifyBody(Schema):
    method: Annotated[str, TextRule(min_len=1, max_len=16)] = Field(description="`2fa` or `passkey`")
    code: Annotated[str, TextRule(max_len=CODE_MAX)] | None = Field(
        None, description="with `2fa`: a TOTP or backup code")


class TwoFactorStatus(Schema):
    enabled: bool
    locked: bool = Field(description="2FA checks are refused for a while after 5 failures in a row")
    backup_codes_remaining: int


class TwoFactorSetup(Schema):
    """Shown once: the secret, the `otpauth://` URI to show as a QR code, and the backup codes."""

    secret: Secret
    qr_code_data: Secret
    backup_codes: list[Secret]


class BackupCodes(Schema):
    """Shown once: the new backup codes (every earlier one stops working)."""

    backup_codes: list[Secret]


class TwoFactorStats(Schema):
    total_users: int
    enabled_users: int
    enabled_rate: str = Field(description='a percentage with one decimal, e.g. "12.5%"')


class Verified(Schema):
    verified: bool
    expires_at: int = Field(description="when the verification stops being valid (unix seconds)")


class VerificationStatus(Schema):
    verified: bool
    method: str = Field(description='`2fa`, `passkey`, or "" when not verified')
    expires_at: int = Field(description="unix seconds; 0 when not verified")
