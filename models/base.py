"""Declarative base, portable column types and the constraint naming convention shared by every table.

Types are chosen to behave the same on SQLite, MariaDB 10.11 and PostgreSQL 15: `Id` is BIGINT (INTEGER on
SQLite so that it auto-increments), text without a length is TEXT, times are unix seconds in BIGINT,
`KeyString` compares byte for byte everywhere.
A generated id is never given twice, on every database: every table with one declares `never_reuse_ids()`
(SQLite's AUTOINCREMENT; MariaDB's and PostgreSQL's counters never go back by themselves), see
docs/SHARED_STATE.md#ids-are-never-reused.
Reserved words used as column names (`group`, `key`) are quoted by SQLAlchemy per dialect.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Integer, MetaData, String
from sqlalchemy.dialects import mysql
from sqlalchemy.orm import DeclarativeBase

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_name)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

Id = BigInteger().with_variant(Integer(), "sqlite")


def never_reuse_ids() -> dict[str, Any]:
    """The table options of every table with a generated `Id`: the id of a deleted row is never given to
    a new one. SQLite, without AUTOINCREMENT, gives max(id) + 1 — the id of the deleted newest row, and
    with it that row's logs, references and cached state. (A fresh dict per table: SQLAlchemy may add to
    it.)"""
    return {"sqlite_autoincrement": True}


def KeyString(length: int) -> String:
    """Text compared byte for byte on every database (MySQL's default collation ignores case and
    accents; SQLite and PostgreSQL do not). Used for normalized lookup keys."""
    return String(length).with_variant(mysql.VARCHAR(length, collation="utf8mb4_bin"), "mysql", "mariadb")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
