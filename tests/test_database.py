"""`models.db.Database` on SQLite, MariaDB and PostgreSQL: a transaction interrupted by a cancelled task
(a client hanging up, a background task stopped at shutdown) leaves neither a lock nor a partial write.

On SQLite an interrupted statement used to leave a "zombie" connection holding the database's write lock
until the garbage collector ran, so every later writer waited out the 30 s busy timeout. The garbage
collector is paused during the test so that nothing frees such a connection by luck.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
from collections.abc import Iterator

import pytest
from sqlalchemy import func, select

from models.db import Database
from models.tables import Option


@pytest.fixture
def no_gc() -> Iterator[None]:
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def writer(db: Database, run: int) -> None:
    """Each transaction reads, then writes two rows in two statements: both or neither may be committed."""
    n = 0
    while True:
        n += 1
        async with db.transaction() as tx:
            await tx.execute(select(Option.key).limit(5))
            tx.add(Option(key=f"a:{run}:{n}", value="x"))
            await tx.flush()
            await tx.execute(select(Option.key).limit(5))
            tx.add(Option(key=f"b:{run}:{n}", value="x"))
            await tx.flush()
        await asyncio.sleep(0)


async def count(db: Database, prefix: str) -> int:
    async with db.transaction() as tx:
        value = await tx.scalar(select(func.count()).select_from(Option).where(Option.key.like(f"{prefix}%")))
        return int(value or 0)


async def test_a_cancelled_transaction_leaves_no_lock_and_no_partial_write(db_url: str, no_gc: None) -> None:
    rng = random.Random(20240601)
    for run in range(60):
        db = Database(db_url, pool_size=2)
        try:
            task = asyncio.get_running_loop().create_task(writer(db, run))
            await asyncio.sleep(rng.uniform(0, 0.012))
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        finally:
            await db.dispose()

    other = Database(db_url, pool_size=1)
    try:
        async with asyncio.timeout(10):  # a leaked lock makes this wait (SQLite: 30 s busy timeout)
            async with other.transaction() as tx:
                tx.add(Option(key="after", value="written"))
        assert await count(other, "a:") == await count(other, "b:")
        assert await count(other, "after") == 1
    finally:
        await other.dispose()
