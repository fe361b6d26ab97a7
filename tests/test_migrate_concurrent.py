"""Several nodes starting at once migrate one fresh database without stepping on each other."""

from __future__ import annotations

import asyncio

import pytest

from models.db import Database
from models.migrate import current, upgrade
from tests.services import create_database, drop_database, unavailable
from tests.test_migrations import HEAD


@pytest.mark.parametrize("kind", ["mariadb", "postgres"])
async def test_concurrent_upgrades_of_a_fresh_database(kind: str) -> None:
    try:
        url = await asyncio.to_thread(create_database, kind)
    except Exception as exc:
        unavailable(kind, exc)
    dbs = [Database(url, pool_size=1) for _ in range(3)]
    try:
        await asyncio.gather(*(upgrade(db.engine) for db in dbs))
        heads = {await current(db.engine) for db in dbs}
        assert heads == {HEAD}
    finally:
        for db in dbs:
            await db.dispose()
        await asyncio.to_thread(drop_database, kind, url)

