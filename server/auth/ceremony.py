"""The WebAuthn ceremonies as py_webauthn performs them, behind plain values.

`creation_options` / `request_options` build what the browser's `navigator.credentials.create()` / `.get()`
receive (`{"publicKey": {…}}`, from `options_to_json`); `verify_registration` / `verify_assertion` check a
browser's answer against the challenge, the relying party id, the accepted origins, user presence (and user
verification when the policy requires it) and, for an assertion, the signature under the stored key. Any
failure — malformed data included — is a `CeremonyFailed` whose message is for the server's log only.

The signature counter is not judged here: the caller compares it with the stored one in the same
statement that records it (models/passkeys.py `record_use`).
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from dataclasses import dataclass
from typing import Any

from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AttestationConveyancePreference,
    AuthenticatorAttachment,
    AuthenticatorSelectionCriteria,
    AuthenticatorTransport,
    CredentialDeviceType,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from core.relying_party import PasskeyPolicy, RelyingParty

TIMEOUT_MS = 120_000
CHALLENGE_BYTES = 32
TRANSPORTS = frozenset(t.value for t in AuthenticatorTransport)


class CeremonyFailed(Exception):
    """The browser's answer does not verify (the message says why, for the log; never sent to a client)."""


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def from_b64url(text: str) -> bytes:
    """Strict base64url (the alphabet only, optional padding); ValueError otherwise."""
    stripped = text.rstrip("=")
    if len(text) - len(stripped) > 2 or not all((c.isascii() and c.isalnum()) or c in "-_" for c in stripped):
        raise ValueError("not base64url")
    try:
        return base64.urlsafe_b64decode(stripped + "=" * (-len(stripped) % 4))
    except binascii.Error:
        raise ValueError("not base64url") from None


def new_challenge() -> bytes:
    return secrets.token_bytes(CHALLENGE_BYTES)


@dataclass(frozen=True, slots=True)
class Known:
    """A stored credential, as the options name it."""

    credential_id: str  # base64url
    transports: str  # comma-separated


def _descriptors(known: list[Known]) -> list[PublicKeyCredentialDescriptor]:
    return [PublicKeyCredentialDescriptor(
        id=from_b64url(k.credential_id),
        transports=[AuthenticatorTransport(t) for t in k.transports.split(",") if t in TRANSPORTS] or None)
        for k in known]


def _wire(options: Any) -> dict[str, Any]:
    public_key: dict[str, Any] = json.loads(options_to_json(options))
    return {"publicKey": public_key}


def creation_options(rp: RelyingParty, policy: PasskeyPolicy, *, user_id: int, username: str,
                     display_name: str, challenge: bytes, exclude: list[Known]) -> dict[str, Any]:
    selection = AuthenticatorSelectionCriteria(
        resident_key=ResidentKeyRequirement.REQUIRED,
        user_verification=UserVerificationRequirement(policy.user_verification),
        authenticator_attachment=AuthenticatorAttachment(policy.attachment) if policy.attachment else None)
    return _wire(generate_registration_options(
        rp_id=rp.rp_id, rp_name=rp.name, user_id=str(user_id).encode("ascii"), user_name=username,
        user_display_name=display_name or username, challenge=challenge, timeout=TIMEOUT_MS,
        attestation=AttestationConveyancePreference.NONE, authenticator_selection=selection,
        exclude_credentials=_descriptors(exclude)))


def request_options(rp: RelyingParty, policy: PasskeyPolicy, *, challenge: bytes,
                    allow: list[Known]) -> dict[str, Any]:
    return _wire(generate_authentication_options(
        rp_id=rp.rp_id, challenge=challenge, timeout=TIMEOUT_MS, allow_credentials=_descriptors(allow),
        user_verification=UserVerificationRequirement(policy.user_verification)))


def client_challenge(client_data_json: str) -> str | None:
    """The challenge a browser's `clientDataJSON` (base64url) carries, canonical base64url; None if none."""
    try:
        client_data = json.loads(from_b64url(client_data_json))
        challenge = client_data.get("challenge") if isinstance(client_data, dict) else None
        if not isinstance(challenge, str) or len(challenge) > 128:
            return None
        return b64url(from_b64url(challenge)) or None
    except ValueError:  # JSON, UTF-8 or base64url
        return None


@dataclass(frozen=True, slots=True)
class NewCredential:
    credential_id: str
    public_key: str
    sign_count: int
    aaguid: str
    backup_eligible: bool
    backup_state: bool


@dataclass(frozen=True, slots=True)
class Assertion:
    sign_count: int
    backup_state: bool


def verify_registration(rp: RelyingParty, policy: PasskeyPolicy, credential: dict[str, Any],
                        challenge: bytes) -> NewCredential:
    try:
        verified = verify_registration_response(
            credential=credential, expected_challenge=challenge, expected_rp_id=rp.rp_id,
            expected_origin=list(rp.origins),
            require_user_verification=policy.user_verification == "required")
    except (WebAuthnException, ValueError, TypeError, KeyError, IndexError) as exc:
        raise CeremonyFailed(str(exc)) from None
    return NewCredential(
        credential_id=b64url(verified.credential_id), public_key=b64url(verified.credential_public_key),
        sign_count=verified.sign_count, aaguid=verified.aaguid,
        backup_eligible=verified.credential_device_type == CredentialDeviceType.MULTI_DEVICE,
        backup_state=verified.credential_backed_up)


def verify_assertion(rp: RelyingParty, policy: PasskeyPolicy, credential: dict[str, Any], challenge: bytes,
                     public_key: str) -> Assertion:
    try:
        verified = verify_authentication_response(
            credential=credential, expected_challenge=challenge, expected_rp_id=rp.rp_id,
            expected_origin=list(rp.origins), credential_public_key=from_b64url(public_key),
            credential_current_sign_count=0,  # judged by the caller, atomically with the update
            require_user_verification=policy.user_verification == "required")
    except (WebAuthnException, ValueError, TypeError, KeyError, IndexError) as exc:
        raise CeremonyFailed(str(exc)) from None
    return Assertion(sign_count=verified.new_sign_count, backup_state=verified.credential_backed_up)
