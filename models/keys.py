"""The `tokens` table: API keys callers use on the model-call routes (docs/api/accounts.md#api-keys).

The key itself is stored encrypted (`key_encrypted`) and as an HMAC digest (`key_digest`) for lookup.
`remain_quota` is the durable remaining quota; the live one is in the quota store. `ApiKeyRepository`
holds the queries; it writes `remain_quota` only at creation (`add`), never afterwards (rule 13).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import BigInteger, Boolean, ColumnElement, Integer, String, Text, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from core.enums import KeyStatus
from models import query
from models.base import Base, Id, never_reuse_ids


class ApiKey(Base):
    __tablename__ = "tokens"
    __table_args__ = never_reuse_ids()

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(BigInteger, index=True)
    name: Mapped[str] = mapped_column(String(64), default="")
    key_digest: Mapped[str] = mapped_column(String(64), unique=True)
    key_encrypted: Mapped[str] = mapped_column(Text)
    status: Mapped[int] = mapped_column(Integer, default=1)
    created_time: Mapped[int] = mapped_column(BigInteger, default=0)
    accessed_time: Mapped[int] = mapped_column(BigInteger, default=0)
    expired_time: Mapped[int] = mapped_column(BigInteger, default=-1)
    remain_quota: Mapped[int] = mapped_column(BigInteger, default=0)
    used_quota: Mapped[int] = mapped_column(BigInteger, default=0)
    unlimited_quota: Mapped[bool] = mapped_column(Boolean, default=False)
    model_limits_enabled: Mapped[bool] = mapped_column(Boolean, default=False)
    model_limits: Mapped[str] = mapped_column(Text, default="")
    allow_ips: Mapped[str] = mapped_column(Text, default="")
    group: Mapped[str] = mapped_column(String(64), default="")
    deleted_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True, index=True)


class ApiKeyRepository:
    """Queries on `tokens`. Never writes `remain_quota` or `used_quota` after creation (rule 13: only the
    quota sync does, through models/quota.py)."""

    BALANCE_COLUMNS = frozenset({"remain_quota", "used_quota"})
    TOUCH_CHUNK = 1000  # ids per `accessed_time` UPDATE (keeps the IN list bounded)

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def add(self, key: ApiKey) -> int:
        self.s.add(key)
        await self.s.flush()
        return key.id

    async def get_own(self, user_id: int, key_id: int, *, lock: bool = False) -> ApiKey | None:
        """A live (not deleted) key of `user_id`; another user's key is None, like a missing one."""
        stmt = select(ApiKey).where(ApiKey.id == key_id, ApiKey.user_id == user_id,
                                    ApiKey.deleted_at.is_(None))
        if lock:
            stmt = stmt.with_for_update()
        return await self.s.scalar(stmt)

    async def by_digest(self, digest: str) -> ApiKey | None:
        """The key with this digest, deleted or not (the caller decides what a deleted key means)."""
        return await self.s.scalar(select(ApiKey).where(ApiKey.key_digest == digest))

    async def count_live(self, user_id: int) -> int:
        stmt = select(func.count()).select_from(ApiKey).where(ApiKey.user_id == user_id,
                                                              ApiKey.deleted_at.is_(None))
        return int(await self.s.scalar(stmt) or 0)

    async def page(self, user_id: int, *, offset: int, limit: int, keyword: str = "",
                   digest: str | None = None) -> tuple[Sequence[ApiKey], int]:
        """The live keys of `user_id`, id descending; `keyword` = name substring (case-insensitive),
        `digest` = exactly that key; both given → both must match."""
        conds: list[ColumnElement[bool]] = [ApiKey.user_id == user_id, ApiKey.deleted_at.is_(None)]
        if keyword:
            conds.append(query.contains(ApiKey.name, keyword))
        if digest is not None:
            conds.append(ApiKey.key_digest == digest)
        return await query.page(self.s, ApiKey, conds, order_by=[ApiKey.id.desc()], offset=offset,
                                limit=limit)

    async def update_fields(self, key_id: int, **values: Any) -> None:
        if self.BALANCE_COLUMNS & values.keys():
            raise ValueError("balances change only through the quota engine")
        await self.s.execute(update(ApiKey).where(ApiKey.id == key_id).values(**values))

    async def live_digests(self, user_id: int, key_ids: Sequence[int]) -> dict[int, str]:
        """id → digest of those of `key_ids` that are live keys of `user_id`, locked for the change."""
        rows = await self.s.execute(
            select(ApiKey.id, ApiKey.key_digest).where(ApiKey.user_id == user_id, ApiKey.id.in_(key_ids),
                                                       ApiKey.deleted_at.is_(None))
            .order_by(ApiKey.id).with_for_update()
        )
        return {int(i): str(d) for i, d in rows.all()}

    async def soft_delete(self, user_id: int, key_ids: Sequence[int], now: int) -> int:
        """Mark the live keys of `user_id` among `key_ids` deleted; the number actually deleted."""
        if not key_ids:
            return 0
        result = await self.s.execute(
            update(ApiKey).where(ApiKey.user_id == user_id, ApiKey.id.in_(key_ids),
                                 ApiKey.deleted_at.is_(None)).values(deleted_at=now)
        )
        return int(getattr(result, "rowcount", 0) or 0)

    async def mark_status(self, key_id: int, status: int) -> bool:
        """Enabled → `status` (3 expired, 4 exhausted), only if the key is still enabled."""
        result = await self.s.execute(
            update(ApiKey).where(ApiKey.id == key_id, ApiKey.status == KeyStatus.ENABLED)
            .values(status=status)
        )
        return bool(getattr(result, "rowcount", 0))

    async def touch(self, key_ids: Collection[int], now: int) -> None:
        """`accessed_time = now` for those keys (one UPDATE per `TOUCH_CHUNK` ids)."""
        ordered = sorted(key_ids)
        for start in range(0, len(ordered), self.TOUCH_CHUNK):
            chunk = ordered[start:start + self.TOUCH_CHUNK]
            await self.s.execute(
                update(ApiKey).where(ApiKey.id.in_(chunk), ApiKey.accessed_time < now)
                .values(accessed_time=now)
            )
