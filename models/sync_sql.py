"""The quota sync's bulk statements: a batch's log rows written, its references looked up and its counter
deltas added, in one statement each per chunk.

Why: the sync (models/quota.py `SqlQuotaSink.apply`) writes one log row per settled call, and through
SQLAlchemy's executemany each row cost the sync's CPU on MariaDB — aiomysql escapes every value in
Python (`str.translate` per string) — the largest part of the sync's cost per entry
(docs/PERFORMANCE.md#figures-behind-the-code). Here a chunk of
rows is one statement and each value's encoding is a C call:

- MariaDB/MySQL: the statement's text carries the rows, `INSERT … VALUES (…), (…)`: integers by `%d`,
  every string as a hex literal of its UTF-8 (`_utf8mb4 X'…'`, `bytes.hex`), which needs no escaping
  under any `sql_mode` and arrives byte for byte; the driver gets no parameters (`LITERAL`). Tried first:
  the chunk as one JSON document unpacked by `JSON_TABLE`, cheaper still for the sync but dearer for
  MariaDB by more than the sync saved, and MariaDB is the part that does not scale out;
- PostgreSQL (asyncpg): one array per column, `INSERT … SELECT … FROM unnest($1::bigint[], …)`;
- SQLite: the driver's executemany of plain tuples (already C).

Rows are lists in `COLUMNS` order (`log_values`), never dicts. The look-up of references already logged
(the sync's second net under its cursor) is one statement per chunk the same way (on MariaDB/MySQL the
refs as a JSON list, `JSON_TABLE` driving a probe of the unique index per ref). The deltas of the users',
keys' and channels' counters (`add_by_id`) are one `UPDATE JSON_TABLE(…) STRAIGHT_JOIN <table>` on
MariaDB, where SQLAlchemy's executemany of an UPDATE is a round trip per row; asyncpg pipelines an
executemany and SQLite's is in process, so there it stays.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Boolean, Integer, Table, bindparam, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from core.log_entry import LogEntry
from models.logs import Log
from quota.types import Entry

logs_t = cast(Table, Log.__table__)

COLUMNS = ("type", "created_at", "content", "username", "token_name", "model_name", "group", "ip",
           "request_id", "prompt_tokens", "completion_tokens", "use_time", "is_stream", "other", "user_id",
           "token_id", "channel", "ref", "entry_id", "quota")
"""The columns of a log row the sync writes, in the order of `log_values`."""

_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def log_values(entry: Entry, now: int) -> list[Any]:
    """The `logs` row an entry carries, in `COLUMNS` order: the caller's fields as `LogEntry.read_log`
    reads them (`created_at` now and `quota` the entry's amount when missing; `other` as its compact JSON,
    or "" for None), then who, the reference and how much."""
    assert entry.log is not None
    row = LogEntry.read_log(entry.log, created_at=now, quota=entry.amount)  # type … other, quota
    quota, other = row.pop(), row[-1]
    row[-1] = _encode(other) if other is not None else ""
    row += (entry.user_id, entry.key_id, entry.channel_id, entry.ref, entry.id, quota)
    return row


def as_dict(values: Sequence[Any]) -> dict[str, Any]:
    """A row of `log_values` keyed by column (the shape of `models/log_outbox.py` `insert_logs`)."""
    return dict(zip(COLUMNS, values, strict=True))


def _kind(column: str) -> str:
    """The SQL type family of a `logs` column: 'bool', 'int' or 'text'."""
    sql_type = logs_t.c[column].type
    if isinstance(sql_type, Boolean):
        return "bool"
    return "int" if isinstance(sql_type, Integer) else "text"


_PG_TYPE = {"bool": "boolean", "int": "bigint", "text": "text"}
DIALECTS = ("mysql", "postgresql", "sqlite")  # MariaDB is "mysql" here
_TEXT = tuple(n for n, c in enumerate(COLUMNS) if _kind(c) == "text")
_ROW = "(" + ",".join("%s" if _kind(c) == "text" else "%d" for c in COLUMNS) + ")"


def _hex(text: str) -> str:
    return f"_utf8mb4 X'{text.encode().hex()}'" if text else "''"


def _values(rows: list[list[Any]]) -> str:
    """MariaDB/MySQL: `rows` as the text of a VALUES list (integers by `%d`, strings as hex literals)."""
    rendered = []
    for row in rows:
        literal = row.copy()
        for n in _TEXT:
            literal[n] = _hex(row[n])
        rendered.append(_ROW % tuple(literal))
    return ", ".join(rendered)


def _insert_sql(dialect: str, skip_duplicates: bool) -> str:
    """The INSERT of a chunk of rows; built once at import from `COLUMNS` only (no value is in the text)."""
    my = dialect == "mysql"
    names = ", ".join(f"`{c}`" if my else f'"{c}"' for c in COLUMNS)
    head = f"INSERT{' IGNORE' if skip_duplicates and my else ''} INTO logs ({names}) "
    conflict = " ON CONFLICT DO NOTHING" if skip_duplicates and not my else ""
    if my:
        return head + "VALUES {}"
    if dialect == "postgresql":
        arrays = ", ".join(f"${n + 1}::{_PG_TYPE[_kind(c)]}[]" for n, c in enumerate(COLUMNS))
        return head + f"SELECT * FROM unnest({arrays}){conflict}"  # noqa: S608
    return head + f"VALUES ({', '.join('?' for _ in COLUMNS)}){conflict}"


_INSERT = {(dialect, skip): _insert_sql(dialect, skip) for dialect in DIALECTS for skip in (False, True)}
_REFS_MY = ("SELECT l.ref, l.entry_id FROM JSON_TABLE({}, '$[*]' COLUMNS(r VARCHAR(64) PATH '$')) AS j "
            "STRAIGHT_JOIN logs AS l ON l.ref = j.r")  # the list drives: one unique-index probe per ref
_REFS_PG = "SELECT ref, entry_id FROM logs WHERE ref = ANY($1::text[])"

LITERAL: dict[str, Any] = {"no_parameters": True}
"""A statement whose values are all in its text: the driver gets no parameters, so it does not run the
text through `%` formatting (a copy of the whole chunk)."""


def json_literal(value: object) -> str:
    """`value` as JSON in a MariaDB/MySQL string literal of hex digits."""
    return _hex(_encode(value))


def family(dialect_name: str) -> str:
    """One of `DIALECTS` for a SQLAlchemy dialect name (MariaDB is "mysql" here)."""
    return "mysql" if dialect_name == "mariadb" else dialect_name


def _dialect(conn: AsyncConnection) -> str:
    return family(conn.dialect.name)


async def insert_log_rows(session: AsyncSession, rows: list[list[Any]], *, skip_duplicates: bool = False
                          ) -> None:
    """Insert `rows` (each of `log_values`) in one statement; `skip_duplicates`: a row whose `ref` (or any
    unique key) exists already is skipped (for the separate log database,
    docs/MONEY.md#logs-in-a-separate-database) instead of failing the transaction."""
    if not rows:
        return
    conn = await session.connection()
    dialect = _dialect(conn)
    sql = _INSERT[(dialect, skip_duplicates)]
    if dialect == "mysql":
        await conn.exec_driver_sql(sql.format(_values(rows)), execution_options=LITERAL)
    elif dialect == "postgresql":
        await conn.exec_driver_sql(sql, tuple(zip(*rows, strict=True)))
    else:
        await conn.exec_driver_sql(sql, [tuple(row) for row in rows])


async def logged(session: AsyncSession, refs: list[str]) -> list[tuple[str, str | None]]:
    """(ref, entry_id) of the log rows present for any of `refs`, in one statement."""
    if not refs:
        return []
    conn = await session.connection()
    dialect = _dialect(conn)
    if dialect == "mysql":
        result = await conn.exec_driver_sql(_REFS_MY.format(json_literal(refs)), execution_options=LITERAL)
    elif dialect == "postgresql":
        result = await conn.exec_driver_sql(_REFS_PG, (refs,))
    else:
        marks = ", ".join("?" for _ in refs)  # only placeholders in the text
        result = await conn.exec_driver_sql(f"SELECT ref, entry_id FROM logs WHERE ref IN ({marks})",  # noqa: S608
                                            tuple(refs))
    rows: Sequence[Any] = result.all()
    return [(str(ref), entry_id) for ref, entry_id in rows]


async def add_by_id(session: AsyncSession, table: Table, columns: Sequence[str],
                    deltas: Sequence[Sequence[int]]) -> None:
    """`column = column + delta` for each of `deltas`: (row id, one delta per column), in id order, so the
    rows are locked in that order (two syncs that share a row, a channel's, never wait on each other in
    a cycle)."""
    if not deltas:
        return
    conn = await session.connection()
    if getattr(conn.dialect, "is_mariadb", False):  # the list drives (STRAIGHT_JOIN): the locking order
        picked = ", ".join(f"d{n} BIGINT PATH '$[{n + 1}]'" for n in range(len(columns)))
        sets = ", ".join(f"t.`{c}` = t.`{c}` + d.d{n}" for n, c in enumerate(columns))
        listed = f"JSON_TABLE({json_literal(deltas)}, '$[*]' COLUMNS(id BIGINT PATH '$[0]', {picked}))"
        sql = f"UPDATE {listed} AS d STRAIGHT_JOIN `{table.name}` AS t ON t.id = d.id SET {sets}"  # noqa: S608
        await conn.exec_driver_sql(sql, execution_options=LITERAL)  # ids and integers only, as JSON in hex
        return
    stmt = update(table).where(table.c.id == bindparam("_id")).values(
        {c: table.c[c] + bindparam(f"_{c}") for c in columns})
    await session.execute(stmt, [{"_id": d[0], **{f"_{c}": v for c, v in zip(columns, d[1:], strict=True)}}
                                 for d in deltas])
