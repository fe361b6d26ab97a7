"""Tollway on a real Redis Cluster (three masters, one replica each: tests/redis_cluster.py).

The shared suites run on the cluster too (tests/backend/test_backends.py and test_records.py,
tests/quota/test_ratelimit.py and test_versions.py, tests/test_kv.py: the "cluster" parameter). Here: what is
particular to a cluster — the keys one atomic step changes together share a slot, a rate-limit call across
slots is refused, the session store's WATCH/MULTI steps run there, a master failover is ridden through by the
idempotent calls and the broadcasts, and `tollway serve` with a separate `tollway quota-sync` charge a model
call in the cluster and sync it to SQL. The quota engine's own guarantees on a cluster are the quota suites'
"cluster" parameter and tests/quota/test_failover.py.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from unittest.mock import ANY

import httpx
import pytest
from redis.asyncio.cluster import RedisCluster
from sqlalchemy import select

from backend.base import Limit
from backend.redis import RedisBackend
from core.enums import LogType
from models.db import Database
from models.logs import Log
from models.tables import User
from quota.backends.redis_quota import RedisQuotaStore
from server.components.sessions import RedisSessionStore, new_session_id
from tests.backend.test_backends import Listener, until_subscribed
from tests.fakes.openai import FakeOpenAI
from tests.redis_cluster import Cluster, command, own_cluster
from tests.services import create_database, drop_database, run_blocking
from tests.test_e2e_serve import (
    ROOT_PASSWORD,
    _one_line_refusal,
    clean_env,
    free_port,
    run_to_end,
    serving,
    setup_root,
    start,
    stop,
)

HANG = 60.0  # seconds; bounds a hang only
MOD = "omni-moderation-latest"
PRICE = 1000  # quota units of one call at the model price 0.002 (USD 0.002 × 500,000)


@pytest.fixture
async def backend(redis_cluster: Cluster, cluster_prefix: str) -> AsyncIterator[RedisBackend]:
    chosen = redis_cluster.backend(cluster_prefix)
    yield chosen
    await chosen.close()


async def test_the_keys_one_step_changes_together_share_a_slot(backend: RedisBackend) -> None:
    slot, key = backend.slot, backend.key
    assert slot(backend.versions_key) == slot(key("rec:user:5")) == slot(key("rec:token:ab12"))
    assert slot(key("session:" + "a" * 64)) == slot(key("session:user:7"))
    assert slot(key("email_send:ip:10.0.0.1")) == slot(key("email_send:address:" + "f" * 64))
    assert slot(key("rl:api:{10.0.0.1}")) == slot(key("rl:critical:{10.0.0.1}"))
    # the rest spread over the slots: not everything on one shard
    assert len({slot(key(f"rl:key:{n}:rpm")) for n in range(20)}) > 1


def test_one_server_keeps_its_key_names() -> None:
    single = RedisBackend("redis://127.0.0.1:6379/0", "tw:")
    assert (single.versions_key, single.key("session:user:7"), single.key("rec:user:5")) == (
        "tw:ver", "tw:session:user:7", "tw:rec:user:5")


async def test_a_rate_limit_call_across_slots_is_refused_and_one_slot_is_atomic(backend: RedisBackend
                                                                               ) -> None:
    apart = [Limit("rl:key:1:rpm", 5, 60), Limit("rl:key:2:rpm", 5, 60)]
    assert backend.slot(backend.key(apart[0].key)) != backend.slot(backend.key(apart[1].key))
    with pytest.raises(ValueError, match="share a slot"):
        await backend.gcra_many(apart)
    together = [Limit("rl:api:{10.0.0.9}", 5, 60), Limit("rl:critical:{10.0.0.9}", 1, 600)]
    assert (await backend.gcra_many(together)).allowed
    refused = await backend.gcra_many(together)
    assert not refused.allowed and refused.refused_by == "rl:critical:{10.0.0.9}"
    assert (await backend.gcra("rl:api:{10.0.0.9}", 5, 60)).remaining == 3  # the refusal charged neither


async def test_the_session_store_runs_its_watched_steps_on_a_cluster(backend: RedisBackend) -> None:
    sessions = RedisSessionStore(backend)
    raw, rotated = new_session_id(), new_session_id()
    await sessions.save(raw, {"id": 7, "role": 1, "pushed_at": 0}, ttl=300)
    assert await sessions.merge(raw, {"pending": "x"})
    assert await sessions.take(raw, "pending") == "x"
    assert await sessions.take(raw, "pending") is None
    assert await sessions.slide(raw, {"pushed_at": 5}) == {"id": 7, "role": 1, "pushed_at": 5}
    assert await sessions.rotate(raw, rotated, {"role": 10}) == {"id": 7, "role": 10, "pushed_at": 5}
    assert await sessions.get(raw) is None
    kept = new_session_id()
    await sessions.save(kept, {"id": 7, "role": 1})
    await sessions.revoke_user(7, keep_raw_id=kept)  # the index knows the rotated id
    assert await sessions.get(rotated) is None and await sessions.get(kept) is not None

    # a revocation racing rotations leaves no session, whichever runs first
    for round_ in range(10):
        uid = 100 + round_
        chain = [new_session_id() for _ in range(4)]
        await sessions.save(chain[0], {"id": uid, "role": 1})

        async def rotations(chain: list[str] = chain) -> None:
            for old, new in itertools.pairwise(chain):
                await sessions.rotate(old, new, {})

        await asyncio.gather(rotations(), sessions.revoke_user(uid))
        await sessions.revoke_user(uid)  # whatever a late rotation left is indexed and ends here
        assert [await sessions.get(s) for s in chain] == [None] * 4


async def test_a_master_failover_is_ridden_through(tmp_path: Path) -> None:
    """kill -9 the master that serves the broadcast channel and a key: its replica takes over (the
    cluster's node timeout, 2 s, plus the election). Reads issued during the failover answer once it is
    over (idempotent calls retry until REDIS_TIMEOUT), the value written and replicated before the kill
    is still there, the scripts run on the promoted replica (loaded again: SCRIPT LOAD is not
    replicated), and the listener, whose node died, subscribes again and hears the broadcasts.

    A client that reached the dead master's slots only through pipelines (the quota sync's reads, the
    sweep) learns the new slot map too: redis-py does not mark the map stale after a failed pipeline, and
    such a client kept sending to the dead node until its deadline."""
    with own_cluster(tmp_path / "cluster") as cluster:
        backend = cluster.backend(f"fo:{secrets.token_hex(3)}:", timeout=HANG)
        piped = cluster.backend(f"fo:{secrets.token_hex(3)}:", timeout=HANG)
        listener: Listener | None = None
        try:
            async with asyncio.timeout(HANG * 2):
                victim = cluster.master_of(backend.channel("invalidate"))
                quota = RedisQuotaStore(piped)
                partition = next(p for p in range(len(quota.streams))
                                 if cluster.master_of(quota.streams[p]) == victim)
                assert await quota.read(partition, "0-0", 10) == (ANY, [])  # the slot map is known
                kept = next(name for name in (f"kept:{n}" for n in range(1000))
                            if cluster.master_of(backend.key(name)) == victim)
                await backend.set_text(kept, "before", 600)
                await asyncio.to_thread(cluster.replicated, victim)  # the replica has it
                listener = Listener(backend, "invalidate")
                await until_subscribed(backend, listener, "invalidate")
                assert listener.subscriptions == 1

                killing = asyncio.create_task(asyncio.to_thread(cluster.kill_master, victim))
                reads: list[str | None] = []
                while not killing.done():
                    reads.append(await backend.get_text(kept))
                    await asyncio.sleep(0.05)
                promoted = await killing
                reads.append(await backend.get_text(kept))
                assert set(reads) == {"before"}, reads
                assert promoted in cluster.masters() and victim not in cluster.masters()

                counter = next(name for name in (f"n:{n}" for n in range(1000))
                               if cluster.master_of(backend.key(name)) == promoted)
                assert await backend.incr(counter, 600) == 1  # a script on the promoted replica
                await until_subscribed(backend, listener, "invalidate")
                assert listener.subscriptions == 2  # it lost its node and subscribed again

                async with asyncio.timeout(10):  # the deadline (HANG) would hide a client that never learns
                    assert await quota.read(partition, "0-0", 10) == (ANY, [])
        finally:
            if listener is not None:
                await listener.stop()
            await backend.close()
            await piped.close()


def _serving(cluster: Cluster, key: str) -> int | None:
    """The master that serves `key`'s slot, or None for a moment of a handover in which no master claims it
    yet (their views of the slot converge through the cluster bus)."""
    try:
        return cluster.master_of(key)
    except LookupError:
        return None


async def test_a_script_whose_slot_moved_follows_the_redirection_once(redis_cluster: Cluster,
                                                                     backend: RedisBackend) -> None:
    """A slot handed to another master after the client learned the map: the pipelined script is answered
    MOVED (it did not run), the cluster client runs it on the new master, and the next call goes there
    directly. The counter counts each call once."""
    await backend.ping()  # the slot map is known from here on
    name = next(n for n in (f"moved:{i}" for i in range(1000))
                if command(redis_cluster.master_of(backend.key(n)), "CLUSTER", "COUNTKEYSINSLOT",
                           str(backend.slot(backend.key(n)))).strip() == "0")
    slot = backend.slot(backend.key(name))
    old = redis_cluster.master_of(backend.key(name))
    new = next(port for port in redis_cluster.masters() if port != old)
    new_id = command(new, "CLUSTER", "MYID").strip()
    for port in (new, old):  # an empty slot: handed over without migrating keys
        assert command(port, "CLUSTER", "SETSLOT", str(slot), "NODE", new_id).strip() == "OK"
    async with asyncio.timeout(HANG):
        while _serving(redis_cluster, backend.key(name)) != new:
            await asyncio.sleep(0.1)
    assert isinstance(backend.client, RedisCluster)
    assert backend.client.nodes_manager.get_node_from_slot(slot).port == old  # the client's map is stale

    assert await backend.incr(name, 60) == 1  # not retried by us: MOVED means it did not run
    assert backend.client.nodes_manager.get_node_from_slot(slot).port == new
    assert await backend.incr(name, 60) == 2
    assert command(new, "CLUSTER", "COUNTKEYSINSLOT", str(slot)).strip() == "1"


async def _charged_and_synced(base_url: str, db_url: str, upstream: str) -> None:
    """As root: a priced model, a channel to the fake upstream, a key; one call is answered and charged,
    and the sync (another process) brings its consume log and the balance into SQL."""
    async with httpx.AsyncClient(base_url=base_url, timeout=HANG) as root:
        login = await root.post("/api/user/login", json={"username": "root", "password": ROOT_PASSWORD})
        assert login.status_code == 200, login.text
        root.headers["New-Api-User"] = str(login.json()["data"]["id"])
        price = {"key": "ModelPrice", "value": f'{{"{MOD}": 0.002}}'}
        for reply in (await root.put("/api/option/", json=price),
                      await root.post("/api/channel/", json={"mode": "single", "channel": {
                          "name": "mod", "type": 1, "key": "o-key", "base_url": upstream, "models": MOD,
                          "group": "default"}})):
            assert reply.status_code == 200 and reply.json()["success"], reply.text
        made = await root.post("/api/token/", json={"name": "calls", "unlimited_quota": True})
        key = made.json()["data"]["key"]
        before = (await root.get("/api/user/self")).json()["data"]["quota"]
        call = await root.post("/v1/moderations", json={"input": "hello"},
                               headers={"Authorization": f"Bearer {key}", "New-Api-User": ""})
        assert call.status_code == 200, call.text
        live = (await root.get("/api/user/self")).json()["data"]["quota"]
        assert live == before - PRICE  # charged in the cluster at once
    db = Database(db_url, pool_size=1)
    try:
        async with asyncio.timeout(HANG):
            while True:  # until the sync process moved the usage into SQL
                async with db.transaction() as tx:
                    rows = (await tx.scalars(select(Log).where(Log.type == LogType.CONSUME))).all()
                    quota = await tx.scalar(select(User.quota).where(User.username == "root"))
                if rows:
                    break
                await asyncio.sleep(0.1)
        assert [(x.quota, x.model_name) for x in rows] == [(PRICE, MOD)]
        assert quota == live
    finally:
        await db.dispose()


def test_serve_and_the_quota_sync_run_on_a_cluster_and_a_call_is_charged_and_synced(
        redis_cluster: Cluster, tmp_path: Path) -> None:
    """`tollway serve` and a separate `tollway quota-sync` on REDIS_CLUSTER_NODES (MariaDB): both start,
    a paid model call is charged in the cluster and its usage reaches SQL through the sync process. A
    wrong configuration is still a one-line refusal."""
    prefix = f"twtest:{secrets.token_hex(4)}:"
    db_url = create_database("mariadb")
    env = clean_env(DATA_DIR=str(tmp_path / "data"), HOST="127.0.0.1", PORT=str(free_port()),
                    SECRET_KEY=secrets.token_hex(32), REDIS_KEY_PREFIX=prefix, DATABASE_URL=db_url,
                    REDIS_CLUSTER_NODES=redis_cluster.seeds, GLOBAL_API_RATE_LIMIT="0",
                    CRITICAL_RATE_LIMIT="0", UPSTREAM_ALLOW_PRIVATE="127.0.0.1/32",
                    QUOTA_SYNC_IN_SERVER="false", QUOTA_SYNC_PROCESS="false", QUOTA_SYNC_INTERVAL="0.1")
    try:
        with serving(tmp_path, env) as (_, base_url):
            setup_root(base_url, "mysql")
            sync = start(tmp_path, env, "quota-sync", tag="sync")
            try:
                async def scenario() -> None:
                    async with FakeOpenAI() as openai:
                        await _charged_and_synced(base_url, db_url, openai.url)

                asyncio.run(scenario())
                assert sync.popen.poll() is None, sync.output()
            finally:
                stop(sync)
        both = run_to_end(tmp_path, {**env, "REDIS_URL": "redis://127.0.0.1:6379/0"}, "serve")
        _one_line_refusal(both, "REDIS_CLUSTER_NODES: set either REDIS_URL")
        unreachable = run_to_end(tmp_path, {**env, "REDIS_CLUSTER_NODES": f"127.0.0.1:{free_port()}"},
                                 "serve")
        _one_line_refusal(unreachable, "cannot connect to Redis at REDIS_CLUSTER_NODES")
    finally:
        run_blocking(redis_cluster.purge(prefix))
        drop_database("mariadb", db_url)
