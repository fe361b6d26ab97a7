"""Run the Alembic migrations programmatically on an async engine (`tollway migrate`, start-up, tests).

Two environments: `migrations/` for the main database, `log_migrations/` for a separate log database
(`LOG_DATABASE_URL`: the `logs` table alone, versioned in `alembic_version_logs`). `upgrade(engine)`
migrates a main database, `upgrade(engine, logs=True)` a log database; each under its own lock."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config as AlembicConfig
from sqlalchemy import column, inspect, select, table, text
from sqlalchemy.ext.asyncio import AsyncEngine

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
LOG_MIGRATIONS_DIR = Path(__file__).parent / "log_migrations"
VERSION_TABLE = "alembic_version"  # Alembic's default name, the main database's
LOG_VERSION_TABLE = "alembic_version_logs"


def alembic_config(*, logs: bool = False) -> AlembicConfig:
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(LOG_MIGRATIONS_DIR if logs else MIGRATIONS_DIR))
    return cfg


LOCK_NAME = "tollway_migrate"
LOCK_KEY = 7_273_100_411  # PostgreSQL advisory lock id for the same purpose


async def upgrade(engine: AsyncEngine, revision: str = "head", *, logs: bool = False) -> None:
    """Bring the schema to `revision`; idempotent, and safe when several nodes start at once: the first
    takes a database-wide lock and migrates, the others wait for it and then find nothing to do.
    (SQLite needs no lock: its migration transaction starts with BEGIN IMMEDIATE.)"""
    cfg = alembic_config(logs=logs)
    lock_name, lock_key = (f"{LOCK_NAME}_logs", LOCK_KEY + 1) if logs else (LOCK_NAME, LOCK_KEY)

    def _run(connection: Any) -> None:
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, revision)

    dialect = engine.dialect.name
    async with engine.connect() as lock_conn:
        if dialect in ("mysql", "mariadb"):
            await lock_conn.execute(text("SELECT GET_LOCK(:name, 300)"), {"name": lock_name})
        elif dialect == "postgresql":
            await lock_conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": lock_key})
        await lock_conn.commit()
        try:
            async with engine.begin() as conn:
                await conn.run_sync(_run)
        finally:
            if dialect in ("mysql", "mariadb"):
                await lock_conn.execute(text("SELECT RELEASE_LOCK(:name)"), {"name": lock_name})
            elif dialect == "postgresql":
                await lock_conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": lock_key})
            await lock_conn.commit()


@functools.cache
def head(*, logs: bool = False) -> str | None:
    """The newest revision of the migrations this code carries (read from the scripts once)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config(logs=logs)).get_current_head()


async def current(engine: AsyncEngine, *, logs: bool = False) -> str | None:
    """The revision the database is at (None: not migrated yet), read from Alembic's version table with
    one query — not through Alembic's `MigrationContext`, which logs two INFO lines each time it is made,
    and readiness asks every `READY_INTERVAL` in every worker. Several rows (heads) is an error, as it is
    to Alembic."""
    name = LOG_VERSION_TABLE if logs else VERSION_TABLE

    def _read(connection: Any) -> str | None:
        if not inspect(connection).has_table(name):
            return None
        versions = list(connection.execute(select(table(name, column("version_num")))).scalars())
        if len(versions) > 1:
            raise RuntimeError(f"{name} holds several revisions: {', '.join(sorted(versions))}")
        return versions[0] if versions else None

    async with engine.connect() as conn:
        return await conn.run_sync(_read)
