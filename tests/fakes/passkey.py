"""A software passkey: a WebAuthn authenticator and the browser around it, built from python-fido2 parts.

`SoftPasskey(rp_id, origin, user_id)` holds an EC P-256 key and a random 32-byte credential id.
`register(options)` answers `navigator.credentials.create()` options: authenticator data with SHA-256(rp id),
flags UP|UV|AT, counter 0 and the attested credential data (zero AAGUID, the id, the COSE ES256 key), in a
`none` attestation object; client data `{type: "webauthn.create", challenge, origin}`. `assert_(options)`
answers `.get()` options: flags UP|UV, counter + 1, client data `webauthn.get`, an ECDSA-SHA256 signature
over authenticator data ‖ SHA-256(client data JSON), `userHandle` = the user id in ASCII. Both return the
browser's JSON (binary fields base64url), as a page would post it.

Knobs for the failure cases: `origin` / `rp_id` may be changed between calls, `counter` set back, and
`flags` chosen per assertion.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from fido2.cose import ES256
from fido2.utils import websafe_decode, websafe_encode
from fido2.webauthn import (
    Aaguid,
    AttestationObject,
    AttestedCredentialData,
    AuthenticationResponse,
    AuthenticatorAssertionResponse,
    AuthenticatorAttachment,
    AuthenticatorAttestationResponse,
    AuthenticatorData,
    CollectedClientData,
    RegistrationResponse,
)

Flag = AuthenticatorData.FLAG


def challenge_of(options: dict[str, Any]) -> bytes:
    """The challenge of options as the server sent them (`{"publicKey": {"challenge": <base64url>, …}}`)."""
    return websafe_decode(options["publicKey"]["challenge"])


class SoftPasskey:
    def __init__(self, rp_id: str, origin: str, user_id: int) -> None:
        self.rp_id = rp_id
        self.origin = origin
        self.user_id = user_id
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.credential_id = os.urandom(32)
        self.counter = 0

    @property
    def id(self) -> str:
        """The credential id, base64url (as the server lists it)."""
        return websafe_encode(self.credential_id)

    def register(self, options: dict[str, Any], *, client_type: str = "webauthn.create",
                 flags: Flag = Flag.UP | Flag.UV | Flag.AT) -> dict[str, Any]:
        client = CollectedClientData.create(client_type, challenge_of(options), self.origin)
        credential = AttestedCredentialData.create(
            Aaguid(bytes(16)), self.credential_id, ES256.from_cryptography_key(self.key.public_key()))
        auth = AuthenticatorData.create(hashlib.sha256(self.rp_id.encode()).digest(), flags, 0, credential)
        response = RegistrationResponse(
            raw_id=self.credential_id,
            response=AuthenticatorAttestationResponse(
                client_data=client, attestation_object=AttestationObject.create("none", auth, {})),
            authenticator_attachment=AuthenticatorAttachment.CROSS_PLATFORM)
        body = dict(response)
        body["response"] = {**dict(body["response"]), "transports": ["usb"]}
        return body

    def assert_(self, options: dict[str, Any], *, flags: Flag = Flag.UP | Flag.UV,
                user_handle: bytes | None = None, bump: bool = True) -> dict[str, Any]:
        if bump:
            self.counter += 1
        client = CollectedClientData.create("webauthn.get", challenge_of(options), self.origin)
        auth = AuthenticatorData.create(hashlib.sha256(self.rp_id.encode()).digest(), flags, self.counter)
        signature = self.key.sign(bytes(auth) + client.hash, ec.ECDSA(hashes.SHA256()))
        handle = user_handle if user_handle is not None else str(self.user_id).encode("ascii")
        response = AuthenticationResponse(
            raw_id=self.credential_id,
            response=AuthenticatorAssertionResponse(client_data=client, authenticator_data=auth,
                                                    signature=signature, user_handle=handle),
            authenticator_attachment=AuthenticatorAttachment.CROSS_PLATFORM)
        body = dict(response)
        body["response"] = dict(body["response"])
        return body
