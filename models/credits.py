"""The `pending_credits` table: credits decided in SQL and not yet confirmed by the quota engine.

A route that grants quota because of a SQL fact (a code redeemed, an order completed, invitation
rewards moved) writes the fact and a row here in ONE transaction; after the commit it applies the credit
through the quota engine with the row's `ref` as the idempotency key. The row stays until the credit's
log row — which the quota sync writes with the balance change, under the same `ref` — is in SQL; until
then every worker replays it (server/credits.py), and the engine's `ref` makes a replay apply at most
once (docs/MONEY.md#credits-decided-in-sql).

A credit the engine refuses for good (the balance would leave the range it computes exactly, the user is
gone) is settled as `failed`: the row stays, with its reason and time, for an admin to see, and the
replay reads only `pending` rows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import BigInteger, Index, String, Text, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from core.enums import CreditStatus
from models.base import Base, Id, KeyString, never_reuse_ids
from models.logs import Log

REF_MAX = 64  # the width of `logs.ref`, where the credit's log row records the same key
REASON_MAX = 255


class PendingCredit(Base):
    __tablename__ = "pending_credits"
    __table_args__ = (Index("ix_pending_credits_status", "status", "id"), never_reuse_ids())

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    ref: Mapped[str] = mapped_column(KeyString(REF_MAX), unique=True)  # the engine's idempotency key
    user_id: Mapped[int] = mapped_column(BigInteger)
    amount: Mapped[int] = mapped_column(BigInteger)
    log: Mapped[str] = mapped_column(Text)  # the log row (JSON) that travels with the credit
    created_at: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(String(16), default=CreditStatus.PENDING,
                                        server_default=CreditStatus.PENDING.value)
    reason: Mapped[str] = mapped_column(String(REASON_MAX), default="", server_default="")  # why it failed
    failed_at: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")

    def log_row(self) -> dict[str, Any]:
        value = json.loads(self.log) if self.log else {}
        return value if isinstance(value, dict) else {}


class PendingCreditRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def add(self, *, ref: str, user_id: int, amount: int, log: dict[str, Any], created_at: int) -> None:
        if len(ref) > REF_MAX:
            raise ValueError(f"credit reference longer than {REF_MAX} characters")
        self.s.add(PendingCredit(ref=ref, user_id=user_id, amount=amount, created_at=created_at,
                                 log=json.dumps(log, separators=(",", ":"), ensure_ascii=False)))
        await self.s.flush()

    async def pending(self, limit: int, *, after: int = 0) -> Sequence[PendingCredit]:
        """The oldest `limit` pending credits whose id is above `after` (the replay pages with it)."""
        query = (select(PendingCredit)
                 .where(PendingCredit.status == CreditStatus.PENDING, PendingCredit.id > after)
                 .order_by(PendingCredit.id).limit(limit))
        return (await self.s.scalars(query)).all()

    async def synced(self, refs: Sequence[str]) -> set[str]:
        """The refs whose log row the quota sync has already written: those credits are in SQL for good."""
        if not refs:
            return set()
        found = (await self.s.scalars(select(Log.ref).where(Log.ref.in_(list(refs))))).all()
        return {ref for ref in found if ref is not None}

    async def owed(self, user_id: int) -> int:
        """The sum of the user's pending credits: decided, and perhaps not applied yet (failed ones never
        will be). A credit already applied but not yet synced is counted too, on top of the live balance
        that holds it: the room left for another credit is under-, never overestimated."""
        total = await self.s.scalar(select(func.coalesce(func.sum(PendingCredit.amount), 0)).where(
            PendingCredit.user_id == user_id, PendingCredit.status == CreditStatus.PENDING))
        return int(total or 0)

    async def remove(self, ref: str) -> None:
        await self.s.execute(delete(PendingCredit).where(PendingCredit.ref == ref))

    async def fail(self, ref: str, reason: str, at: int) -> bool:
        """Settle a pending credit as failed; False when it was not pending (another worker settled it,
        or the sync forgot it): so one caller only reports it."""
        result = await self.s.execute(
            update(PendingCredit)
            .where(PendingCredit.ref == ref, PendingCredit.status == CreditStatus.PENDING)
            .values(status=CreditStatus.FAILED, reason=reason[:REASON_MAX], failed_at=at))
        return bool(getattr(result, "rowcount", 0) == 1)

    async def counts(self) -> dict[CreditStatus, int]:
        """How many rows of each status, in one statement (the metrics' outbox gauges)."""
        rows = await self.s.execute(select(PendingCredit.status, func.count()).group_by(PendingCredit.status))
        found = {str(status): int(count) for status, count in rows.all()}
        return {status: found.get(status.value, 0) for status in CreditStatus}

    async def count(self, status: CreditStatus | None = None) -> int:
        """How many rows (of `status`, when given)."""
        query = select(func.count()).select_from(PendingCredit)
        if status is not None:
            query = query.where(PendingCredit.status == status)
        return int(await self.s.scalar(query) or 0)
