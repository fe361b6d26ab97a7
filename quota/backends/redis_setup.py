"""What a process checks before it uses a Redis quota store (`RedisQuotaStore.setup`), each refusal one line
for the start-up to print (a `SetupRefused`):

- The server is of the kind its setting says. `REDIS_URL` at a node of a Redis Cluster would answer MOVED
  to every command on a key of another node's slots (503 on every call, a traceback in the sync); the
  cluster client of `REDIS_CLUSTER_NODES` cannot start on a single server, which read as "cannot connect".
  Both are refused naming the setting to use (`WrongRedisKind`).
- The store belongs to this deployment. The caller reads the deployment id from SQL (models/deployment.py)
  and hands it over as a plain value; the first process records it under the prefix (`q:deployment`, a
  global key like `q:partitions`: one key, so its slot does not matter on a cluster), and a process whose
  database holds another id is refused (`OtherDeployment`). Without it a `tollway quota-sync` with another
  `DATABASE_URL` took its share of the partitions and committed their usage to the wrong database,
  trimming it from the streams. A Redis that lost its data has no id: the next process records its own,
  and the recovery of lost Redis state does the rest.

(The server's version and the number of partitions are checked in redis_quota.py.)
"""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from backend.base import BackendUnavailable
from backend.redis import RedisBackend, idempotent
from quota.store import SetupRefused

DEPLOYMENT = "q:deployment"  # the deployment id the store belongs to (under the prefix)
PARTITIONS = "q:partitions"  # the number of partitions it was set up with


class WrongRedisKind(SetupRefused):
    """The setting names a server of the other kind: `REDIS_URL` a Redis Cluster node, or
    `REDIS_CLUSTER_NODES` a single server."""


class OtherDeployment(SetupRefused):
    """The store under this prefix records another deployment id than the database's."""

    def __init__(self, prefix: str, stored: str, ours: str) -> None:
        super().__init__(
            f"the quota state in Redis under REDIS_KEY_PREFIX {prefix!r} belongs to deployment {stored}, but "
            f"the database of DATABASE_URL is deployment {ours}: point DATABASE_URL at that deployment's "
            "database, or give this one a REDIS_KEY_PREFIX of its own "
            "(docs/PRODUCTION.md#deployment-identity)")
        self.stored = stored
        self.ours = ours


async def check_kind(backend: RedisBackend) -> None:
    """Reach the server (BackendUnavailable when it cannot be reached) and refuse one of the other kind."""
    if not backend.cluster:
        if await _cluster_enabled(backend):
            raise WrongRedisKind("REDIS_URL points at a Redis Cluster node; set REDIS_CLUSTER_NODES instead "
                                 "(docs/PRODUCTION.md#redis-cluster)")
        return
    try:
        await backend.ping()
    except BackendUnavailable:
        single = await _single_server(backend)
        if single is None:
            raise
        raise WrongRedisKind(f"REDIS_CLUSTER_NODES names {single}, which is not a Redis Cluster node (it "
                             "has cluster mode off); set REDIS_URL instead") from None


@idempotent
async def _cluster_enabled(backend: RedisBackend) -> bool:
    info = await backend.client.info("cluster")
    return str(info.get("cluster_enabled", "0")) == "1"


async def _single_server(backend: RedisBackend) -> str | None:
    """The first seed that answers as a server with cluster mode off ("host:port"); None if none does
    (unreachable seeds say nothing: the cluster may simply be down)."""
    for host, port in backend.nodes:
        client = aioredis.Redis(host=host, port=port, socket_connect_timeout=backend.timeout,
                                decode_responses=True)
        try:
            async with asyncio.timeout(backend.timeout):
                info = await client.info("cluster")
            if str(info.get("cluster_enabled", "0")) != "1":
                return f"{host}:{port}"
        except (TimeoutError, RedisError, OSError):
            continue
        finally:
            await client.aclose()
    return None


@idempotent
async def claim(backend: RedisBackend, name: str, value: str) -> str:
    """Record `value` under `name` unless the key holds one already; the value it holds now. (Run twice —
    a retry after the connection broke — it finds its own value.)"""
    key = backend.key(name)
    await backend.client.set(key, value, nx=True)
    stored = await backend.client.get(key)
    return str(stored) if stored is not None else value
