"""The `pending_credits` table: credits decided in SQL and not yet confirmed by the quota engine.

A route that grants quota because of a SQL fact (a code redeemed, an order completed, invitation
rewards moved) writes the fact and a row here in ONE transaction; after the commit it applies the credit
through the quota engine with the row's `ref` as the idempotency key. The row stays until the credit's
log row — which the quota sync writes with the balance change, under the same `ref` — is in SQL; until
then every worker replays it (server/credits.py), and the engine's `ref` makes a replay apply at most
once (docs/ARCHITECTURE.md#credits-decided-in-sql).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import BigInteger, Text, delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base, Id, KeyString, never_reuse_ids
from models.logs import Log

REF_MAX = 64  # the width of `logs.ref`, where the credit's log row records the same key


class PendingCredit(Base):
    __tablename__ = "pending_credits"
    __table_args__ = never_reuse_ids()

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    ref: Mapped[str] = mapped_column(KeyString(REF_MAX), unique=True)  # the engine's idempotency key
    user_id: Mapped[int] = mapped_column(BigInteger)
    amount: Mapped[int] = mapped_column(BigInteger)
    log: Mapped[str] = mapped_column(Text)  # the log row (JSON) that travels with the credit
    created_at: Mapped[int] = mapped_column(BigInteger)

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

    async def oldest(self, limit: int) -> Sequence[PendingCredit]:
        return (await self.s.scalars(select(PendingCredit).order_by(PendingCredit.id).limit(limit))).all()

    async def synced(self, refs: Sequence[str]) -> set[str]:
        """The refs whose log row the quota sync has already written: those credits are in SQL for good."""
        if not refs:
            return set()
        found = (await self.s.scalars(select(Log.ref).where(Log.ref.in_(list(refs))))).all()
        return {ref for ref in found if ref is not None}

    async def remove(self, ref: str) -> None:
        await self.s.execute(delete(PendingCredit).where(PendingCredit.ref == ref))

    async def count(self) -> int:
        return int(await self.s.scalar(select(func.count()).select_from(PendingCredit)) or 0)
