"""The async database handle: one engine per worker, sessions, transactions, and start-up checks.

Dialect differences are absorbed here so that callers never branch on the database:
- SQLite runs in WAL mode with a busy timeout, and every transaction starts with `BEGIN IMMEDIATE` so two
  writers queue instead of failing on a lock upgrade; its files are private to the service's user (0600:
  the database is created so before SQLite opens it, and SQLite gives its `-wal`, `-shm` and `-journal`
  files the database file's mode; files left from before are tightened);
- MariaDB/MySQL uses utf8mb4 and READ COMMITTED, the same isolation PostgreSQL has by default.

`check()` also refuses a server too old for the statements of the data layer: MariaDB before 10.6 and MySQL
before 8.0 have no `JSON_TABLE`, which the quota sync's statements use (models/sync_sql.py).
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
from sqlalchemy.exc import DBAPIError, DisconnectionError, IntegrityError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from backend.observer import ErrorKind, ErrorObserver, ignore_error
from models.logs import LOGS_ELSEWHERE

# the oldest server of each family the data layer's statements run on (JSON_TABLE: models/sync_sql.py)
OLDEST = {"mariadb": ((10, 6), "MariaDB 10.6"), "mysql": ((8, 0), "MySQL 8.0")}


def too_old(dialect: Any) -> str | None:
    """The oldest supported release, when the server `dialect` connected to is older; else None."""
    if dialect.name != "mysql":
        return None
    family = "mariadb" if getattr(dialect, "is_mariadb", False) else "mysql"
    oldest, name = OLDEST[family]
    version = tuple(dialect.server_version_info or ())[:2]
    return name if version < oldest else None


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


MYSQL_CONNECTION_CODES = frozenset({2002, 2003, 2005, 2006, 2013, 2055})  # can't connect, gone away, lost
MYSQL_TIMEOUT_CODES = frozenset({1205, 3024})  # lock wait timeout, statement time exceeded
PG_TIMEOUT_STATES = frozenset({"57014", "55P03"})  # query cancelled (statement_timeout), lock not available


def error_kind(exc: BaseException) -> ErrorKind | None:
    """How a failed transaction is counted (`Database.on_error`); None for what is not a failure of the
    database: a service's own exception, or a constraint the service answers (IntegrityError, a 409)."""
    if isinstance(exc, IntegrityError):
        return None
    if isinstance(exc, (PoolTimeout, TimeoutError)):
        return ErrorKind.TIMEOUT
    if isinstance(exc, DBAPIError):
        orig = exc.orig
        code = orig.args[0] if orig is not None and orig.args else None
        state = getattr(orig, "sqlstate", None) or ""
        if exc.connection_invalidated or isinstance(exc, InterfaceError) or isinstance(orig, OSError) \
                or code in MYSQL_CONNECTION_CODES or state.startswith("08"):
            return ErrorKind.CONNECTION
        if code in MYSQL_TIMEOUT_CODES or state in PG_TIMEOUT_STATES or "database is locked" in str(orig):
            return ErrorKind.TIMEOUT
        return ErrorKind.OTHER
    if isinstance(exc, (OSError, DisconnectionError)):
        return ErrorKind.CONNECTION
    return None


class Database:
    """An engine plus a session factory; `transaction()` is the one way services write.

    `logs_elsewhere`: the main database of a deployment whose logs live in a database of their own
    (`LOG_DATABASE_URL`); its sessions say so to `models.logs.LogRepository` (session info).
    `on_error` (backend/observer.py) is told the kind of every transaction the database failed
    (`error_kind`)."""

    def __init__(self, url: str, *, pool_size: int = 10, logs_elsewhere: bool = False,
                 on_error: ErrorObserver = ignore_error) -> None:
        self.url = url
        self.engine = make_engine(url, pool_size=pool_size)
        self.backend = self.engine.dialect.name  # sqlite | mysql | postgresql
        self.logs_elsewhere = logs_elsewhere
        self.on_error = on_error
        self._sessions = async_sessionmaker(self.engine, expire_on_commit=False, autoflush=False,
                                            info={LOGS_ELSEWHERE: True} if logs_elsewhere else None)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """A session inside one transaction: committed on success, rolled back on any exception."""
        try:
            async with self._sessions() as session, session.begin():
                yield session
        except Exception as exc:
            kind = error_kind(exc)
            if kind is not None:
                self.on_error(kind)
            raise

    def connections(self) -> tuple[int, int]:
        """(in use, idle) connections of the pool (0, 0 for a pool that keeps no count)."""
        pool = self.engine.pool
        checkedout, checkedin = getattr(pool, "checkedout", None), getattr(pool, "checkedin", None)
        if checkedout is None or checkedin is None:
            return 0, 0
        return int(checkedout()), int(checkedin())

    async def check(self) -> None:
        """Fail fast with a readable message when the database cannot be reached."""
        try:
            async with self.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
                needed = too_old(conn.dialect)
        except (OperationalError, DBAPIError, OSError) as exc:
            reason = getattr(exc, "orig", None) or exc
            raise DatabaseUnavailable(
                f"cannot connect to the database {redacted(self.url)}: {str(reason).splitlines()[0]}"
            ) from None
        if needed is not None:
            found = ".".join(str(n) for n in self.engine.dialect.server_version_info or ())
            raise DatabaseUnavailable(
                f"the database {redacted(self.url)} runs version {found}: Tollway needs {needed} or later "
                "(docs/PRODUCTION.md#production-several-nodes-behind-a-load-balancer)")

    async def dispose(self) -> None:
        await self.engine.dispose()
