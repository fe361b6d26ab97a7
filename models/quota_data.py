"""The `quota_data` table: hourly usage buckets per (user, model), for the usage-data routes.

A bucket is fed only by the quota sync (`models/quota.py` `SqlQuotaSink.apply`), in the transaction that
inserts the consume logs it counts, so a bucket never counts a call whose log is not in SQL, nor one twice.
The request path never writes here. Rows are unique on (user, model, hour); a batch's buckets are one
upsert that adds to the stored bucket (MariaDB `ON DUPLICATE KEY UPDATE`, PostgreSQL and SQLite
`ON CONFLICT … DO UPDATE`): one statement per batch, where a look-up, an UPDATE per bucket and an INSERT
cost the sync several times its CPU per entry (docs/PERFORMANCE.md#figures-behind-the-code).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

from sqlalchemy import BigInteger, Index, String, Table, func, select
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.sql.dml import Insert

from models.base import Base, Id, KeyString, never_reuse_ids
from models.sync_sql import COLUMNS, family

HOUR = 3600


class QuotaData(Base):
    __tablename__ = "quota_data"
    __table_args__ = (
        Index("uq_quota_data_bucket", "user_id", "model_name", "created_at", unique=True),  # BUCKET_COLUMNS
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
BUCKET_COLUMNS = ["user_id", "model_name", "created_at"]  # what a bucket is unique on


_TYPE, _USER, _MODEL, _AT, _NAME, _PROMPT, _COMPLETION, _QUOTA = (COLUMNS.index(c) for c in (
    "type", "user_id", "model_name", "created_at", "username", "prompt_tokens", "completion_tokens", "quota"))


def add_to_buckets(buckets: dict[BucketKey, Bucket], rows: Iterable[Sequence[Any]], consume: int) -> None:
    """Count the consume log rows among `rows` (as the sync inserts them, `log_values`) into hourly
    buckets."""
    for row in rows:
        if row[_TYPE] != consume:
            continue
        key = (row[_USER], row[_MODEL], row[_AT] // HOUR * HOUR)
        bucket = buckets.get(key)
        if bucket is None:
            bucket = buckets[key] = Bucket(row[_NAME])
        bucket.username = row[_NAME]
        bucket.token_used += row[_PROMPT] + row[_COMPLETION]
        bucket.count += 1
        bucket.quota += row[_QUOTA]


@cache
def _upsert(dialect: str) -> Insert:
    """One INSERT of buckets that adds to a stored bucket of the same (user, model, hour) instead."""
    if dialect == "postgresql":
        pg = postgresql.insert(table)
        return pg.on_conflict_do_update(index_elements=BUCKET_COLUMNS, set_=_added(pg.excluded))
    if dialect == "sqlite":
        lite = sqlite.insert(table)
        return lite.on_conflict_do_update(index_elements=BUCKET_COLUMNS, set_=_added(lite.excluded))
    my = mysql.insert(table)
    return my.on_duplicate_key_update(_added(my.inserted))


def _added(new: Any) -> dict[str, Any]:
    """The stored bucket plus the new one (`new`: the row that was refused, as each dialect names it)."""
    return {"username": new.username, "token_used": table.c.token_used + new.token_used,
            "count": table.c.count + new.count, "quota": table.c.quota + new.quota}


class QuotaDataRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def add(self, buckets: dict[BucketKey, Bucket]) -> None:
        """Add `buckets` to the stored ones (relative updates), inserting the buckets that are new: one
        upsert, rows in key order."""
        if not buckets:
            return
        await self.s.execute(_upsert(family(self.s.get_bind().dialect.name)), [
            {"user_id": u, "model_name": m, "created_at": h, "username": b.username,
             "token_used": b.token_used, "count": b.count, "quota": b.quota}
            for (u, m, h), b in sorted(buckets.items())])

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
