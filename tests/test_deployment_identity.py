"""A wrong deployment is refused at start-up, by real `tollway serve` and `tollway quota-sync` processes, with
one line on stderr, no traceback and a non-zero exit — before it touches anything:

    another database   a process whose DATABASE_URL is another deployment's database, on the same Redis and
                       REDIS_KEY_PREFIX: the quota state there belongs to the first one (the deployment id
                       recorded in Redis is not its database's). Before, a `quota-sync` took its share of the
                       partitions, committed their usage to the wrong database and trimmed the streams.
    the wrong setting  REDIS_URL at a Redis Cluster node (before: "listening", then 503 on every call) and
                       REDIS_CLUSTER_NODES at a single server (before: "cannot connect").

The databases are SQLite files (the refusal does not depend on the kind); the cluster is the session's
(tests/redis_cluster.py). The tests use only what existed before these checks (the store, to queue usage;
the migrations), so they also run against the code before them — and fail there.
"""

from __future__ import annotations

import secrets
import sqlite3
from pathlib import Path

import pytest

from backend.redis import RedisBackend
from models.db import Database
from models.migrate import upgrade
from quota.backends.redis_quota import RedisQuotaStore
from tests.redis_cluster import Cluster
from tests.services import REDIS_URL, run_blocking
from tests.test_e2e_serve import Proc, _one_line_refusal, clean_env, free_port, run_to_end

pytestmark = pytest.mark.slow

USERS = (1, 2, 3, 4)  # one account in each of four partitions


def refused(proc: Proc, needle: str) -> str:
    """The process ended non-zero, never listening, with no traceback and one refusal on stderr — its last
    line, the only one of the `tollway` command (`serve` logs its migration check before it) — which
    contains `needle`; returns that line."""
    _one_line_refusal(proc, needle)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert [line for line in lines if line.startswith("tollway")] == lines[-1:], proc.output()
    assert needle in lines[-1], proc.output()
    return lines[-1]


async def _migrate(url: str) -> None:
    db = Database(url, pool_size=1)
    try:
        await upgrade(db.engine)
    finally:
        await db.dispose()


def database(directory: Path) -> tuple[str, Path]:
    """A migrated SQLite database in `directory`: (URL, file)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = (directory / "tollway.db").resolve()
    url = f"sqlite+aiosqlite:///{path}"
    run_blocking(_migrate(url))
    return url, path


def env_of(directory: Path, database_url: str, **redis: str) -> dict[str, str]:
    return clean_env(DATABASE_URL=database_url, SECRET_KEY=secrets.token_hex(32),
                     DATA_DIR=str(directory / "data"), HOST="127.0.0.1", PORT=str(free_port()),
                     GLOBAL_API_RATE_LIMIT="0", CRITICAL_RATE_LIMIT="0", QUOTA_SYNC_INTERVAL="0.2", **redis)


def sql_deployment_id(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return str(conn.execute("SELECT uid FROM deployments WHERE id = 1").fetchone()[0])


async def _queue_usage(prefix: str) -> None:
    """An adjustment of each account in `USERS`, queued in its partition's stream (not yet synced)."""
    store = RedisQuotaStore(RedisBackend(REDIS_URL, prefix))
    try:
        for user in USERS:
            await store.load_locked("user", user, 1_000, "0-0")
            await store.adjust("user", user, "add", 5, f"test:{secrets.token_hex(4)}", None, False)
    finally:
        await store.backend.close()


async def _streams(prefix: str) -> dict[int, tuple[list[tuple[str, dict[str, str]]], str | None]]:
    """Per partition of `USERS`: the stream's entries and the sync cursor recorded in Redis."""
    store = RedisQuotaStore(RedisBackend(REDIS_URL, prefix))
    try:
        found = {}
        for user in USERS:
            p = store.partition(user)
            found[p] = (await store.r.xrange(store.streams[p]), await store.r.get(store.cursors[p]))
        return found
    finally:
        await store.backend.close()


def test_a_process_on_another_database_is_refused_and_the_streams_stay(tmp_path: Path, redis_prefix: str
                                                                       ) -> None:
    a_url, a_file = database(tmp_path / "a")
    b_url, b_file = database(tmp_path / "b")
    redis = {"REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": redis_prefix}
    a_env, b_env = env_of(tmp_path / "a", a_url, **redis), env_of(tmp_path / "b", b_url, **redis)

    first = run_to_end(tmp_path, a_env, "quota-sync", "--once")  # deployment A opens the store first
    assert first.popen.returncode == 0, first.output()
    run_blocking(_queue_usage(redis_prefix))
    queued = run_blocking(_streams(redis_prefix))
    assert all(len(entries) == 1 for entries, _ in queued.values()), queued

    for command in (("quota-sync", "--once"), ("quota-sync",), ("serve",)):
        proc = run_to_end(tmp_path, b_env, *command)
        # nothing synced into B, nothing trimmed
        assert run_blocking(_streams(redis_prefix)) == queued, f"{command}\n{proc.output()}"
        line = refused(proc, "belongs to deployment")
        ids = sql_deployment_id(a_file), sql_deployment_id(b_file)
        assert ids[0] != ids[1]
        assert f"belongs to deployment {ids[0]}" in line and f"is deployment {ids[1]}" in line, line
        assert "REDIS_KEY_PREFIX" in line and "DATABASE_URL" in line, line

    drained = run_to_end(tmp_path, a_env, "quota-sync", "--once")  # its own database takes them
    assert drained.popen.returncode == 0, drained.output()
    after = run_blocking(_streams(redis_prefix))
    assert all(cursor == queued[p][0][-1][0] for p, (_, cursor) in after.items()), after


def test_redis_url_at_a_cluster_node_is_refused(tmp_path: Path, redis_cluster: Cluster, cluster_prefix: str
                                                ) -> None:
    url, _ = database(tmp_path)
    host, port = redis_cluster.addresses[0]
    env = env_of(tmp_path, url, REDIS_URL=f"redis://{host}:{port}/0", REDIS_KEY_PREFIX=cluster_prefix)
    for command in (("serve",), ("quota-sync", "--once")):
        line = refused(run_to_end(tmp_path, env, *command), "REDIS_URL points at a Redis Cluster node")
        assert "set REDIS_CLUSTER_NODES instead" in line, line


def test_redis_cluster_nodes_at_a_single_server_is_refused(tmp_path: Path, redis_prefix: str) -> None:
    url, _ = database(tmp_path)
    single = REDIS_URL.split("//", 1)[1].split("/", 1)[0]  # host:port
    env = env_of(tmp_path, url, REDIS_CLUSTER_NODES=single, REDIS_KEY_PREFIX=redis_prefix)
    for command in (("serve",), ("quota-sync", "--once")):
        line = refused(run_to_end(tmp_path, env, *command), f"REDIS_CLUSTER_NODES names {single}")
        assert "not a Redis Cluster node" in line and "set REDIS_URL instead" in line, line
