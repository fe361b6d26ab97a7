"""The async database handle: one engine per worker, sessions, transactions, and start-up checks.

Dialect differences are absorbed here so that callers never branch on the database:
- SQLite runs in WAL mode with a busy timeout, and every transaction starts with `BEGIN IMMEDIATE` so two
  writers queue instead of failing on a lock upgrade; its files are private to the service's user (0600:
  the database is created so before SQLite opens it, and SQLite gives its `-wal`, `-shm` and `-journal`
  files the database file's mode; files left from before are tightened);
- MariaDB/MySQL uses utf8mb4 and READ COMMITTED, the same isolation PostgreSQL has by default.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from models.logs import LOGS_ELSEWHERE


class DatabaseUnavailable(RuntimeError):
    """The database could not be reached; the message is safe to print (no password)."""


def redacted(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


def make_engine(url: str, *, pool_size: int = 10) -> AsyncEngine:
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    kwargs: dict[str, Any] = {"pool_pre_ping": backend != "sqlite"}
    if backend == "sqlite":
        kwargs["connect_args"] = {"timeout": 30}
    elif backend in ("mysql", "mariadb"):
        if "charset" not in parsed.query:
            parsed = parsed.update_query_dict({"charset": "utf8mb4"})
        kwargs.update(pool_size=pool_size, max_overflow=pool_size, pool_recycle=3600,
                      isolation_level="READ COMMITTED")
    else:
        kwargs.update(pool_size=pool_size, max_overflow=pool_size, pool_recycle=3600)
    if backend == "sqlite" and parsed.database and parsed.database != ":memory:" \
            and not parsed.database.startswith("file:"):
        _private_files(Path(parsed.database))
    engine = create_async_engine(parsed, **kwargs)
    if backend == "sqlite":
        _tune_sqlite(engine)
    return engine


PRIVATE = stat.S_IRUSR | stat.S_IWUSR  # 0600
SQLITE_COMPANIONS = ("", "-wal", "-shm", "-journal")


def _private_files(path: Path) -> None:
    """Create the SQLite database 0600 before SQLite would create it 0644; tighten files already there.

    Best effort: a directory that does not exist or a file the service does not own is left to SQLite,
    which reports its own error when it cannot open the database."""
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE))
    for suffix in SQLITE_COMPANIONS:
        with contextlib.suppress(OSError):
            companion = path.with_name(path.name + suffix)
            if stat.S_IMODE(companion.stat().st_mode) & 0o077:
                companion.chmod(PRIVATE)


def _tune_sqlite(engine: AsyncEngine) -> None:
    sync_engine = engine.sync_engine

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy, not the driver, decide when transactions begin (see `_on_begin`).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    @event.listens_for(sync_engine.pool, "invalidate")
    def _on_invalidate(dbapi_conn: Any, _record: Any, _exc: Any) -> None:
        # A task cancelled in the middle of a statement gets its connection invalidated, and aiosqlite
        # closes the sqlite3 connection without a rollback while the interrupted statement is still
        # referenced. SQLite keeps such a connection alive as a "zombie" — with its open transaction and
        # so the database's write lock — until the garbage collector frees the statement; every other
        # writer waits out the busy timeout meanwhile. Queue a rollback on the connection's own thread,
        # behind the interrupted statement and ahead of the close, so the lock goes with the connection.
        worker = getattr(dbapi_conn, "_connection", None)  # the aiosqlite.Connection
        raw = getattr(worker, "_connection", None)  # its sqlite3.Connection
        queue = getattr(worker, "_tx", None)
        if raw is not None and queue is not None:
            queue.put_nowait((None, partial(_rollback_quietly, raw)))


def _rollback_quietly(raw: Any) -> None:
    with contextlib.suppress(Exception):
        raw.rollback()


class Database:
    """An engine plus a session factory; `transaction()` is the one way services write.

    `logs_elsewhere`: the main database of a deployment whose logs live in a database of their own
    (`LOG_DATABASE_URL`); its sessions say so to `models.logs.LogRepository` (session info)."""

    def __init__(self, url: str, *, pool_size: int = 10, logs_elsewhere: bool = False) -> None:
        self.url = url
        self.engine = make_engine(url, pool_size=pool_size)
        self.backend = self.engine.dialect.name  # sqlite | mysql | postgresql
        self.logs_elsewhere = logs_elsewhere
        self._sessions = async_sessionmaker(self.engine, expire_on_commit=False, autoflush=False,
                                            info={LOGS_ELSEWHERE: True} if logs_elsewhere else None)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """A session inside one transaction: committed on success, rolled back on any exception."""
        async with self._sessions() as session, session.begin():
            yield session

    async def check(self) -> None:
        """Fail fast with a readable message when the database cannot be reached."""
        try:
            async with self.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except (OperationalError, DBAPIError, OSError) as exc:
            reason = getattr(exc, "orig", None) or exc
            raise DatabaseUnavailable(
                f"cannot connect to the database {redacted(self.url)}: {str(reason).splitlines()[0]}"
            ) from None

    async def dispose(self) -> None:
        await self.engine.dispose()
