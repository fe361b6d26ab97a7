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
rather than lost. Details and the failure table: docs/ARCHITECTURE.md#credits-decided-in-sql.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from models.credits import PendingCreditRepository
from models.db import Database
from quota.engine import QuotaEngine
from quota.types import BalanceUnknown
from server.clock import Clock

log = logging.getLogger("tollway.credits")

REPLAY_INTERVAL = 5.0
REPLAY_BATCH = 100


def kill_self() -> None:
    """SIGKILL this process: the crash hooks of the crash tests (never configured in production)."""
    os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True, slots=True)
class Credit:
    """`amount` (> 0) for `user_id`, applied once per `ref`, with the log row that travels with it."""

    ref: str
    user_id: int
    amount: int
    log: dict[str, Any]


class CreditOutbox:
    """Record a credit with the SQL fact that grants it; deliver it after the commit; replay until SQL
    has it.

    `kill_after_commit` is a fault-injection hook for the crash test (configuration
    `TEST_KILL_AFTER_CREDIT_COMMIT`, off by default): the process SIGKILLs itself right after the commit,
    before the credit reaches the engine."""

    def __init__(self, *, db: Database, quota: QuotaEngine, clock: Clock, kill_after_commit: bool = False,
                 interval: float = REPLAY_INTERVAL, batch: int = REPLAY_BATCH) -> None:
        self.db = db
        self.quota = quota
        self.clock = clock
        self.kill_after_commit = kill_after_commit
        self.interval = interval
        self.batch = batch

    async def record(self, tx: AsyncSession, credit: Credit) -> None:
        """Inside the transaction that commits the fact granting the credit."""
        await PendingCreditRepository(tx).add(ref=credit.ref, user_id=credit.user_id, amount=credit.amount,
                                              log=credit.log, created_at=self.clock.now_s())

    async def deliver(self, credit: Credit) -> bool:
        """After the commit: raise the live balance now. True when the engine has applied it; False when
        only the replay will (the quota store is unreachable, or the balance would leave the supported
        range) — the credit is durable either way."""
        if self.kill_after_commit:
            kill_self()
        try:
            await self._credit(credit)
        except Exception:
            log.warning("credit %s left to the replay: the quota engine could not apply it now", credit.ref,
                        exc_info=True)
            return False
        return True

    async def _credit(self, credit: Credit) -> None:
        try:
            await self.quota.credit("user", credit.user_id, credit.amount, ref=credit.ref, log=credit.log)
        except BalanceUnknown:  # the user row is gone: there is no balance to credit, ever
            log.error("credit %s dropped: user %d does not exist", credit.ref, credit.user_id)
            await self._forget(credit.ref)

    async def _forget(self, ref: str) -> None:
        async with self.db.transaction() as tx:
            await PendingCreditRepository(tx).remove(ref)

    async def replay(self) -> int:
        """One pass over the recorded credits (oldest first, up to `batch`): forget those already in SQL,
        credit the others again (applied at most once). Returns how many were forgotten."""
        async with self.db.transaction() as tx:
            repo = PendingCreditRepository(tx)
            rows = await repo.oldest(self.batch)
            synced = await repo.synced([row.ref for row in rows])
        forgotten = 0
        for row in rows:
            try:
                if row.ref in synced:
                    await self._forget(row.ref)
                    forgotten += 1
                else:
                    await self._credit(Credit(ref=row.ref, user_id=row.user_id, amount=row.amount,
                                              log=row.log_row()))
            except Exception:
                log.warning("replaying credit %s failed; trying again later", row.ref, exc_info=True)
        return forgotten

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Replay at start-up, then every `interval` seconds until `stop` is set (rule 14)."""
        while not stop.is_set():
            try:
                await self.replay()
            except Exception:
                log.exception("credit replay failed; retrying later")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)
