"""What `RedisQuotaStore.setup` refuses before a process uses the store (quota/backends/redis_setup.py), on
the real Redis and the session's Redis Cluster: the store of another deployment, and a server of the other
kind than the setting that names it. (The processes that print these refusals:
tests/test_deployment_identity.py.)"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import pytest

from backend.base import BackendUnavailable
from backend.redis import RedisBackend
from quota.backends.redis_quota import RedisQuotaStore
from quota.backends.redis_setup import DEPLOYMENT, OtherDeployment, WrongRedisKind
from quota.store import SetupRefused
from tests.redis_cluster import Cluster
from tests.services import REDIS_URL


@pytest.fixture(params=["redis", "cluster"])
async def backend(request: pytest.FixtureRequest, redis_prefix: str) -> AsyncIterator[RedisBackend]:
    """The backend of a fresh prefix on one server or on the session's cluster."""
    if request.param == "cluster":
        cluster: Cluster = request.getfixturevalue("redis_cluster")
        chosen = cluster.backend(request.getfixturevalue("cluster_prefix"))
    else:
        chosen = RedisBackend(REDIS_URL, redis_prefix)
    yield chosen
    await chosen.close()


async def test_a_store_belongs_to_the_first_deployment_that_opens_it(backend: RedisBackend) -> None:
    store = RedisQuotaStore(backend)
    await store.setup("deployment-a")
    await store.setup("deployment-a")  # the same deployment again, and another process of it: accepted
    await RedisQuotaStore(backend).setup("deployment-a")
    with pytest.raises(OtherDeployment) as refused:
        await RedisQuotaStore(backend).setup("deployment-b")
    assert (refused.value.stored, refused.value.ours) == ("deployment-a", "deployment-b")
    message = str(refused.value)
    assert "belongs to deployment deployment-a" in message and "is deployment deployment-b" in message
    assert repr(backend.prefix) in message and "\n" not in message
    assert isinstance(refused.value, SetupRefused)

    await backend.delete(DEPLOYMENT)  # Redis lost its data: the next process records its own deployment
    await RedisQuotaStore(backend).setup("deployment-b")
    with pytest.raises(OtherDeployment):
        await RedisQuotaStore(backend).setup("deployment-a")


async def test_redis_url_at_a_cluster_node_is_refused(redis_cluster: Cluster, cluster_prefix: str) -> None:
    host, port = redis_cluster.addresses[0]
    backend = RedisBackend(f"redis://{host}:{port}/0", cluster_prefix)
    try:
        with pytest.raises(WrongRedisKind, match=r"^REDIS_URL points at a Redis Cluster node; set "
                                                 r"REDIS_CLUSTER_NODES instead"):
            await RedisQuotaStore(backend).setup("deployment-a")
    finally:
        await backend.close()


async def test_redis_cluster_nodes_at_a_single_server_is_refused(redis_prefix: str) -> None:
    single = REDIS_URL.split("//", 1)[1].split("/", 1)[0]
    host, port = single.rsplit(":", 1)
    backend = RedisBackend(prefix=redis_prefix, nodes=[(host, int(port))])
    try:
        with pytest.raises(WrongRedisKind, match=f"^REDIS_CLUSTER_NODES names {single}, which is not a Redis "
                                                 "Cluster node .*; set REDIS_URL instead"):
            await RedisQuotaStore(backend).setup("deployment-a")
    finally:
        await backend.close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.parametrize("kind", ["url", "nodes"])
async def test_an_unreachable_server_is_unavailable_not_of_the_wrong_kind(kind: str) -> None:
    port = _closed_port()
    backend = (RedisBackend(f"redis://127.0.0.1:{port}/0", "tw:", timeout=2.0) if kind == "url"
               else RedisBackend(prefix="tw:", nodes=[("127.0.0.1", port)], timeout=2.0))
    try:
        with pytest.raises(BackendUnavailable):
            await RedisQuotaStore(backend).setup("deployment-a")
    finally:
        await backend.close()
