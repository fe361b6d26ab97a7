"""Start-up refuses a database or a Redis older than Tollway's statements and scripts need — MariaDB 10.6 or
MySQL 8.0 (`JSON_TABLE`, models/sync_sql.py), Redis 6.2 (`XTRIM … MINID`, quota/lua/synced.lua) — with a
line naming the version found, instead of failing later in the quota sync. The servers of this machine
pass; older ones cannot be started here, so the rule itself is checked on the versions a server reports."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from models.db import Database, too_old
from quota.backends.redis import RedisBackend
from quota.backends.redis_quota import RedisQuotaStore, UnsupportedRedis, redis_version
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


async def test_the_database_servers_here_pass_the_check(db_url: str) -> None:
    db = Database(db_url, pool_size=1)
    try:
        await db.check()
    finally:
        await db.dispose()


def test_redis_versions_compare_as_numbers() -> None:
    assert redis_version("6.2.0") == (6, 2, 0) and redis_version("6.0.16") < (6, 2)
    assert redis_version("7.0.15") >= (6, 2) and redis_version("10.0.0") >= (6, 2)
    assert redis_version("255.255.255") > redis_version("6.2.0") > redis_version("6.1.99")
    message = str(UnsupportedRedis("6.0.16"))
    assert "Redis 6.0.16 is too old" in message and "6.2 or later" in message


async def test_the_redis_here_passes_the_check(redis_prefix: str) -> None:
    backend = RedisBackend(REDIS_URL, redis_prefix)
    try:
        await RedisQuotaStore(backend).setup()
    finally:
        await backend.close()
