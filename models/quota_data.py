"""The `quota_data` table: hourly usage buckets per (user, model), for the usage-data routes.

A bucket is fed only by the quota sync (`models/quota.py` `SqlQuotaSink.apply`), in the transaction that
inserts the consume logs it counts, so a bucket never counts a call whose log is not in SQL, nor one twice.
The request path never writes here. Rows are unique on (user, model, hour); one sync applies at a time
(it holds the cursor row), so an update-or-insert per bucket is safe without a dialect's upsert.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import BigInteger, Index, String, Table, and_, bindparam, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base, Id, KeyString, never_reuse_ids

HOUR = 3600


class QuotaData(Base):
    __tablename__ = "quota_data"
    __table_args__ = (
        Index("uq_quota_data_bucket", "user_id", "model_name", "created_at", unique=True),
        Index("ix_quota_data_created_at", "created_at"),
        Index("ix_quota_data_username", "username"),
        never_reuse_ids(),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(BigInteger)
    username: Mapped[str] = mapped_column(String(64))
    model_name: Mapped[str] = mapped_column(KeyString(255))
    created_at: Mapped[int] = mapped_column(BigInteger)  # the hour's start, unix s
    token_used: Mapped[int] = mapped_column(BigInteger)
    count: Mapped[int] = mapped_column(BigInteger)
    quota: Mapped[int] = mapped_column(BigInteger)


table = cast(Table, QuotaData.__table__)


@dataclass
class Bucket:
    username: str
    token_used: int = 0
    count: int = 0
    quota: int = 0


BucketKey = tuple[int, str, int]  # user_id, model_name, hour start


def add_to_buckets(buckets: dict[BucketKey, Bucket], rows: Iterable[dict[str, Any]], consume: int) -> None:
    """Count the consume log rows among `rows` (as the sync inserts them) into hourly buckets."""
    for row in rows:
        if row["type"] != consume:
            continue
        key = (row["user_id"], row["model_name"], row["created_at"] // HOUR * HOUR)
        bucket = buckets.get(key)
        if bucket is None:
            bucket = buckets[key] = Bucket(row["username"])
        bucket.username = row["username"]
        bucket.token_used += row["prompt_tokens"] + row["completion_tokens"]
        bucket.count += 1
        bucket.quota += row["quota"]


class QuotaDataRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def add(self, buckets: dict[BucketKey, Bucket]) -> None:
        """Add `buckets` to the stored ones (relative updates), inserting the buckets that are new."""
        if not buckets:
            return
        keys = list(buckets)
        existing: set[BucketKey] = set()
        for start in range(0, len(keys), 100):
            part = keys[start:start + 100]
            match = or_(*(and_(table.c.user_id == u, table.c.model_name == m, table.c.created_at == h)
                          for u, m, h in part))
            found = await self.s.execute(
                select(table.c.user_id, table.c.model_name, table.c.created_at).where(match))
            existing.update((int(u), str(m), int(h)) for u, m, h in found.all())
        old = [k for k in keys if k in existing]
        new = [k for k in keys if k not in existing]
        if old:
            await self.s.execute(
                update(table).where(table.c.user_id == bindparam("u"), table.c.model_name == bindparam("m"),
                                    table.c.created_at == bindparam("h")).values(
                    username=bindparam("name"), token_used=table.c.token_used + bindparam("t"),
                    count=table.c.count + bindparam("c"), quota=table.c.quota + bindparam("q")),
                [{"u": u, "m": m, "h": h, "name": buckets[(u, m, h)].username,
                  "t": buckets[(u, m, h)].token_used, "c": buckets[(u, m, h)].count,
                  "q": buckets[(u, m, h)].quota} for u, m, h in sorted(old)],
            )
        if new:
            await self.s.execute(insert(table), [
                {"user_id": u, "model_name": m, "created_at": h, "username": buckets[(u, m, h)].username,
                 "token_used": buckets[(u, m, h)].token_used, "count": buckets[(u, m, h)].count,
                 "quota": buckets[(u, m, h)].quota} for u, m, h in new])

    async def rows(self, start: int, end: int, *, user_id: int | None = None, username: str | None = None
                   ) -> Sequence[QuotaData]:
        """One user's buckets in [start, end] (by id or by name), oldest first."""
        conds = [QuotaData.created_at >= start, QuotaData.created_at <= end]
        if user_id is not None:
            conds.append(QuotaData.user_id == user_id)
        if username is not None:
            conds.append(QuotaData.username == username)
        query = select(QuotaData).where(*conds).order_by(QuotaData.created_at, QuotaData.model_name,
                                                          QuotaData.id)
        return (await self.s.scalars(query)).all()

    async def summed(self, start: int, end: int) -> list[dict[str, Any]]:
        """Every user's buckets in [start, end] summed per (model, hour), oldest first."""
        return await self._summed_per(QuotaData.model_name, "model_name", start, end)

    async def summed_by_user(self, start: int, end: int) -> list[dict[str, Any]]:
        """Every user's buckets in [start, end] summed per (username, hour), oldest first."""
        return await self._summed_per(QuotaData.username, "username", start, end)

    async def _summed_per(self, column: Any, name: str, start: int, end: int) -> list[dict[str, Any]]:
        """The buckets in [start, end] summed per (`column`, hour), oldest first; `name` is its reply key."""
        query = (select(column, QuotaData.created_at, func.sum(QuotaData.token_used),
                        func.sum(QuotaData.count), func.sum(QuotaData.quota))
                 .where(QuotaData.created_at >= start, QuotaData.created_at <= end)
                 .group_by(column, QuotaData.created_at)
                 .order_by(QuotaData.created_at, column))
        return [{name: k, "created_at": int(h), "token_used": int(t or 0), "count": int(c or 0),
                 "quota": int(q or 0)} for k, h, t, c, q in (await self.s.execute(query)).all()]
