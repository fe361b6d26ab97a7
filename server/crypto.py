"""Secrets at rest: authenticated encryption, keyed digests and password hashes.

- `SecretBox.encrypt/decrypt`: AES-256-GCM under a key derived (HKDF-SHA256) from SECRET_KEY; the stored
  form is `v1:` + base64url(nonce ‖ ciphertext).
- `SecretBox.digest`: HMAC-SHA256 under a second derived key, hex; used to look up access tokens and keys
  without storing them.
- `Passwords`: argon2id; hashing runs in a thread so the event loop never blocks on it.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF


def _derive(secret: str, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=b"tollway", info=info).derive(secret.encode())


def sha256_hex(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


class SecretBox:
    PREFIX = "v1:"

    def __init__(self, secret_key: str) -> None:
        self._aead = AESGCM(_derive(secret_key, b"tollway encryption v1"))
        self._mac_key = _derive(secret_key, b"tollway hmac v1")

    def encrypt(self, plaintext: str) -> str:
        nonce = os.urandom(12)
        sealed = self._aead.encrypt(nonce, plaintext.encode(), None)
        return self.PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode()

    def decrypt(self, stored: str) -> str:
        if not stored.startswith(self.PREFIX):
            raise ValueError("not an encrypted value")
        raw = base64.urlsafe_b64decode(stored[len(self.PREFIX):])
        return self._aead.decrypt(raw[:12], raw[12:], None).decode()

    def digest(self, value: str) -> str:
        return hmac.new(self._mac_key, value.encode(), hashlib.sha256).hexdigest()


DUMMY_HASH = ("$argon2id$v=19$m=19456,t=2,p=1$BIV8QFI61reqKe/xK6lnuw"
              "$iQWRmi1Gh5BebHSe4GPW0ZiFzIMdsFh2Qb9EMNHioBk")
"""An argon2id hash, at the default parameters, of a password no account has ("tollway-dummy-password"):
the login of an unknown account checks it, so that it costs what checking a real account's costs. Written
here rather than hashed at start, which cost every worker (and every test app) one slow hash."""


class Passwords:
    def __init__(self, time_cost: int = 2, memory_cost: int = 19456, parallelism: int = 1) -> None:
        # OWASP's argon2id baseline (19 MiB, t=2, p=1): a deliberately slow hash.
        self._hasher = PasswordHasher(time_cost=time_cost, memory_cost=memory_cost, parallelism=parallelism)
        same_cost = not self._hasher.check_needs_rehash(DUMMY_HASH)
        self._dummy = DUMMY_HASH if same_cost else self._hasher.hash("tollway-dummy-password")

    async def hash(self, password: str) -> str:
        return await asyncio.to_thread(self._hasher.hash, password)

    async def verify(self, stored: str | None, password: str) -> bool:
        """Constant work whether or not the account exists (`stored=None` checks a dummy hash)."""

        def _check() -> bool:
            try:
                return self._hasher.verify(stored or self._dummy, password) and stored is not None
            except (VerificationError, InvalidHashError):
                return False

        return await asyncio.to_thread(_check)
