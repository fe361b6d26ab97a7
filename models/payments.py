"""The `payment_events` table: every payment-provider event that changed an order, once.

A webhook event is recorded in the same transaction as the order change it caused (success with its
credit, failed, expired, held for review). `(provider, event_id)` is unique, so a redelivered or
concurrently delivered event can change nothing a second time: the second insert fails and its whole
transaction is rolled back (docs/MONEY.md#payment-webhooks-exactly-once).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, String, UniqueConstraint, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base, Id, KeyString, never_reuse_ids
from models.tables import User

EVENT_ID_MAX = 128
PROVIDER_MAX = 32
CUSTOMER_MAX = 128  # users.stripe_customer


class PaymentEvent(Base):
    __tablename__ = "payment_events"
    __table_args__ = (UniqueConstraint("provider", "event_id"), never_reuse_ids())

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    provider: Mapped[str] = mapped_column(KeyString(PROVIDER_MAX))
    event_id: Mapped[str] = mapped_column(KeyString(EVENT_ID_MAX))
    type: Mapped[str] = mapped_column(String(128), default="")
    trade_no: Mapped[str] = mapped_column(String(64), default="")
    received_at: Mapped[int] = mapped_column(BigInteger, default=0)


class PaymentEventRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def seen(self, provider: str, event_id: str) -> bool:
        found = await self.s.scalar(select(PaymentEvent.id).where(PaymentEvent.provider == provider,
                                                                  PaymentEvent.event_id == event_id))
        return found is not None

    async def add(self, *, provider: str, event_id: str, type_: str, trade_no: str, received_at: int) -> None:
        """Record the event; a duplicate raises `IntegrityError` at this flush."""
        self.s.add(PaymentEvent(provider=provider, event_id=event_id, type=type_, trade_no=trade_no,
                                received_at=received_at))
        await self.s.flush()

    async def count(self, trade_no: str | None = None) -> int:
        query = select(func.count()).select_from(PaymentEvent)
        if trade_no is not None:
            query = query.where(PaymentEvent.trade_no == trade_no)
        return int(await self.s.scalar(query) or 0)


async def remember_customer(session: AsyncSession, user_id: int, customer: str) -> None:
    """Keep the provider's customer id on the user, unless one is kept already."""
    await session.execute(update(User).where(User.id == user_id, User.stripe_customer == "")
                          .values(stripe_customer=customer[:CUSTOMER_MAX])
                          .execution_options(synchronize_session=False))
