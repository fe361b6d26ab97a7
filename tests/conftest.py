"""Fixtures: one database per server kind per session (migrated once, emptied before each test), Redis
under a fresh key prefix per test, and the app served for real on a local port.

`stack` is the one parametrized fixture the route tests use:
    sqlite         embedded mode: SQLite + in-process engine, sessions in SQL
    mariadb+redis  production shape: MariaDB + Redis
    postgres+redis PostgreSQL + Redis
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import delete, update

from models.db import Database
from models.migrate import upgrade
from models.quota import PartitionCursor, QuotaCursor
from models.schema import metadata
from tests.fakes.fixtures import anthropic_fake, gemini_fake, openai_fake  # noqa: F401  (fixtures, by name)
from tests.harness import Running, make_config, serve
from tests.mail import mail_app, smtp  # noqa: F401  (fixtures, by name)
from tests.redis_cluster import Cluster, own_cluster
from tests.services import (
    REDIS_URL,
    create_database,
    drop_database,
    redis_ping,
    redis_purge,
    run_blocking,
    unavailable,
)


def pytest_configure(config: pytest.Config) -> None:
    """Every process of the run (each xdist worker, and the `tollway serve` it starts, by inheritance)
    trusts an empty directory of certificate authorities instead of a bundle: httpx parses a bundle
    (about 150 certificates) for every client it makes, which cost the suite minutes, while a directory is
    read only at a TLS handshake. No test speaks TLS through the trust store (the SMTP test's server
    speaks none), so none is affected; and a call that reached a real provider by mistake now fails its
    certificate check too."""
    trust = Path(tempfile.gettempdir()) / "tollway-tests-trust-no-authority"
    trust.mkdir(exist_ok=True)
    os.environ.pop("SSL_CERT_FILE", None)
    os.environ["SSL_CERT_DIR"] = str(trust)


FIRST = ("tests/test_schemathesis.py", "tests/test_e2e_stop.py", "tests/test_money_crash.py",
         "tests/test_access_matrix.py", "tests/test_read_your_writes.py", "tests/quota/test_invariants.py")
"""The longest modules (`--durations`), run first: `-n … --dist loadfile` hands the modules to the workers
in the order they were collected, and one of these handed out last kept a worker busy for minutes while
the others had nothing left. (Only the order changes: a module missing here still runs.)"""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {module: n for n, module in enumerate(FIRST)}
    # a stable sort: each module keeps its own order
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(FIRST)))


async def _migrate(url: str) -> None:
    db = Database(url, pool_size=1)
    try:
        await db.check()
        await upgrade(db.engine)
    finally:
        await db.dispose()


class _Databases:
    """Lazily created, session-wide databases, one per kind."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.urls: dict[str, str] = {}
        self.failed: dict[str, BaseException] = {}

    def get(self, kind: str) -> str:
        if kind in self.failed:
            unavailable(kind, self.failed[kind])
        if kind not in self.urls:
            try:
                if kind == "sqlite":
                    url = f"sqlite+aiosqlite:///{self.tmp / 'tollway.db'}"
                else:
                    url = create_database(kind)
                run_blocking(_migrate(url))
            except Exception as exc:  # a server that is down: skip locally, fail in CI
                self.failed[kind] = exc
                unavailable(kind, exc)
            self.urls[kind] = url
        return self.urls[kind]

    def close(self) -> None:
        for kind, url in self.urls.items():
            if kind != "sqlite":
                drop_database(kind, url)


@pytest.fixture(scope="session")
def databases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Databases]:
    dbs = _Databases(tmp_path_factory.mktemp("db"))
    yield dbs
    dbs.close()


async def empty(url: str) -> None:
    db = Database(url, pool_size=1)
    try:
        async with db.transaction() as tx:
            for table in reversed(metadata.sorted_tables):
                if table.name not in (QuotaCursor.__tablename__, PartitionCursor.__tablename__):
                    await tx.execute(delete(table))
            await tx.execute(update(PartitionCursor).values(last_id="0-0", epoch="", updated_at=0))
    finally:
        await db.dispose()


async def fresh_database(databases: _Databases, kind: str) -> str:
    url = databases.get(kind)
    await empty(url)
    return url


@pytest.fixture(params=["sqlite", "mariadb", "postgres"])
async def db_url(request: pytest.FixtureRequest, databases: _Databases) -> str:
    """An empty, migrated database of each kind."""
    return await fresh_database(databases, request.param)


@pytest.fixture
async def sqlite_url(databases: _Databases) -> str:
    return await fresh_database(databases, "sqlite")


@pytest.fixture
async def redis_prefix() -> AsyncIterator[str]:
    """A fresh key prefix on the real Redis; its keys are deleted afterwards."""
    try:
        await redis_ping()
    except Exception as exc:
        unavailable("redis", exc)
    prefix = f"twtest:{secrets.token_hex(4)}:"
    yield prefix
    await redis_purge(prefix)


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One Redis Cluster (three masters, one replica each) for the whole session, started on first use
    (tests/redis_cluster.py); the tests on it keep to their own key prefix (`cluster_prefix`)."""
    with own_cluster(tmp_path_factory.mktemp("cluster")) as cluster:
        yield cluster


@pytest.fixture
def cluster_prefix(redis_cluster: Cluster) -> Iterator[str]:
    """A fresh key prefix on the session's Redis Cluster; its keys are deleted afterwards. (Not async, so
    that an async fixture may ask for it with `request.getfixturevalue`.)"""
    prefix = f"twtest:{secrets.token_hex(4)}:"
    yield prefix
    run_blocking(redis_cluster.purge(prefix))


@dataclass
class Stack:
    name: str
    database_url: str
    redis_url: str | None
    prefix: str


async def _stack(name: str, databases: _Databases) -> AsyncIterator[Stack]:
    kind, _, cache = name.partition("+")
    url = await fresh_database(databases, kind)
    if not cache:
        yield Stack(name, url, None, "tollway:")
        return
    try:
        await redis_ping()
    except Exception as exc:
        unavailable("redis", exc)
    prefix = f"twtest:{secrets.token_hex(4)}:"
    try:
        yield Stack(name, url, REDIS_URL, prefix)
    finally:
        await redis_purge(prefix)


@pytest.fixture(params=["sqlite", "mariadb+redis", "postgres+redis"])
async def stack(request: pytest.FixtureRequest, databases: _Databases) -> AsyncIterator[Stack]:
    async for s in _stack(request.param, databases):
        yield s


@pytest.fixture
async def embedded_stack(databases: _Databases) -> AsyncIterator[Stack]:
    async for s in _stack("sqlite", databases):
        yield s


@pytest.fixture
async def app(stack: Stack, tmp_path: Path) -> AsyncIterator[Running]:
    """The app on every stack."""
    config = make_config(stack.database_url, tmp_path, stack.redis_url, stack.prefix)
    async with serve(config) as running:
        yield running


@pytest.fixture
async def embedded_app(embedded_stack: Stack, tmp_path: Path) -> AsyncIterator[Running]:
    """The app in embedded mode only (for tests whose subject does not depend on the stack)."""
    config = make_config(embedded_stack.database_url, tmp_path)
    async with serve(config) as running:
        yield running


@pytest.fixture(params=["mariadb", "postgres", "cluster+mariadb"])
async def nodes(request: pytest.FixtureRequest, databases: _Databases, redis_prefix: str, tmp_path: Path
                ) -> AsyncIterator[tuple[Running, Running]]:
    """Two app instances (two nodes) on one SQL database and one Redis (`redis_prefix`), or the session's
    Redis Cluster (`cluster_prefix`)."""
    redis, _, kind = request.param.rpartition("+")
    url = await fresh_database(databases, kind)
    if redis == "cluster":
        cluster: Cluster = request.getfixturevalue("redis_cluster")
        config = make_config(url, tmp_path, None, request.getfixturevalue("cluster_prefix"),
                             redis_cluster_nodes=cluster.addresses)
    else:
        config = make_config(url, tmp_path, REDIS_URL, redis_prefix)
    async with serve(config) as one, serve(config) as two:
        yield one, two


@pytest.fixture(params=["memory+sqlite", "redis+mariadb", "redis+postgres", "cluster+postgres"])
async def quota_env(request: pytest.FixtureRequest, databases: _Databases) -> AsyncIterator[object]:
    """The quota engine on each store, over a real SQL database (see tests/quota/env.py); "cluster" is the
    session's Redis Cluster under the test's `cluster_prefix`."""
    from tests.quota.env import build

    store, _, kind = request.param.partition("+")
    url = await fresh_database(databases, kind)
    if store in ("memory", "cluster"):
        if store == "cluster":
            cluster: Cluster = request.getfixturevalue("redis_cluster")
            env = build(url, None, request.getfixturevalue("cluster_prefix"), nodes=cluster.addresses)
        else:
            env = build(url, None, "")
        yield env
        await env.close()
        return
    try:
        await redis_ping()
    except Exception as exc:
        unavailable("redis", exc)
    prefix = f"twtest:{secrets.token_hex(4)}:"
    env = build(url, REDIS_URL, prefix)
    try:
        yield env
    finally:
        await env.close()
        await redis_purge(prefix)
