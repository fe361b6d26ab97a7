"""The Redis backend a configuration names: one server (`REDIS_URL`) or a Redis Cluster
(`REDIS_CLUSTER_NODES`, a few seed nodes; the client discovers the rest). Built here for the worker
(`server/context.py`), the start-up check (`server/cli.py`) and the quota sync (`server/quota_sync.py`).

What runs on a cluster is decided here too: everything but the quota engine (sessions, the short-lived
keys, rate limits, version counters, broadcasts). The quota keys are partitioned by account, so each quota
script touches one slot (tests/quota/test_partitions.py), but the engine's guarantees (no overdraw,
conservation, exactly once, a master failover) are not yet proven on a cluster: until they are,
`refuse_cluster_quota` stops every command that would run the quota engine at start-up, saying so.
"""

from __future__ import annotations

from quota.backends.redis import RedisBackend
from quota.observer import ErrorObserver, ignore_error
from server.config import Config, ConfigError

CLUSTER_QUOTA_MISSING = (
    "REDIS_CLUSTER_NODES: the quota engine does not run on a Redis Cluster yet (its keys are partitioned, "
    "one slot per script, but its guarantees are not yet proven on a cluster); use REDIS_URL (one Redis "
    "server) until then")


def redis_backend(config: Config, on_error: ErrorObserver = ignore_error) -> RedisBackend | None:
    """A new backend on the configured Redis (nothing is connected yet), telling `on_error` of each
    failed call; None in embedded mode."""
    if config.redis_cluster_nodes:
        return RedisBackend(prefix=config.redis_prefix, timeout=config.redis_timeout,
                            nodes=config.redis_cluster_nodes, on_error=on_error,
                            partitions=config.quota_partitions)
    if config.redis_url:
        return RedisBackend(config.redis_url, config.redis_prefix, timeout=config.redis_timeout,
                            on_error=on_error, partitions=config.quota_partitions)
    return None


def refuse_cluster_quota(config: Config) -> None:
    """ConfigError when `config` would run the quota engine on a Redis Cluster (see the docstring)."""
    if config.redis_cluster_nodes:
        raise ConfigError(CLUSTER_QUOTA_MISSING)
