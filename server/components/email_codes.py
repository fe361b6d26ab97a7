"""The single-use secrets sent by e-mail: 6-digit verification codes and password reset tokens.

Both live in the short-lived keys (`KeyValue`: Redis when configured — every worker and node sees them —
else the SQL table `kv`, models/kv.py, so a restart forgets none), never in plain text:

| What | Key | Value | Lifetime |
|---|---|---|---|
| code | `email_code:{sha256(address)}` | HMAC of address and code, a nonce, `expires_at` | 600 s |
| wrong tries of one code | `email_code_tries:{sha256(address)}:{nonce}` | counter | 600 s |
| reset token | `password_reset:{sha256(token)}` | user id, address, `expires_at` | 900 s |
| an address's latest token | `password_reset_for:{sha256(address)}` | sha256(token) | 900 s |

`expires_at` is judged on the service clock (tests move it); the store's own expiry only cleans up. A new
code or token replaces the older one of the address. Using one is a conditional delete of exactly the
value that was checked (`delete_if_equal`), so of any number of concurrent uses exactly one succeeds, and a
code replaced meanwhile is not taken. Every check of a code counts as a try, before the comparison; the
fifth failed try deletes the code, so at most five guesses ever reach one code.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from backend.base import KeyValue
from server.clock import Clock
from server.crypto import SecretBox, sha256_hex
from server.errors import BadRequest

CODE_TTL = 600
CODE_TRIES = 5
RESET_TTL = 900
INVALID_RESET = "invalid or expired reset link"


def new_code() -> str:
    return f"{secrets.randbelow(10**6):06d}"


def _record(raw: str | None) -> dict[str, object] | None:
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _expires_at(record: dict[str, object]) -> int:
    value = record.get("expires_at")
    return value if isinstance(value, int) else 0


@dataclass(frozen=True, slots=True)
class Issued:
    """A secret made but not stored yet: `save` it once the e-mail carrying it was accepted."""

    key: str
    value: str
    secret: str  # what the e-mail carries (the code or the token)


@dataclass(frozen=True, slots=True)
class Taken:
    key: str
    value: str
    expires_at: int


class EmailCodes:
    def __init__(self, backend: KeyValue, box: SecretBox, clock: Clock) -> None:
        self.backend = backend
        self.box = box
        self.clock = clock

    @staticmethod
    def key(address: str) -> str:
        return f"email_code:{sha256_hex(address)}"

    def _digest(self, address: str, code: str) -> str:
        return self.box.digest(f"email_code|{address}|{code}")

    def issue(self, address: str) -> Issued:
        code = new_code()
        value = json.dumps({"digest": self._digest(address, code), "nonce": secrets.token_hex(8),
                            "expires_at": self.clock.now_s() + CODE_TTL})
        return Issued(self.key(address), value, code)

    async def save(self, issued: Issued) -> None:
        """Store the code (replacing the address's older one, whose tries no longer matter)."""
        await self.backend.set_text(issued.key, issued.value, CODE_TTL)

    async def take(self, address: str, code: str, field: str) -> Taken:
        """The code of `address` if `code` is it, taken for good; else a 400 naming `field`."""
        invalid = BadRequest(f"{field}: is wrong or has expired")
        key = self.key(address)
        raw = await self.backend.get_text(key)
        record = _record(raw)
        if raw is None or record is None or _expires_at(record) <= self.clock.now_s():
            raise invalid
        tries = await self.backend.incr(f"email_code_tries:{sha256_hex(address)}:{record.get('nonce')}",
                                        CODE_TTL)
        right = hmac.compare_digest(str(record.get("digest")), self._digest(address, code))
        if tries > CODE_TRIES or not right:
            if tries >= CODE_TRIES:
                await self.backend.delete_if_equal(key, raw)
            raise invalid
        if not await self.backend.delete_if_equal(key, raw):  # used (or replaced) a moment ago
            raise invalid
        return Taken(key, raw, _expires_at(record))

    async def give_back(self, taken: Taken) -> None:
        """Put a taken code back after what it was taken for failed (unless a newer one exists)."""
        left = taken.expires_at - self.clock.now_s()
        if left > 0:
            await self.backend.set_text_if_absent(taken.key, taken.value, left)

    @asynccontextmanager
    async def voucher(self, address: str, code: str, field: str) -> AsyncIterator[Voucher]:
        """A code to take later inside the block (`await voucher.redeem()`); if the block then fails, the
        code is given back, so a registration that loses a race on its username keeps its code."""
        voucher = Voucher(self, address, code, field)
        try:
            yield voucher
        except BaseException:
            if voucher.taken is not None:
                await self.give_back(voucher.taken)
            raise


class Voucher:
    def __init__(self, codes: EmailCodes, address: str, code: str, field: str) -> None:
        self.codes = codes
        self.address = address
        self.code = code
        self.field = field
        self.taken: Taken | None = None

    async def redeem(self) -> None:
        self.taken = await self.codes.take(self.address, self.code, self.field)


@dataclass(frozen=True, slots=True)
class ResetGrant:
    """A valid reset token as read: whose it is, and the exact stored value (to take it)."""

    key: str
    value: str
    user_id: int
    address: str


class ResetTokens:
    def __init__(self, backend: KeyValue, clock: Clock) -> None:
        self.backend = backend
        self.clock = clock

    @staticmethod
    def key(token: str) -> str:
        return f"password_reset:{sha256_hex(token)}"

    @staticmethod
    def latest_key(address: str) -> str:
        return f"password_reset_for:{sha256_hex(address)}"

    def issue(self, user_id: int, address: str) -> Issued:
        token = secrets.token_urlsafe(32)
        value = json.dumps({"user_id": user_id, "address": address,
                            "expires_at": self.clock.now_s() + RESET_TTL})
        return Issued(self.key(token), value, token)

    async def save(self, issued: Issued, address: str) -> None:
        """Store the token; the address's previous token (if any) stops working."""
        latest = self.latest_key(address)
        previous = await self.backend.get_text(latest)
        if previous:
            await self.backend.delete(f"password_reset:{previous}")
        await self.backend.set_text(issued.key, issued.value, RESET_TTL)
        await self.backend.set_text(latest, issued.key.removeprefix("password_reset:"), RESET_TTL)

    async def check(self, address: str, token: str) -> ResetGrant:
        """The grant of `token` if it is live and was issued for `address`; else the 400."""
        key = self.key(token)
        raw = await self.backend.get_text(key)
        record = _record(raw)
        if (raw is None or record is None or _expires_at(record) <= self.clock.now_s()
                or not hmac.compare_digest(str(record.get("address", "")), address)
                or not isinstance(record.get("user_id"), int)):
            raise BadRequest(INVALID_RESET)
        user_id = record["user_id"]
        assert isinstance(user_id, int)
        return ResetGrant(key, raw, user_id, address)

    async def take(self, grant: ResetGrant) -> None:
        """Use the token for good; a 400 if it was used a moment ago."""
        if not await self.backend.delete_if_equal(grant.key, grant.value):
            raise BadRequest(INVALID_RESET)
        await self.backend.delete_if_equal(self.latest_key(grant.address),
                                           grant.key.removeprefix("password_reset:"))
