"""Credits decided in SQL, delivered to the live balance exactly once — even across a `kill -9`.

Redeeming a code, completing a top-up order and moving invitation rewards each change a SQL fact (the
code is used, the order succeeded, `aff_quota` went down) and must then credit the user's live balance
through the quota engine. Two systems cannot commit together, so the credit is recorded as an outbox row
(`pending_credits`) in the SAME transaction as the fact:

    1. one SQL transaction: the fact's conditional UPDATE + `record(tx, credit)`     (all or nothing)
    2. after the commit:    `deliver(credit)` → `QuotaEngine.credit(ref=credit.ref)` (live at once)
    3. every worker, at start-up and every `interval` s (`replay`): a row whose log row the quota sync
       has written is in SQL for good and is deleted; any other row is credited again with its `ref`
       (with a separate log database the log row is not in SQL: the quota sync then deletes the row in
       the transaction that applies the credit, and the replay only credits what is left)

The engine applies a `ref` once (it keeps the result 7 days), so step 3 changes nothing for a credit
that step 2 applied and only completes what a process that died between 1 and 2 left undone. A row is
forgotten only once its credit is durable in SQL, so a credit applied to a store that then lost it
before the sync (an embedded process killed, a Redis without persistence restarted) is applied again
rather than lost.

A credit the engine refuses for good (the balance would leave the range it computes exactly, the user
is gone, an amount that is not positive) is settled as `failed` by whichever of steps 2 and 3 meets the
refusal: the row stays, with its reason, for an admin; one error line names it once (the conditional
UPDATE lets one worker settle it); the replay never takes it again. A pass of the replay pages through
every pending row (no head of refused rows can hide the ones behind it) and stops at the first
"store unreachable"; its warnings are one line per streak of failing passes, repeated at most every
`WARN_EVERY` seconds.

Whether the credit fits under the balance cap (`BALANCE_MAX`) is decided in the fact's transaction, one
decision at a time per user: `record`, after the fact's conditional UPDATE, locks the user's row (SELECT
… FOR UPDATE; SQLite runs one transaction at a time anyway) and counts the live balance with its open
holds, every credit already decided for the user and still pending, and the new one. A credit that does
not fit raises `CreditRefused`; the transaction rolls back and the fact stays unspent (a 409), so two
concurrent facts on any workers or nodes are never both spent for room that only one of them has. Every
transaction that raises a balance takes the fact's row first and the user's row second (the admin's
quota edits take only the user's), so the locks cannot deadlock. `refusal`, before the transaction, is
only an early answer, and loads the account, which must never happen under the lock.
Details and the failure table: docs/MONEY.md#credits-decided-in-sql.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from backend.base import BackendUnavailable
from models.credits import PendingCredit, PendingCreditRepository
from models.db import Database
from models.users import UserRepository
from quota.engine import QuotaEngine
from quota.types import BALANCE_MAX, BalanceOutOfRange, BalanceUnknown
from server.clock import Clock

log = logging.getLogger("tollway.credits")

REPLAY_INTERVAL = 5.0
REPLAY_BATCH = 100
WARN_EVERY = 300  # seconds between two warnings of the same streak of failing replay passes
OUT_OF_RANGE = f"the balance would exceed the largest supported amount ({BALANCE_MAX})"


async def headroom(tx: AsyncSession, quota: QuotaEngine, user_id: int, durable: int) -> int:
    """How much more the user's balance can take, for a caller holding the user's row lock in `tx`
    (`durable`: the SQL balance read with it): `BALANCE_MAX` − the live balance with its open holds (the
    SQL balance when the store has not loaded the account — then it is the balance a load would make — or
    cannot answer) − the user's pending credits. Loads nothing (see `CreditOutbox._admit`)."""
    try:
        ceiling = (await quota.ceilings("user", [user_id])).get(user_id, durable)
    except BackendUnavailable:  # the best we know; a credit that then does not fit settles as failed
        ceiling = durable
    return BALANCE_MAX - ceiling - await PendingCreditRepository(tx).owed(user_id)


class CreditRefused(Exception):
    """The credit does not fit under the balance cap; raised inside the fact's transaction, which then
    rolls back (the service answers 409 with the fact unspent). The message is the reason."""


@dataclass(frozen=True, slots=True)
class Credit:
    """`amount` (> 0) for `user_id`, applied once per `ref`, with the log row that travels with it."""

    ref: str
    user_id: int
    amount: int
    log: dict[str, Any]

    @classmethod
    def of(cls, row: PendingCredit) -> Credit:
        return cls(ref=row.ref, user_id=row.user_id, amount=row.amount, log=row.log_row())


class _Streak:
    """Warnings of a failure that repeats every pass: the first of a streak, then at most one every
    `WARN_EVERY` seconds (with how many passes failed meanwhile); a pass without the failure ends it."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.since: int | None = None  # when the last warning was written
        self.quiet = 0  # failing passes not reported since

    def failed(self, message: str, *args: Any, first_traceback: BaseException | None = None) -> None:
        now = self.clock.now_s()
        if self.since is not None and now - self.since < WARN_EVERY:
            self.quiet += 1
            return
        exc_info = first_traceback if self.since is None else None
        suffix = f" ({self.quiet} more failing passes since the last warning)" if self.quiet else ""
        log.warning(message + suffix, *args, exc_info=exc_info)
        self.since, self.quiet = now, 0

    def ended(self) -> None:
        if self.since is not None:
            log.info("credit replay works again")
        self.since, self.quiet = None, 0


class CreditOutbox:
    """Record a credit with the SQL fact that grants it; deliver it after the commit; replay until SQL
    has it; settle it as failed when the engine refuses it for good.

    `on_committed` runs right after the commit, before the credit reaches the engine: the crash test's
    fault injection kills the process there (server/faults.py); None in production."""

    def __init__(self, *, db: Database, quota: QuotaEngine, clock: Clock,
                 on_committed: Callable[[], None] | None = None,
                 interval: float = REPLAY_INTERVAL, batch: int = REPLAY_BATCH) -> None:
        self.db = db
        self.quota = quota
        self.clock = clock
        self.on_committed = on_committed
        self.interval = interval
        self.batch = batch
        self._credit_streak = _Streak(clock)  # credits the engine could not apply now
        self._pass_streak = _Streak(clock)  # passes that failed as a whole (SQL unreachable)

    async def refusal(self, user_id: int, amount: int) -> str | None:
        """Before the fact's transaction: why the engine would refuse to credit `amount` to `user_id` now,
        or None — an early answer, which also loads the account into the store (never done under the
        lock `record` takes). A store that cannot answer is no refusal here; `record` decides."""
        try:
            fits = await self.quota.can_credit("user", user_id, amount)
        except (BalanceUnknown, BackendUnavailable):  # no user: the outbox settles it; no store: `record`
            return None
        return None if fits else OUT_OF_RANGE

    async def _admit(self, tx: AsyncSession, user_id: int, amount: int) -> str | None:
        """Inside the fact's transaction: why a credit of `amount` to `user_id` cannot be granted, or None.
        Locks the user's row until the transaction ends, so the decisions for one user are taken one at a
        time on every worker and node, and counts the live balance with its open holds (the SQL balance
        when the store has not loaded the account or cannot answer), the user's pending credits (decided,
        maybe not applied) and `amount` against `BALANCE_MAX`. Nothing here loads the account: a load
        waits for SQL locks that a sync waiting for this row may hold."""
        durable = await UserRepository(tx).lock_balance(user_id)
        if durable is None:
            return None  # no such user: the credit is settled as failed when it is applied
        return None if await headroom(tx, self.quota, user_id, durable) >= amount else OUT_OF_RANGE

    async def record(self, tx: AsyncSession, credit: Credit) -> None:
        """Inside the transaction that commits the fact granting the credit, after the fact's UPDATE:
        decide whether it fits (`_admit`; CreditRefused when not: the caller lets the transaction roll
        back) and write its outbox row."""
        reason = await self._admit(tx, credit.user_id, credit.amount)
        if reason is not None:
            raise CreditRefused(reason)
        await PendingCreditRepository(tx).add(ref=credit.ref, user_id=credit.user_id, amount=credit.amount,
                                              log=credit.log, created_at=self.clock.now_s())

    async def deliver(self, credit: Credit) -> bool:
        """After the commit: raise the live balance now. True when the engine has applied it; False when
        only the replay will (the quota store is unreachable) or never will (refused for good: the
        credit is settled as failed) — it is durable either way."""
        if self.on_committed is not None:
            self.on_committed()
        try:
            return await self._apply(credit)
        except BackendUnavailable as exc:
            log.warning("credit %s left to the replay: %s", credit.ref, exc)
        except Exception:
            log.warning("credit %s left to the replay: the quota engine could not apply it now", credit.ref,
                        exc_info=True)
        return False

    async def _apply(self, credit: Credit) -> bool:
        """Credit it; True when applied (now or before). A refusal for good settles it as failed (False);
        anything else raises (the replay tries again)."""
        if credit.amount <= 0:
            reason = f"the amount {credit.amount} is not positive"
        else:
            try:
                await self.quota.credit("user", credit.user_id, credit.amount, ref=credit.ref, log=credit.log)
                return True
            except BalanceOutOfRange:
                reason = OUT_OF_RANGE
            except BalanceUnknown:
                reason = f"user {credit.user_id} does not exist"
        await self._fail(credit, reason)
        return False

    async def _fail(self, credit: Credit, reason: str) -> None:
        async with self.db.transaction() as tx:
            settled = await PendingCreditRepository(tx).fail(credit.ref, reason, self.clock.now_s())
        if settled:  # one worker wins the conditional UPDATE: the credit is named once
            log.error("credit %s of %d quota to user %d failed for good: %s (kept in pending_credits with "
                      "status failed)", credit.ref, credit.amount, credit.user_id, reason)

    async def _forget(self, ref: str) -> None:
        async with self.db.transaction() as tx:
            await PendingCreditRepository(tx).remove(ref)

    async def replay(self, stop: asyncio.Event | None = None) -> int:
        """One pass over every pending credit, oldest first, `batch` rows per SQL read: forget those
        already in SQL, credit the others again (applied at most once), settle those refused for good
        as failed. Stops early when the quota store is unreachable, or between two reads once `stop` is
        set (rule 14). Returns how many were forgotten."""
        forgotten = 0
        failing: list[str] = []
        first: BaseException | None = None
        after = 0
        while True:
            async with self.db.transaction() as tx:
                repo = PendingCreditRepository(tx)
                rows = await repo.pending(self.batch, after=after)
                synced = await repo.synced([row.ref for row in rows])
            unreachable = False
            for row in rows:
                try:
                    if row.ref in synced:
                        await self._forget(row.ref)
                        forgotten += 1
                    else:
                        await self._apply(Credit.of(row))
                except Exception as exc:
                    failing.append(row.ref)
                    first = first or exc
                    if isinstance(exc, BackendUnavailable):
                        unreachable = True  # every other credit would wait for the same store
                        break
            if unreachable or len(rows) < self.batch or (stop is not None and stop.is_set()):
                break
            after = rows[-1].id
        if failing:
            self._credit_streak.failed(
                "credit replay: %d credit(s) not applied yet (%s first: %s: %s); trying again every %g s",
                len(failing), failing[0], type(first).__name__, first, self.interval,
                first_traceback=None if isinstance(first, BackendUnavailable) else first)
        else:
            self._credit_streak.ended()
        return forgotten

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Replay at start-up, then every `interval` seconds until `stop` is set (rule 14)."""
        while not stop.is_set():
            try:
                await self.replay(stop)
            except Exception as exc:
                self._pass_streak.failed("credit replay failed (%s: %s); retrying every %g s",
                                         type(exc).__name__, exc, self.interval, first_traceback=exc)
            else:
                self._pass_streak.ended()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)
