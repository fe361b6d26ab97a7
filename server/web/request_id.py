"""`X-Request-Id`: the caller's if it is well-formed, else 32 random hex characters."""

from __future__ import annotations

import re
import secrets

_VALID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def request_id_from(header: str | None) -> str:
    if header and _VALID.fullmatch(header):
        return header
    return secrets.token_hex(16)
