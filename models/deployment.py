"""The deployment's identity in SQL: `deployments`, one row (id 1) holding a random id.

Migration 0015 writes it once. The quota state in Redis belongs to one database: every process that opens
the Redis quota store reads this id (`deployment_id`) and hands it to the store's `setup`, which records it
in Redis the first time and refuses to start when Redis holds another (quota/backends/redis_setup.py). A
copy of the database (a dump restored elsewhere, a promoted replica) carries the id with its data; another
database has another id.

A database whose row is gone (deleted by hand, or by tests emptying every table) gets a new id the first
time a process asks — the same as a new database, and refused by a Redis that recorded the old one.
"""

from __future__ import annotations

import secrets

from sqlalchemy import BigInteger, Integer, String, select
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base
from models.db import Database, DatabaseUnavailable, redacted

ROW = 1


class DeploymentRow(Base):
    """The one row with the fixed id 1; two processes that create it at once collide on it."""

    __tablename__ = "deployments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    uid: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[int] = mapped_column(BigInteger)


class DeploymentRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def get(self) -> str | None:
        uid = await self.s.scalar(select(DeploymentRow.uid).where(DeploymentRow.id == ROW))
        return str(uid) if uid is not None else None

    async def insert(self, uid: str, now: int) -> None:
        """Insert the row; raises IntegrityError when another process inserted it first."""
        self.s.add(DeploymentRow(id=ROW, uid=uid, created_at=now))
        await self.s.flush()


async def deployment_id(db: Database, now: int) -> str:
    """This database's deployment id, created when it has none (of concurrent creators, the first wins and
    the others read its id). A database not migrated (no `deployments` table) is a DatabaseUnavailable
    naming `tollway migrate`."""
    for _ in range(2):
        try:
            async with db.transaction() as tx:
                found = await DeploymentRepository(tx).get()
        except DBAPIError as exc:
            reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
            raise DatabaseUnavailable(f"cannot read the deployment id of the database {redacted(db.url)} (is "
                                      f"its schema up to date? run `tollway migrate`): {reason}") from None
        if found is not None:
            return found
        try:
            async with db.transaction() as tx:
                await DeploymentRepository(tx).insert(secrets.token_hex(16), now)
        except IntegrityError:
            pass  # another process created it at the same moment: read theirs
    raise DatabaseUnavailable(f"the deployment id of the database {redacted(db.url)} was deleted while "
                              "it was being created; start again")
