"""The query shapes every repository shares: a literal text search, and one page of rows with their total.

- `contains(column, keyword)` / `starts_with(column, keyword)`: `keyword` matched literally — the LIKE
  wildcards `%`, `_` and the escape `\\` in it match themselves — ignoring case. Both sides are lowered by the
  database itself, so they fold the same way on each database (SQLite folds ASCII only; a keyword lowered
  in Python would miss a stored 'É' that SQLite leaves as it is).
- `exact(session, column, value)`: `column = value`, case- and accent-sensitive on every database (MariaDB's
  default collation would make `Team` equal `team`).
- `by_bytes(session, column)`: the column to GROUP BY when case variants are different values (on MariaDB
  its binary collation; elsewhere the column itself).
- `page(session, entity, conds, order_by=…, offset=…, limit=…)`: the rows of one page and the number of
  rows matching `conds`, in two statements; past the end (or with nothing matching) only the count runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, and_, func, literal, select
from sqlalchemy.ext.asyncio import AsyncSession

T = TypeVar("T")


def escape_like(text: str) -> str:
    """`text` with `\\`, `%` and `_` escaped by `\\` (the escape every pattern here declares)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _like(column: Any, pattern: str) -> ColumnElement[bool]:
    return func.lower(column).like(func.lower(literal(pattern)), escape="\\")


def contains(column: Any, keyword: str) -> ColumnElement[bool]:
    """`keyword` is a literal substring of `column`, ignoring case."""
    return _like(column, f"%{escape_like(keyword)}%")


def starts_with(column: Any, keyword: str) -> ColumnElement[bool]:
    """`column` begins with `keyword` literally, ignoring case."""
    return _like(column, f"{escape_like(keyword)}%")


def exact(session: AsyncSession, column: Any, value: str) -> ColumnElement[bool]:
    """`column = value`, compared byte for byte on every database. On MariaDB the plain comparison (which
    its default collation makes case-insensitive) stays so that an index narrows; the binary one decides."""
    if session.get_bind().dialect.name in ("mysql", "mariadb"):
        return and_(column == value, column.collate("utf8mb4_bin") == value)
    return column == value  # type: ignore[no-any-return]


def by_bytes(session: AsyncSession, column: Any) -> Any:
    """`column` grouped and compared byte for byte: `GPT-4o` and `gpt-4o` are two groups on every database
    (MariaDB's default collation would make them one)."""
    if session.get_bind().dialect.name in ("mysql", "mariadb"):
        return column.collate("utf8mb4_bin")
    return column


def is_id(keyword: str) -> bool:
    """Whether a search keyword names a row id: ASCII digits only ('²' and '١' are digits to Python, not
    ids), short enough for a 64-bit column."""
    return keyword.isascii() and keyword.isdigit() and len(keyword) <= 18


async def page(session: AsyncSession, entity: type[T], conds: Sequence[ColumnElement[bool]], *,
               order_by: Sequence[Any], offset: int, limit: int) -> tuple[Sequence[T], int]:
    """One page of `entity` rows matching every condition of `conds`, ordered, and the total."""
    total = int(await session.scalar(select(func.count()).select_from(entity).where(*conds)) or 0)
    if total == 0 or offset >= total:
        return [], total
    rows = select(entity).where(*conds).order_by(*order_by).offset(offset).limit(limit)
    return (await session.scalars(rows)).all(), total
