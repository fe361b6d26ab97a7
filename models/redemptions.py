"""The `redemptions` table: codes an admin creates and a user redeems once for quota
(docs/api/payments.md#redemption-codes).

`RedemptionRepository.redeem` is the single-use step: ONE conditional UPDATE (enabled, not deleted, not
expired → used, with who and when), whose row count says whether this caller won. Concurrent attempts on
any worker or node queue on the row and every one but the first changes nothing. The quota a code grants
reaches the balance through the quota engine, never through this table (rule 13).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import BigInteger, ColumnElement, Integer, String, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from core.enums import RedemptionStatus
from models import query
from models.base import Base, Id, KeyString, never_reuse_ids

KEY_LENGTH = 32  # 32 lowercase hex characters (a random UUID without its dashes)
NAME_MAX = 20


class Redemption(Base):
    __tablename__ = "redemptions"
    __table_args__ = never_reuse_ids()

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(BigInteger, default=0)  # the admin who created it
    key: Mapped[str] = mapped_column(KeyString(KEY_LENGTH), unique=True)
    status: Mapped[int] = mapped_column(Integer, default=RedemptionStatus.ENABLED)
    name: Mapped[str] = mapped_column(String(NAME_MAX), default="")
    quota: Mapped[int] = mapped_column(BigInteger, default=0)
    created_time: Mapped[int] = mapped_column(BigInteger, default=0)
    redeemed_time: Mapped[int] = mapped_column(BigInteger, default=0)
    expired_time: Mapped[int] = mapped_column(BigInteger, default=0)  # 0 = never
    used_user_id: Mapped[int] = mapped_column(BigInteger, default=0)
    deleted_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True, index=True)


def _not_expired(now: int) -> ColumnElement[bool]:
    return or_(Redemption.expired_time == 0, Redemption.expired_time >= now)


class RedemptionRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def add_many(self, rows: Sequence[Redemption]) -> None:
        self.s.add_all(rows)
        await self.s.flush()

    async def get(self, code_id: int, *, lock: bool = False) -> Redemption | None:
        """A live (not deleted) code."""
        stmt = select(Redemption).where(Redemption.id == code_id, Redemption.deleted_at.is_(None))
        if lock:
            stmt = stmt.with_for_update()
        return await self.s.scalar(stmt)

    async def by_key(self, key: str) -> Redemption | None:
        """The code with this key, deleted or not."""
        return await self.s.scalar(select(Redemption).where(Redemption.key == key))

    async def page(self, *, offset: int, limit: int, keyword: str = "") -> tuple[Sequence[Redemption], int]:
        """Live codes, newest first. `keyword`: all digits → that id, 32 hex → that key, and in any case
        a name starting with it (ignoring case); empty → every code."""
        conds: list[ColumnElement[bool]] = [Redemption.deleted_at.is_(None)]
        if keyword:
            matches: list[ColumnElement[bool]] = [query.starts_with(Redemption.name, keyword)]
            if query.is_id(keyword):
                matches.append(Redemption.id == int(keyword))
            if len(keyword) == KEY_LENGTH and all(c in "0123456789abcdef" for c in keyword):
                matches.append(Redemption.key == keyword)
            conds.append(or_(*matches))
        return await query.page(self.s, Redemption, conds, order_by=[Redemption.id.desc()], offset=offset,
                                limit=limit)

    async def update_fields(self, code_id: int, **values: Any) -> None:
        await self.s.execute(update(Redemption).where(Redemption.id == code_id).values(**values))

    async def redeem(self, key: str, user_id: int, now: int) -> bool:
        """Mark the code used by `user_id` if it is enabled, live and not expired; True when this call did."""
        result = await self.s.execute(
            update(Redemption)
            .where(Redemption.key == key, Redemption.status == RedemptionStatus.ENABLED,
                   Redemption.deleted_at.is_(None), _not_expired(now))
            .values(status=RedemptionStatus.USED, redeemed_time=now, used_user_id=user_id)
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount) == 1  # type: ignore[attr-defined]

    async def soft_delete(self, code_id: int, now: int) -> bool:
        result = await self.s.execute(
            update(Redemption).where(Redemption.id == code_id, Redemption.deleted_at.is_(None))
            .values(deleted_at=now).execution_options(synchronize_session=False))
        return int(result.rowcount) == 1  # type: ignore[attr-defined]

    async def delete_invalid(self, now: int) -> int:
        """Soft-delete every live code that can no longer be redeemed (used, disabled or expired)."""
        result = await self.s.execute(
            update(Redemption)
            .where(Redemption.deleted_at.is_(None),
                   or_(Redemption.status != RedemptionStatus.ENABLED,
                       (Redemption.expired_time != 0) & (Redemption.expired_time < now)))
            .values(deleted_at=now).execution_options(synchronize_session=False))
        return int(result.rowcount)  # type: ignore[attr-defined]
