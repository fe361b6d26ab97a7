"""The rules of TOTP codes and backup codes, with no storage (docs/api/auth.md#two-factor-authentication).

- TOTP: SHA-1, 6 digits, 30-second steps (RFC 6238, pyotp); a code is checked against the current step and
  one step either side. `matching_step` says which step matched, because the replay guard needs it
  (pyotp's `verify` does not tell). Every candidate is compared in constant time, and all of them are.
- Backup codes: 10 × `XXXX-XXXX` over A–Z0–9 drawn with `secrets.choice` (no modulo bias). What a user
  types is normalized (trimmed, upper-cased, spaces and dashes dropped) before it is digested, so
  `abcd1234` and `ABCD-1234` are the same code.
- Exactly 6 ASCII digits is a TOTP code; anything else is taken as a backup code.
"""

from __future__ import annotations

import hmac
import re
import secrets
import string

import pyotp

STEP_SECONDS = 30
WINDOW = 1  # steps accepted either side of the current one
BACKUP_COUNT = 10
BACKUP_ALPHABET = string.ascii_uppercase + string.digits
_TOTP_SHAPE = re.compile(r"[0-9]{6}")


def new_secret() -> str:
    """32 base32 characters (160 bits)."""
    return pyotp.random_base32()


def provisioning_uri(secret: str, username: str, issuer: str) -> str:
    """The `otpauth://` URI an authenticator app reads from a QR code; name and issuer percent-encoded."""
    return pyotp.TOTP(secret).provisioning_uri(name=username, issuer_name=issuer)


def step_at(now: float) -> int:
    return int(now // STEP_SECONDS)


def is_totp_code(code: str) -> bool:
    return _TOTP_SHAPE.fullmatch(code) is not None


def matching_step(secret: str, code: str, now: float) -> int | None:
    """The latest time step within the window whose code equals `code`, else None."""
    if not is_totp_code(code):
        return None
    totp = pyotp.TOTP(secret)
    current = step_at(now)
    matched: int | None = None
    for step in range(current - WINDOW, current + WINDOW + 1):
        if hmac.compare_digest(totp.generate_otp(step).encode(), code.encode()):
            matched = step
    return matched


def new_backup_codes() -> list[str]:
    """Fresh backup codes as shown to the user: `XXXX-XXXX`."""
    codes = []
    for _ in range(BACKUP_COUNT):
        raw = "".join(secrets.choice(BACKUP_ALPHABET) for _ in range(8))
        codes.append(f"{raw[:4]}-{raw[4:]}")
    return codes


def normalize_backup_code(code: str) -> str:
    """What is digested: trimmed, upper-cased, without spaces and dashes."""
    return code.strip().upper().replace(" ", "").replace("-", "")


def backup_digest_input(user_id: int, code: str) -> str:
    """The text whose keyed digest is stored: bound to its user, so a digest is useless for anyone else."""
    return f"2fa-backup:{user_id}:{normalize_backup_code(code)}"
