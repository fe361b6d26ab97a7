"""The `top_ups` table: top-up orders and their outcome (docs/api/payments.md#top-up-records).

An order moves between statuses only through `TopUpRepository.transition`: ONE conditional UPDATE from
the statuses it may leave, whose row count says whether this caller made the move — so completing an
order (by an admin today, by a payment provider's webhook later) happens once, whatever runs at the same
time on any worker or node. The quota an order buys reaches the balance through the quota engine, never
through this table (rule 13).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlalchemy import BigInteger, Double, String, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from core.enums import TopUpStatus
from models import query
from models.base import Base, Id, KeyString, never_reuse_ids

# `topup:<trade_no>` is the idempotency key of the order's credit, and keys are at most 64 characters
# (`logs.ref`), so a trade number has at most 64 - len("topup:") characters.
TRADE_NO_MAX = 58


def credit_ref(trade_no: str) -> str:
    """The idempotency key of an order's credit: one per order, whoever completes it (an admin, the
    payment webhook)."""
    return f"topup:{trade_no}"


class TopUp(Base):
    __tablename__ = "top_ups"
    __table_args__ = never_reuse_ids()

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(BigInteger, index=True)
    amount: Mapped[int] = mapped_column(BigInteger, default=0)  # units ordered (1 unit = 1 USD of quota)
    money: Mapped[float] = mapped_column(Double, default=0.0)  # what was paid
    trade_no: Mapped[str] = mapped_column(KeyString(TRADE_NO_MAX), unique=True)
    payment_method: Mapped[str] = mapped_column(String(32), default="")
    payment_provider: Mapped[str] = mapped_column(String(32), default="")
    create_time: Mapped[int] = mapped_column(BigInteger, default=0)
    complete_time: Mapped[int] = mapped_column(BigInteger, default=0)
    status: Mapped[str] = mapped_column(String(16), default=TopUpStatus.PENDING)

    def quota(self, quota_per_unit: float) -> int:
        """The quota the order buys: its units × `QuotaPerUnit`, rounded to a whole point."""
        return round(self.amount * quota_per_unit)


class TopUpRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def add(self, order: TopUp) -> int:
        self.s.add(order)
        await self.s.flush()
        return order.id

    async def by_trade_no(self, trade_no: str) -> TopUp | None:
        if not 0 < len(trade_no) <= TRADE_NO_MAX:
            return None
        return await self.s.scalar(select(TopUp).where(TopUp.trade_no == trade_no))

    async def transition(self, trade_no: str, from_statuses: Collection[TopUpStatus], to: TopUpStatus, *,
                         complete_time: int | None = None) -> bool:
        """Move the order to `to` if it is in one of `from_statuses`; True when this call moved it."""
        if not 0 < len(trade_no) <= TRADE_NO_MAX:
            return False
        values: dict[str, object] = {"status": to}
        if complete_time is not None:
            values["complete_time"] = complete_time
        result = await self.s.execute(
            update(TopUp).where(TopUp.trade_no == trade_no, TopUp.status.in_([str(s) for s in from_statuses]))
            .values(**values).execution_options(synchronize_session=False))
        return int(result.rowcount) == 1  # type: ignore[attr-defined]

    async def page(self, *, offset: int, limit: int, user_id: int | None = None, keyword: str = ""
                   ) -> tuple[Sequence[TopUp], int]:
        """Orders (of `user_id`, when given), newest first; `keyword`: a literal part of `trade_no`,
        ignoring case."""
        conds = []
        if user_id is not None:
            conds.append(TopUp.user_id == user_id)
        if keyword:
            conds.append(query.contains(TopUp.trade_no, keyword))
        return await query.page(self.s, TopUp, conds, order_by=[TopUp.id.desc()], offset=offset, limit=limit)
