"""Start-up refuses a database or a Redis older than Tollway's statements and scripts need — MariaDB 10.6 or
MySQL 8.0 (`JSON_TABLE`, models/sync_sql.py), Redis 6.2 (`XTRIM … MINID`, quota/lua/synced.lua) — with a
line naming the version found, instead of failing later in the quota sync. The servers of this machine
pass; older ones cannot be started here, so the rule is checked on the versions a server reports, and its
wiring by raising the bar above the real servers' versions."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import models.db
import quota.backends.redis_quota
from backend.redis import RedisBackend
from models.db import Database, DatabaseUnavailable, too_old
from quota.backends.redis_quota import RedisQuotaStore, UnsupportedRedis, redis_version
from quota.store import SetupRefused
from tests.redis_cluster import Cluster
from tests.services import REDIS_URL


@pytest.mark.parametrize(("name", "mariadb", "version", "needed"), [
    ("mysql", True, (10, 5, 27), "MariaDB 10.6"),
    ("mysql", True, (10, 6, 0), None),
    ("mysql", True, (11, 4, 2), None),
    ("mysql", False, (5, 7, 44), "MySQL 8.0"),
    ("mysql", False, (8, 0, 36), None),
    ("postgresql", False, (9, 6), None),
    ("sqlite", False, (3, 7, 0), None),
])
def test_the_oldest_database_servers_supported(name: str, mariadb: bool, version: tuple[int, ...],
                                               needed: str | None) -> None:
    dialect = SimpleNamespace(name=name, is_mariadb=mariadb, server_version_info=version)
    assert too_old(dialect) == needed


async def test_the_database_servers_here_pass_the_check_and_a_higher_bar_refuses_them(
        db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    db = Database(db_url, pool_size=1)
    try:
        await db.check()
        if db.backend != "mysql":
            return  # SQLite and PostgreSQL have no lower bound
        monkeypatch.setattr(models.db, "OLDEST", {"mariadb": ((99, 0), "MariaDB 99.0"),
                                                  "mysql": ((99, 0), "MySQL 99.0")})
        with pytest.raises(DatabaseUnavailable, match=r"runs version \d+\.\d+.*needs M\w+ 99\.0 or later"):
            await db.check()
    finally:
        await db.dispose()


def test_redis_versions_compare_as_numbers() -> None:
    assert redis_version("6.2.0") == (6, 2, 0) and redis_version("6.0.16") < (6, 2)
    assert redis_version("7.0.15") >= (6, 2) and redis_version("10.0.0") >= (6, 2)
    assert redis_version("255.255.255") > redis_version("6.2.0") > redis_version("6.1.99")
    message = str(UnsupportedRedis("6.0.16"))
    assert "Redis 6.0.16 is too old" in message and "6.2 or later" in message


async def _passes_then_refused(backend: RedisBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        await RedisQuotaStore(backend).setup("a-deployment")
        monkeypatch.setattr(quota.backends.redis_quota, "OLDEST_REDIS", (99, 0))
        with pytest.raises(SetupRefused, match=r"Redis \d+\.\d+\.\d+ is too old: Tollway needs Redis 99\.0"):
            await RedisQuotaStore(backend).setup("a-deployment")
    finally:
        await backend.close()


async def test_the_redis_here_passes_the_check_and_a_higher_bar_refuses_it(
        redis_prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    await _passes_then_refused(RedisBackend(REDIS_URL, redis_prefix), monkeypatch)


async def test_a_cluster_passes_the_check_and_a_higher_bar_refuses_it(
        redis_cluster: Cluster, cluster_prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    await _passes_then_refused(redis_cluster.backend(cluster_prefix), monkeypatch)
