"""The Redis backend a configuration names: one server (`REDIS_URL`) or a Redis Cluster
(`REDIS_CLUSTER_NODES`, a few seed nodes; the client discovers the rest). Built here for the worker
(`server/context.py`), the start-up check (`server/cli.py`) and the quota sync (`server/quota_sync.py`).

Everything runs on a cluster, the quota engine included: its keys are partitioned by account, so each
quota script touches one slot (quota/partitions.py), and its guarantees are proven there
(tests/quota/test_invariants.py and the others parametrized with "cluster", tests/quota/test_failover.py
for a master failover; the loss bound of a failover is in docs/PRODUCTION.md#redis-cluster).
"""

from __future__ import annotations

from backend.observer import ErrorObserver, ignore_error
from backend.redis import RedisBackend
from server.config import Config


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

