"""The TOTP second factor of an account: whether it is on, and checking a code under the failure lock
(docs/api/auth.md#two-factor-authentication).

`TotpFactor` is what the password login asks (`enabled`, the `SecondFactor` protocol) and what every
2FA check goes through (`check`): login step 2, `/api/verify` with `2fa`, disabling 2FA and new backup
codes. Enabling a pending setup does not go through it (its failures are not counted).

The lock: 5 consecutive failed checks lock the account's 2FA checks for 300 s; while locked they answer
429 with `Retry-After` and no code is looked at. The state lives in the backend (Redis when configured),
so every worker and node shares it:

- `2fa_fail:<user id>`: the attempts since the last success or lock, incremented (atomically) *before*
  the code is checked, so however many attempts arrive at once, at most 5 are checked per lock period;
  a success deletes it. Forgotten after a day without a lock.
- `2fa_lock:<user id>`: the unix second the lock ends, on the service's clock (so tests move it); set by
  the attempt that reaches 5 failures (or by one counted past 5), which then resets the count.

An attempt looks at the lock before and after it counts itself: the lock is always set before the count
is reset, so an attempt counted after a reset sees the lock and is refused (and resets the count again:
nothing counts while locked).
"""

from __future__ import annotations

import hmac
from enum import Enum

from backend.base import KeyValue
from models.db import Database
from models.two_factor import TwoFactorRepository
from server import metrics
from server.auth.totp import backup_digest_input, is_totp_code, matching_step
from server.clock import Clock
from server.crypto import SecretBox
from server.errors import BadRequest, TooManyRequests

FAIL_LIMIT = 5
LOCK_SECONDS = 300
FAIL_MEMORY = 86_400  # a count of failures with no lock is forgotten after a day
LOCKED_MESSAGE = "too many failed 2FA attempts, try again later"
REUSED_CODE = "TOTP_CODE_REUSED"
"""The `code` of a refusal of a TOTP code whose time step was already used (the console words it)."""


WRONG_CODE = "code: invalid 2FA code"
USED_CODE = "code: this code was just used; wait for the next code of your app"


class Check(Enum):
    """What a code check found: a valid code, a wrong one, or a valid TOTP code of a time step already
    used (a replay, or the same code typed twice: the person should wait for the app's next code)."""

    PASSED = "passed"
    WRONG = "wrong"
    REUSED = "reused"


def fail_key(user_id: int) -> str:
    return f"2fa_fail:{user_id}"


def lock_key(user_id: int) -> str:
    return f"2fa_lock:{user_id}"


def refused_code(verdict: Check) -> BadRequest:
    """The 400 of a code check that did not pass (`code` `TOTP_CODE_REUSED` for a code used already)."""
    if verdict is Check.REUSED:
        return BadRequest(USED_CODE, code=REUSED_CODE)
    return BadRequest(WRONG_CODE)


class TotpFactor:
    """Reads the `two_factor` rows and keeps the failure lock; one instance per worker."""

    def __init__(self, *, db: Database, backend: KeyValue, box: SecretBox, clock: Clock) -> None:
        self.db = db
        self.backend = backend
        self.box = box
        self.clock = clock

    async def enabled(self, user_id: int) -> bool:
        async with self.db.transaction() as tx:
            return await TwoFactorRepository(tx).is_enabled(user_id)

    # ---- the lock ---------------------------------------------------------------------------------------

    async def locked_for(self, user_id: int) -> int:
        """Seconds until the account's 2FA checks are allowed again; 0 when they are."""
        raw = await self.backend.get_text(lock_key(user_id))
        until = int(raw) if raw and raw.isdigit() else 0
        return max(0, until - self.clock.now_s())

    async def _refuse_if_locked(self, user_id: int) -> None:
        left = await self.locked_for(user_id)
        if left > 0:
            raise TooManyRequests(LOCKED_MESSAGE, retry_after=left)

    async def _lock(self, user_id: int) -> None:
        await self.backend.set_text(lock_key(user_id), str(self.clock.now_s() + LOCK_SECONDS), LOCK_SECONDS)
        await self.backend.delete(fail_key(user_id))
        metrics.sign_in_locked()  # it locks the sign-in's second step too

    async def clear(self, user_id: int) -> None:
        """Forget failures and any lock (2FA was removed)."""
        await self.backend.delete(fail_key(user_id), lock_key(user_id))

    # ---- checks -----------------------------------------------------------------------------------------

    async def check(self, user_id: int, code: str, *, backup: bool = True) -> Check:
        """Whether `code` is a valid TOTP code (or, when `backup`, an unspent backup code, then spent) of
        the user's enabled 2FA. Counts toward the lock, a reused code too; raises `TooManyRequests` while
        locked."""
        await self._refuse_if_locked(user_id)
        attempt = await self.backend.incr(fail_key(user_id), FAIL_MEMORY)
        left = await self.locked_for(user_id)
        if left > 0:  # a concurrent attempt locked it since the first look (and reset the count just
            await self.backend.delete(fail_key(user_id))  # before this one counted: undo that)
            raise TooManyRequests(LOCKED_MESSAGE, retry_after=left)
        if attempt > FAIL_LIMIT:  # more attempts at once than the lock allows: the lock starts now
            await self._lock(user_id)
            raise TooManyRequests(LOCKED_MESSAGE, retry_after=LOCK_SECONDS)
        if is_totp_code(code):
            verdict = await self._check_totp(user_id, code)
        else:
            spent = backup and await self._spend_backup_code(user_id, code)
            verdict = Check.PASSED if spent else Check.WRONG
        if verdict is Check.PASSED:
            await self.backend.delete(fail_key(user_id))
        elif attempt >= FAIL_LIMIT:
            await self._lock(user_id)
        return verdict

    async def _check_totp(self, user_id: int, code: str) -> Check:
        async with self.db.transaction() as tx:
            repo = TwoFactorRepository(tx)
            row = await repo.get(user_id)
            if row is None or not row.enabled:
                return Check.WRONG
            step = matching_step(self.box.decrypt(row.secret), code, self.clock.now())
            if step is None:
                return Check.WRONG
            # taken once: a code of this step or an earlier one is a replay
            return Check.PASSED if await repo.take_step(user_id, step) else Check.REUSED

    async def _spend_backup_code(self, user_id: int, code: str) -> bool:
        digest = self.box.digest(backup_digest_input(user_id, code)).encode()
        async with self.db.transaction() as tx:
            repo = TwoFactorRepository(tx)
            if not await repo.is_enabled(user_id):
                return False
            found: int | None = None
            for code_id, stored in await repo.backup_codes(user_id):  # all compared, in constant time
                if hmac.compare_digest(stored.encode(), digest):
                    found = code_id
            return found is not None and await repo.spend_backup_code(found)
