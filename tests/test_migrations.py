"""The Alembic migrations against the SQLAlchemy models, on SQLite, MariaDB and PostgreSQL: the migrated
schema matches the models exactly (autogenerate finds nothing to do), `upgrade` is idempotent, and a
brand-new empty database migrates from nothing to head.

Helpers defined here: `schema_differences` (alembic's `compare_metadata` on a sync connection) and
`fresh_empty_database` (a new, unmigrated database of the same kind, dropped afterwards).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import BigInteger, Column, MetaData, String, inspect

import models.tables  # noqa: F401  (registers the tables on Base.metadata)
from models.base import Base
from models.db import Database
from models.logs import log_metadata
from models.migrate import LOG_VERSION_TABLE, alembic_config, current, upgrade
from tests.services import create_database, drop_database

HEAD = ScriptDirectory.from_config(alembic_config()).get_current_head()
LOG_HEAD = ScriptDirectory.from_config(alembic_config(logs=True)).get_current_head()


async def schema_differences(db: Database, metadata: MetaData = Base.metadata) -> list[Any]:
    def compare(connection: Any) -> list[Any]:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, metadata))

    async with db.engine.connect() as conn:
        return await conn.run_sync(compare)


async def table_names(db: Database) -> set[str]:
    async with db.engine.connect() as conn:
        return set(await conn.run_sync(lambda c: inspect(c).get_table_names()))


def kind_of(url: str) -> str:
    return {"sqlite": "sqlite", "mysql": "mariadb", "postgresql": "postgres"}[url.split("+", 1)[0]]


@pytest.fixture
async def fresh_empty_database(db_url: str, tmp_path: Path) -> AsyncIterator[str]:
    """A new database of the same kind as `db_url`, never migrated."""
    kind = kind_of(db_url)
    if kind == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
        return
    url = create_database(kind)
    try:
        yield url
    finally:
        drop_database(kind, url)


def test_there_is_one_head() -> None:
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    assert heads == [HEAD]


async def test_migrated_schema_matches_the_models(db_url: str) -> None:
    db = Database(db_url, pool_size=1)
    try:
        assert await current(db.engine) == HEAD
        differences = await schema_differences(db)
        assert differences == [], differences
        assert {t.name for t in Base.metadata.sorted_tables} <= await table_names(db)
    finally:
        await db.dispose()


async def test_the_comparison_sees_a_difference(db_url: str) -> None:
    """Guards the test above against passing vacuously: a drifted model is reported."""
    drifted = MetaData(naming_convention=Base.metadata.naming_convention)
    for table in Base.metadata.sorted_tables:
        table.to_metadata(drifted)
    drifted.tables["options"].append_column(Column("extra", String(10), nullable=True))
    users = drifted.tables["users"]
    users.c.remark.type = String(20)
    users.c.quota.nullable = True
    db = Database(db_url, pool_size=1)
    try:
        found = await schema_differences(db, drifted)
    finally:
        await db.dispose()
    text = repr(found)
    assert "add_column" in text and "'extra'" in text
    assert "modify_type" in text and "'remark'" in text
    assert "modify_nullable" in text and "'quota'" in text
    assert isinstance(users.c.quota.type, BigInteger)


async def test_upgrade_is_idempotent(db_url: str) -> None:
    db = Database(db_url, pool_size=1)
    try:
        await upgrade(db.engine)
        await upgrade(db.engine)
        assert await current(db.engine) == HEAD
        assert await schema_differences(db) == []
    finally:
        await db.dispose()


async def test_an_empty_database_migrates_to_head(fresh_empty_database: str) -> None:
    db = Database(fresh_empty_database, pool_size=1)
    try:
        await db.check()
        assert await current(db.engine) is None
        assert await table_names(db) == set()
        await upgrade(db.engine)
        assert await current(db.engine) == HEAD
        assert await schema_differences(db) == []
        assert await table_names(db) == {t.name for t in Base.metadata.sorted_tables} | {"alembic_version"}
        await upgrade(db.engine)  # and again, on the fresh one
        assert await current(db.engine) == HEAD
    finally:
        await db.dispose()


async def test_a_separate_log_database_migrates_to_the_logs_table_alone(fresh_empty_database: str) -> None:
    """`LOG_DATABASE_URL`: its own environment and version table; the schema is the model's `logs`."""
    db = Database(fresh_empty_database, pool_size=1)

    def compare(connection: Any) -> list[Any]:
        opts = {"compare_type": True, "version_table": LOG_VERSION_TABLE}
        return list(compare_metadata(MigrationContext.configure(connection, opts=opts), log_metadata()))

    try:
        await upgrade(db.engine, logs=True)
        await upgrade(db.engine, logs=True)  # idempotent
        assert await current(db.engine, logs=True) == LOG_HEAD
        assert await table_names(db) == {"logs", LOG_VERSION_TABLE}
        async with db.engine.connect() as conn:
            assert await conn.run_sync(compare) == []
    finally:
        await db.dispose()
