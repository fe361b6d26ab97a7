"""Writing log rows into a separate log database exactly once (docs/MONEY.md#logs-in-a-separate-database).

Two databases cannot commit together, so every write into the log database is an insert that skips a row
whose unique `ref` is there already (`INSERT IGNORE` on MariaDB/MySQL, `ON CONFLICT DO NOTHING` on
PostgreSQL and SQLite): writing the same rows twice leaves them once, and a writer that died between its
two commits simply writes them again.

`LogOutboxRepository` holds the service logs (manage, system, …) that a main-database transaction wrote
into `log_outbox`; `move_outbox` copies the oldest of them into the log database, then deletes them from
the outbox. A crash between the two commits copies them again (skipped) and deletes them then.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table, delete, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.dml import Insert

from models.db import Database
from models.logs import Log, LogOutbox

logs_t = cast(Table, Log.__table__)


def insert_ignoring_duplicates(dialect: str) -> Insert:
    """An INSERT into `logs` that skips rows whose `ref` (or any unique key) exists already."""
    if dialect == "postgresql":
        return postgresql.insert(logs_t).on_conflict_do_nothing()
    if dialect == "sqlite":
        return sqlite.insert(logs_t).on_conflict_do_nothing()
    return insert(logs_t).prefix_with("IGNORE")


async def insert_logs(session: AsyncSession, rows: list[dict[str, Any]]) -> None:
    """Insert `rows` (all with the same keys) into the log database, each `ref` at most once."""
    if rows:
        await session.execute(insert_ignoring_duplicates(session.get_bind().dialect.name), rows)


class LogOutboxRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def oldest(self, limit: int) -> Sequence[LogOutbox]:
        return (await self.s.scalars(select(LogOutbox).order_by(LogOutbox.id).limit(limit))).all()

    async def remove(self, ids: Sequence[int]) -> None:
        if ids:
            await self.s.execute(delete(LogOutbox).where(LogOutbox.id.in_(list(ids))))


def outbox_row(item: LogOutbox) -> dict[str, Any]:
    """The log row an outbox item carries (every column of `logs` but `id`)."""
    row: dict[str, Any] = json.loads(item.row)
    row.setdefault("ref", item.ref)
    row.setdefault("entry_id", None)
    return row


async def move_outbox(main: Database, logs: Database, batch: int) -> int:
    """Move up to `batch` of the oldest outbox rows into the log database; returns how many moved."""
    async with main.transaction() as tx:
        items = await LogOutboxRepository(tx).oldest(batch)
    if not items:
        return 0
    async with logs.transaction() as tx:
        await insert_logs(tx, [outbox_row(item) for item in items])
    async with main.transaction() as tx:
        await LogOutboxRepository(tx).remove([item.id for item in items])
    return len(items)
