"""The deployment id in SQL (models/deployment.py): migration 0015 gives every database its own, also a
database upgrading from before it; a database that lost the row gets a new one, and processes that ask at
the same moment agree on it. On SQLite, MariaDB and PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import delete

from models.db import Database
from models.deployment import DeploymentRepository, DeploymentRow, deployment_id
from models.migrate import upgrade


async def _migrated(path: Path, revision: str = "head") -> Database:
    db = Database(f"sqlite+aiosqlite:///{path}", pool_size=1)
    await upgrade(db.engine, revision)
    return db


async def test_each_database_gets_its_own_id_at_migration_also_when_upgrading(tmp_path: Path) -> None:
    new, old = await _migrated(tmp_path / "new.db"), await _migrated(tmp_path / "old.db", "0014")
    try:
        async with new.transaction() as tx:
            written = await DeploymentRepository(tx).get()
        assert written is not None and len(written) == 32
        assert await deployment_id(new, 0) == await deployment_id(new, 0) == written  # written once
        await upgrade(old.engine)  # a deployment upgrading: its id comes with the migration
        async with old.transaction() as tx:
            upgraded = await DeploymentRepository(tx).get()
        assert upgraded is not None and upgraded != written
    finally:
        await new.dispose()
        await old.dispose()


async def test_a_database_without_the_row_gets_a_new_id_once(db_url: str) -> None:
    db = Database(db_url)
    try:
        first = await deployment_id(db, 0)
        async with db.transaction() as tx:
            await tx.execute(delete(DeploymentRow))
        created = await asyncio.gather(*(deployment_id(db, 0) for _ in range(6)))  # concurrent creators
        assert len(set(created)) == 1 and created[0] != first
        assert await deployment_id(db, 0) == created[0]
    finally:
        await db.dispose()
