"""The real servers the tests talk to: MariaDB, PostgreSQL and Redis on 127.0.0.1.

Each test session creates its own databases (random names) and drops them at the end, so several test
runs can share the machine. With `CI=true` a missing server fails the test instead of skipping it.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

CI = os.environ.get("CI", "").lower() == "true"
MARIADB_URL = os.environ.get("TEST_MARIADB_URL", "mysql+aiomysql://root@127.0.0.1:3306")
POSTGRES_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432")
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
# The Redis deadline of the in-loop harnesses (the app's `REDIS_TIMEOUT`, the quota engine's tests): it is
# time on the event loop, and there one loop runs the app or engine, its clients and the fake upstreams, so
# on a loaded CI machine a burst of concurrent calls kept replies waiting past the 2 s default. The deadline
# itself is tested with a short one (tests/backend/test_backends.py).
IN_LOOP_REDIS_TIMEOUT = 15.0
T = TypeVar("T")


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion on a fresh loop in another thread (usable from inside a loop)."""
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(coro))
        except BaseException as exc:
            error.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


def unavailable(what: str, reason: BaseException | str) -> None:
    """Skip locally, fail in CI: a test that needs a server must not pass silently without it."""
    message = f"{what} is not reachable: {reason}"
    if CI:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


async def _admin(url: str, statement: str, *, database: str) -> None:
    engine = create_async_engine(f"{url}/{database}", isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(statement))
    finally:
        await engine.dispose()


def create_database(kind: str) -> str:
    """Create an empty database on the server of `kind`; returns its async URL."""
    name = f"tw_{secrets.token_hex(6)}"
    if kind == "mariadb":
        run_blocking(_admin(MARIADB_URL, f"CREATE DATABASE {name} CHARACTER SET utf8mb4", database="test"))
        return f"{MARIADB_URL}/{name}"
    if kind == "postgres":
        run_blocking(_admin(POSTGRES_URL, f"CREATE DATABASE {name}", database="test"))
        return f"{POSTGRES_URL}/{name}"
    raise ValueError(kind)


def drop_database(kind: str, url: str) -> None:
    name = url.rsplit("/", 1)[1]
    base = MARIADB_URL if kind == "mariadb" else POSTGRES_URL
    stmt = f"DROP DATABASE IF EXISTS {name}" + (" WITH (FORCE)" if kind == "postgres" else "")
    run_blocking(_admin(base, stmt, database="test"))


def redis_db_url(db: int, url: str = REDIS_URL) -> str:
    """`url` with another database number: for tests that need a Redis database of their own (high
    numbers, 11-14, are left to them; they remove only the keys under their own prefix there)."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{db}"))


async def redis_ping(url: str = REDIS_URL) -> None:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        await client.ping()
    finally:
        await client.aclose()


async def redis_purge(prefix: str, url: str = REDIS_URL) -> None:
    import redis.asyncio as aioredis

    await delete_prefix(aioredis.Redis.from_url(url), prefix)


async def delete_prefix(client: Any, prefix: str) -> None:
    """Delete every key under `prefix` (on a cluster client: on every master), then close `client`."""
    try:
        keys = [k async for k in client.scan_iter(match=f"{prefix}*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()
