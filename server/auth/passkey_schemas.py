"""Request and reply schemas of the passkey routes.

A `finish` body is the credential JSON a browser produces (`PublicKeyCredential.toJSON()`): `id`, `rawId`,
`type`, `response{…}`, `clientExtensionResults`, binary fields as base64url. Each field is checked for its
shape and size here (a 400 naming it); whether it verifies is the ceremony's business.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field

from models.passkeys import CREDENTIAL_ID_MAX, PasskeyCredential
from server.web.schema import QueryTextRule, Reply, Rule, Schema, TextRule, problem

_B64URL = "^[A-Za-z0-9_-]*={0,2}$"


@dataclass(frozen=True, slots=True)
class Base64UrlRule(Rule):
    """A base64url string (padding optional) of at most `max_len` characters."""

    max_len: int
    min_len: int = 1

    def check(self, value: Any) -> Any:
        if value is None:
            raise problem("is required")
        if not isinstance(value, str):
            raise problem("must be a string")
        if not self.min_len <= len(value) <= self.max_len:
            raise problem(f"must be {self.min_len}–{self.max_len} characters")
        body = value.rstrip("=")
        if len(value) - len(body) > 2 or not all(c.isascii() and (c.isalnum() or c in "-_") for c in body):
            raise problem("must be base64url")
        return value

    def extra_schema(self) -> dict[str, Any]:
        return {"minLength": self.min_len, "maxLength": self.max_len, "pattern": _B64URL}


CredentialId = Annotated[str, Base64UrlRule(CREDENTIAL_ID_MAX)]
Transport = Annotated[str, TextRule(max_len=32)]


class _Credential(Schema):
    id: CredentialId = Field(description="the credential id, base64url")
    rawId: CredentialId = Field(description="the same id, base64url")
    type: Annotated[str, TextRule(max_len=32)] = Field(description='"public-key"')
    authenticatorAttachment: Literal["platform", "cross-platform"] | None = None
    clientExtensionResults: dict[str, Any] = Field(default_factory=dict)


class AttestationResponse(Schema):
    clientDataJSON: Annotated[str, Base64UrlRule(8192)]
    attestationObject: Annotated[str, Base64UrlRule(65536)]
    transports: Annotated[list[Transport], Field(max_length=8)] = Field(default_factory=list)


class AssertionResponse(Schema):
    clientDataJSON: Annotated[str, Base64UrlRule(8192)]
    authenticatorData: Annotated[str, Base64UrlRule(8192)]
    signature: Annotated[str, Base64UrlRule(2048)]
    userHandle: Annotated[str, Base64UrlRule(128, min_len=0)] | None = None


class RegistrationCredential(_Credential):
    """What `navigator.credentials.create()` answered."""

    response: AttestationResponse


class AssertionCredential(_Credential):
    """What `navigator.credentials.get()` answered."""

    response: AssertionResponse


class PasskeyDeleteQuery(Schema):
    credential_id: Annotated[str, QueryTextRule(max_len=CREDENTIAL_ID_MAX)] = Field(
        "", description="delete only this passkey (default: all of yours)")


# ---- replies -------------------------------------------------------------------------------------------

class PasskeyItem(Reply):
    credential_id: str
    attachment: str = Field(description='"platform", "cross-platform" or "" (not said)')
    created_at: int
    last_used_at: int = Field(description="0 if never used")

    @classmethod
    def of(cls, row: PasskeyCredential) -> PasskeyItem:
        return cls(credential_id=row.credential_id, attachment=row.attachment, created_at=row.created_at,
                   last_used_at=row.last_used_at)


class PasskeyStatus(Reply):
    enabled: bool = Field(description="you have at least one passkey")
    count: int
    last_used_at: int
    credentials: list[PasskeyItem]

    @classmethod
    def of(cls, rows: Sequence[PasskeyCredential]) -> PasskeyStatus:
        """A user's passkeys (none: `enabled` false)."""
        return cls(enabled=bool(rows), count=len(rows),
                   last_used_at=max((r.last_used_at for r in rows), default=0),
                   credentials=[PasskeyItem.of(r) for r in rows])


class PasskeyOptions(Reply):
    """The options of a passkey ceremony, for `navigator.credentials.create()` (register) or `.get()`
    (login, verify)."""

    options: dict[str, Any] = Field(
        description='an opaque WebAuthn object, `{"publicKey": {…}}` with its binary fields as base64url: '
                    "hand it to the browser as it is")

    @classmethod
    def of(cls, options: dict[str, Any]) -> PasskeyOptions:
        return cls(options=options)


class PasskeysDeleted(Reply):
    """How many passkeys a deletion removed (yours, or a user's by an admin)."""

    deleted: int = Field(description="the number of passkeys removed (at least 1)")

    @classmethod
    def of(cls, deleted: int) -> PasskeysDeleted:
        return cls(deleted=deleted)


class PasskeyRegistered(Reply):
    """The passkey just added."""

    credential_id: str = Field(description="its credential id, base64url, as the passkey list shows it")

    @classmethod
    def of(cls, credential_id: str) -> PasskeyRegistered:
        return cls(credential_id=credential_id)


class PasskeyVerified(Reply):
    """The passkey answer verified: the session is ready for `POST /api/verify`."""

    verified: bool = Field(description="always true: now confirm with POST /api/verify, method passkey, "
                                       "within 60 s")

    @classmethod
    def of(cls) -> PasskeyVerified:
        return cls(verified=True)
