"""The schema side of "ids are never given twice" (docs/SHARED_STATE.md#ids-are-never-reused), on SQLite:

- every table with a generated id says so in the models (`never_reuse_ids()`), and the migrations create it
  with AUTOINCREMENT, in the main database and in a separate log database — a table added later without
  it, or rebuilt by a later batch migration that drops it, fails here;
- a database at revision 0011 (a log database at `logs_0001`) holding rows, upgraded: every row, index and
  unique constraint is kept, the schema matches the models, no id that a deleted row had and another
  table still names is given again (a deleted channel named by its logs, a user by `user_id`s, a key by
  `token_id`, a code by its credit's `redeem:<id>` ref), and a row deleted after the upgrade never gives
  its id back either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import (
    Boolean,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    delete,
    func,
    insert,
    inspect,
    select,
    text,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from models.db import Database
from models.logs import log_metadata
from models.migrate import current, upgrade
from models.schema import metadata
from tests.test_migrations import HEAD, LOG_HEAD, schema_differences

GENERATED = [t for t in metadata.sorted_tables if t.autoincrement_column is not None]
NAMED_ELSEWHERE = {"users", "channels", "tokens", "redemptions"}  # deleted before the upgrade, still named


def test_every_table_with_a_generated_id_is_declared_never_reused() -> None:
    names = {t.name for t in GENERATED}
    assert {"users", "tokens", "channels", "redemptions", "top_ups", "passkey_credentials", "logs"} <= names
    assert [t.name for t in GENERATED if not t.dialect_options["sqlite"]["autoincrement"]] == []
    logs = log_metadata().tables["logs"]
    assert logs.dialect_options["sqlite"]["autoincrement"] is True


async def create_statements(db: Database) -> dict[str, str]:
    async with db.engine.connect() as conn:
        rows = (await conn.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))).all()
    return {name: sql for name, sql in rows}


async def test_the_migrations_create_every_generated_id_with_autoincrement(tmp_path: Path) -> None:
    main = Database(f"sqlite+aiosqlite:///{tmp_path / 'main.db'}", pool_size=1)
    logs = Database(f"sqlite+aiosqlite:///{tmp_path / 'logs.db'}", pool_size=1)
    try:
        await upgrade(main.engine)
        await upgrade(logs.engine, logs=True)
        created = await create_statements(main)
        assert [t.name for t in GENERATED if "AUTOINCREMENT" not in created[t.name]] == []
        assert "AUTOINCREMENT" in (await create_statements(logs))["logs"]
    finally:
        await main.dispose()
        await logs.dispose()


# ---- an upgrade of a database holding rows ---------------------------------------------------------------

def row(table: Table, n: int, **overrides: Any) -> dict[str, Any]:
    """Values for every column but the generated id, distinct per `n` (so unique columns stay unique)."""
    values: dict[str, Any] = {}
    for column in table.columns:
        if column is table.autoincrement_column:
            continue
        kind = column.type
        if isinstance(kind, Boolean):
            values[column.name] = n % 2 == 0
        elif isinstance(kind, Integer):
            values[column.name] = n
        elif isinstance(kind, Float):
            values[column.name] = n / 4
        elif isinstance(kind, String):
            values[column.name] = f"{n}-{table.name}.{column.name}"[:kind.length or 1000]
        else:
            raise AssertionError(f"no value for {table.name}.{column.name} ({kind!r})")
    return values | overrides


async def fill(conn: AsyncConnection, table: Table, **first: Any) -> None:
    """Rows 1, 2, 3 (`first` overrides columns of row 1)."""
    for n in (1, 2, 3):
        await conn.execute(insert(table).values(row(table, n, **(first if n == 1 else {}))))


async def everything(conn: AsyncConnection, tables: list[Table]) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    for table in tables:
        ordered = select(table).order_by(*table.primary_key.columns)
        out[table.name] = [tuple(r) for r in (await conn.execute(ordered)).all()]
    return out


async def shape(conn: AsyncConnection, tables: list[Table]) -> dict[str, Any]:
    """Each table's indexes, unique constraints and primary key columns, as the database reports them."""
    def read(sync: Any) -> dict[str, Any]:
        inspector = inspect(sync)
        return {t.name: (sorted((i["name"], tuple(i["column_names"]), bool(i["unique"]))
                                for i in inspector.get_indexes(t.name)),
                         sorted((u["name"], tuple(u["column_names"]))
                                for u in inspector.get_unique_constraints(t.name)),
                         inspector.get_pk_constraint(t.name)["constrained_columns"])
                for t in tables}
    return await conn.run_sync(read)


async def add_one(conn: AsyncConnection, table: Table, n: int) -> int:
    result = await conn.execute(insert(table).values(row(table, n)))
    assert result.inserted_primary_key is not None
    return int(result.inserted_primary_key[0])


async def highest(conn: AsyncConnection, table: Table) -> int:
    return int(await conn.scalar(select(func.max(table.c.id))) or 0)


async def reflected(db: Database) -> MetaData:
    """The tables as the database holds them now (an older revision has fewer columns than the models)."""
    found = MetaData()
    async with db.engine.connect() as conn:
        await conn.run_sync(lambda sync: found.reflect(sync))
    return found


async def test_an_upgrade_from_0011_keeps_every_row_and_gives_no_id_again(tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}", pool_size=1)
    try:
        await upgrade(db.engine, "0011")
        old = await reflected(db)
        t = old.tables
        tables = [t[name] for name in sorted(t) if name != "alembic_version"]
        async with db.engine.begin() as conn:
            for table in GENERATED:
                if table.name == "logs":  # a log of the deleted user, channel and key, and of code 3's credit
                    await fill(conn, t["logs"], user_id=3, channel=3, token_id=3, ref="redeem:3")
                else:
                    await fill(conn, t[table.name])
            for name in NAMED_ELSEWHERE:
                await conn.execute(delete(t[name]).where(t[name].c.id == 3))
            before = await everything(conn, tables)
            shape_before = await shape(conn, tables)

        await upgrade(db.engine, "0012")  # the migration that rebuilds the tables; later ones add columns
        async with db.engine.begin() as conn:
            assert await everything(conn, tables) == before
            assert await shape(conn, tables) == shape_before

        await upgrade(db.engine)
        assert await current(db.engine) == HEAD
        assert await schema_differences(db) == []
        async with db.engine.begin() as conn:
            for table in GENERATED:
                made = await add_one(conn, table, 4)
                assert made > 3, f"{table.name}: id {made} given again"
                await conn.execute(delete(table).where(table.c.id == made))
                again = await add_one(conn, table, 5)
                assert again > made, f"{table.name}: id {again} given again after the upgrade"
    finally:
        await db.dispose()


async def test_a_log_database_upgrade_keeps_every_row_and_gives_no_id_again(tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'logs.db'}", pool_size=1)
    logs = log_metadata().tables["logs"]
    try:
        await upgrade(db.engine, "logs_0001", logs=True)
        async with db.engine.begin() as conn:
            await fill(conn, logs)
            before = await everything(conn, [logs])
            shape_before = await shape(conn, [logs])

        await upgrade(db.engine, logs=True)

        assert await current(db.engine, logs=True) == LOG_HEAD
        async with db.engine.begin() as conn:
            assert await everything(conn, [logs]) == before
            assert await shape(conn, [logs]) == shape_before
            await conn.execute(delete(logs).where(logs.c.id == await highest(conn, logs)))
            assert await add_one(conn, logs, 4) > 3
    finally:
        await db.dispose()
