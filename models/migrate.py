"""Run the Alembic migrations programmatically on an async engine (`tollway migrate`, start-up, tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config as AlembicConfig
from sqlalchemy.ext.asyncio import AsyncEngine

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def alembic_config() -> AlembicConfig:
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Bring the schema to `revision`; idempotent."""
    cfg = alembic_config()

    def _run(connection: Any) -> None:
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, revision)

    async with engine.begin() as conn:
        await conn.run_sync(_run)


async def current(engine: AsyncEngine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    def _read(connection: Any) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    async with engine.connect() as conn:
        return await conn.run_sync(_read)
