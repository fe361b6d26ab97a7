"""The quota invariants, each proven against real Redis with MariaDB and with PostgreSQL, on a Redis Cluster
(three masters, one replica each) with MariaDB, and, where one process is the whole story, on the embedded
in-process store (the "Redis loss" of a cluster, a master failover, is tests/quota/test_failover.py):

I1 no overdraw under concurrency (2 OS processes × 25 callers)
I2 conservation after load and a final sync: SQL balance = initial + adjustments − consume logs; used_quota
   and request_count match the logs; the live balance equals the SQL balance
I3 crash safety: kill -9 a process serving load, and kill -9 the sync worker mid-batch
I4 credits, debits and overrides during load keep I2 exact; an override lands exactly
I5 Redis loss (FLUSHALL on a private Redis): the engine keeps answering and I2 still holds
"""

from __future__ import annotations

import asyncio
import random
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from quota.backends.redis_quota import RedisQuotaStore
from quota.leases import PartitionLeases
from quota.types import InsufficientQuota, SubtractTooLarge
from tests.conftest import _Databases, fresh_database
from tests.quota.env import QuotaEnv, build, consume_log
from tests.quota.procs import run_all, start_all, sync_process
from tests.services import REDIS_URL, unavailable


@dataclass
class Cluster:
    """A deployment under test: the engine in this process, and what its worker and sync processes are
    given. `nodes`: the seeds of the Redis Cluster it runs on, or none for the one Redis (`REDIS_URL`)."""

    env: QuotaEnv
    db_url: str
    prefix: str
    nodes: tuple[tuple[str, int], ...] = ()

    def worker(self, **cfg: Any) -> dict[str, Any]:
        redis = {"redis_nodes": list(self.nodes)} if self.nodes else {"redis_url": REDIS_URL}
        return {"db_url": self.db_url, "prefix": self.prefix, **redis, **cfg}

    def sync_env(self, **settings: str) -> dict[str, str]:
        """The environment of a `tollway quota-sync` process on this deployment, with `settings`."""
        redis = ({"REDIS_CLUSTER_NODES": ",".join(f"{host}:{port}" for host, port in self.nodes)}
                 if self.nodes else {"REDIS_URL": REDIS_URL})
        return {"DATABASE_URL": self.db_url, **redis, "REDIS_KEY_PREFIX": self.prefix,
                "SECRET_KEY": "test-secret-key-0123456789abcdef", **settings}


@pytest.fixture(params=["mariadb", "postgres", "cluster+mariadb"])
async def cluster(request: pytest.FixtureRequest, databases: _Databases, redis_prefix: str
                  ) -> AsyncIterator[Cluster]:
    """On the one Redis with each SQL server (under `redis_prefix`), and on the session's Redis Cluster
    (under `cluster_prefix`: tests/conftest.py)."""
    redis, _, kind = request.param.rpartition("+")
    url = await fresh_database(databases, kind)
    if redis == "cluster":
        nodes = request.getfixturevalue("redis_cluster").addresses
        prefix: str = request.getfixturevalue("cluster_prefix")
        env = build(url, None, prefix, nodes=nodes)
    else:
        nodes, prefix = (), redis_prefix
        env = build(url, REDIS_URL, prefix)
    try:
        yield Cluster(env, url, prefix, nodes)
    finally:
        await env.close()


async def assert_conserved(env: QuotaEnv, uid: int, initial: int, adjustments: int = 0,
                           key: tuple[int, int] | None = None) -> None:
    """I2 for one user (and key): durable = initial + adjustments − consume logs, live = durable."""
    await env.sync.drain()
    spent, calls = await env.consumed(uid)
    user = await env.user_row(uid)
    assert user.quota == initial + adjustments - spent
    assert (user.used_quota, user.request_count) == (spent, calls)
    assert await env.engine.balance("user", uid) == user.quota
    if key is not None:
        kid, key_initial = key
        key_logs = [x for x in await env.logs(token_id=kid) if x.type == 2]
        row = await env.key_row(kid)
        assert row.used_quota == sum(x.quota for x in key_logs)
        assert row.remain_quota == key_initial - row.used_quota
        assert await env.engine.balance("key", kid, owner=uid) == row.remain_quota


def settled_ok(lines: list[dict[str, Any]]) -> dict[str, int]:
    return {x["settled"]: x["cost"] for x in lines if "settled" in x and x["applied"]}


async def assert_every_success_logged(env: QuotaEnv, uid: int, successes: dict[str, int]) -> None:
    logs = {x.ref: x.quota for x in await env.logs(user_id=uid) if x.type == 2}
    missing = {ref: cost for ref, cost in successes.items() if logs.get(ref) != cost}
    assert not missing, f"{len(missing)} successful calls have no (or a wrong) consume log"


# ---- I1 ---------------------------------------------------------------------------------------------

async def test_i1_no_overdraw_with_two_processes(cluster: Cluster) -> None:
    k, amount = 17, 100
    uid = await cluster.env.add_user(k * amount)
    lines = await run_all([cluster.worker(mode="reserve", tasks=25, user_id=uid, amount=amount)] * 2)
    oks = [x for x in lines if "ok" in x]
    refused = [x for x in lines if "refused" in x]
    assert len(oks) == k and len(refused) == 50 - k
    assert all(x["balance"] >= 0 for x in oks)
    assert all(x["available"] >= 0 for x in refused)
    assert await cluster.env.engine.balance("user", uid) == 0


async def test_i1_a_key_quota_is_never_overdrawn_either(cluster: Cluster) -> None:
    uid = await cluster.env.add_user(1_000_000)
    kid = await cluster.env.add_key(uid, remain=9 * 50)
    lines = await run_all([cluster.worker(mode="reserve", tasks=25, user_id=uid, key_id=kid, amount=50)] * 2)
    assert len([x for x in lines if "ok" in x]) == 9
    assert {x["refused"] for x in lines if "refused" in x} == {"key"}
    assert await cluster.env.engine.balance("key", kid, owner=uid) == 0
    assert await cluster.env.engine.balance("user", uid) == 1_000_000 - 9 * 50


async def test_i1_embedded_store_admits_exactly_k(quota_env: QuotaEnv) -> None:
    uid = await quota_env.add_user(23 * 10)

    async def attempt() -> bool:
        try:
            await quota_env.engine.reserve(uid, 10)
            return True
        except InsufficientQuota:
            return False

    results = await asyncio.gather(*(attempt() for _ in range(50)))
    assert sum(results) == 23
    assert await quota_env.engine.balance("user", uid) == 0


# ---- I2 ---------------------------------------------------------------------------------------------

async def test_i2_conservation_after_load(cluster: Cluster) -> None:
    initial, key_initial = 5_000_000, 40_000
    uid = await cluster.env.add_user(initial)
    kid = await cluster.env.add_key(uid, remain=key_initial)
    cfg = cluster.worker(mode="cycle", tasks=10, iterations=25, user_id=uid, key_id=kid, amount=300)
    lines = await run_all([{**cfg, "seed": 1}, {**cfg, "seed": 2}])
    assert any("refused" in x for x in lines)  # the key ran dry during the run: refusals were exercised
    await assert_conserved(cluster.env, uid, initial, key=(kid, key_initial))
    await assert_every_success_logged(cluster.env, uid, settled_ok(lines))


# ---- I3 ---------------------------------------------------------------------------------------------

async def test_i3_kill_9_of_a_serving_process_releases_its_holds(cluster: Cluster) -> None:
    initial = 10_000_000
    uid = await cluster.env.add_user(initial)
    cfg = cluster.worker(mode="cycle", tasks=10, iterations=400, user_id=uid, amount=500, lease=1.0)

    def run() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        victim, survivor = start_all([{**cfg, "seed": 3}, {**cfg, "seed": 4, "iterations": 40}])
        victim.read_until("held")  # its first hold is open (a fixed wait raced a slow start)
        time.sleep(0.3)
        victim.kill()
        return victim.finish(), survivor.finish()

    victim_lines, survivor_lines = await asyncio.to_thread(run)
    assert not any("done" in x for x in victim_lines), "the victim finished before it was killed"
    assert any("done" in x for x in survivor_lines)
    lines = victim_lines + survivor_lines
    assert cluster.env.redis is not None
    store = cluster.env.store
    assert isinstance(store, RedisQuotaStore)
    open_holds = await cluster.env.redis.client.zcard(store.holds[store.partition(uid)])
    assert open_holds >= 1, "the victim died with no hold open; the test proved nothing"
    await asyncio.sleep(1.3)  # let the leases of the dead process run out
    assert await cluster.env.engine.sweep() >= 1
    await assert_conserved(cluster.env, uid, initial)
    await assert_every_success_logged(cluster.env, uid, settled_ok(lines))


async def test_i3_kill_9_of_the_sync_worker_mid_batch(cluster: Cluster) -> None:
    initial = 10_000_000
    uid = await cluster.env.add_user(initial)
    cfg = cluster.worker(mode="cycle", tasks=10, iterations=60, user_id=uid, amount=200)
    env_vars = cluster.sync_env(QUOTA_SYNC_INTERVAL="0.01", QUOTA_SYNC_BATCH="25")

    def run() -> tuple[list[dict[str, Any]], int]:
        workers = start_all([{**cfg, "seed": 5}, {**cfg, "seed": 6}])
        kills = 0
        rng = random.Random(7)
        while any(w.proc.poll() is None for w in workers) or kills < 3:
            sync = sync_process(env_vars)
            time.sleep(rng.uniform(0.2, 0.5))
            sync.kill()  # SIGKILL, wherever it is in its batch
            sync.wait()
            kills += 1
        return [line for w in workers for line in w.finish()], kills

    lines, kills = await asyncio.to_thread(run)
    assert kills >= 3
    await assert_conserved(cluster.env, uid, initial)
    successes = settled_ok(lines)
    await assert_every_success_logged(cluster.env, uid, successes)
    assert len([x for x in await cluster.env.logs(user_id=uid) if x.type == 2]) == len(successes)


async def wait_until(check: Any, what: str, deadline: float = 60.0) -> None:
    """Poll an observable condition (Redis state) until it holds; fail after `deadline` seconds."""
    async with asyncio.timeout(deadline):
        while not await check():
            await asyncio.sleep(0.05)
    assert await check(), what


async def test_i3_two_syncs_share_the_partitions_and_a_kill_9_hands_its_share_over(cluster: Cluster) -> None:
    """Two `tollway quota-sync` processes under load: both hold partitions while alive (leases), one is
    killed with SIGKILL mid-run, the survivor takes its partitions over once their leases time out, and
    every entry reaches SQL exactly once."""
    initial = 10_000_000
    uids = [await cluster.env.add_user(initial) for _ in range(6)]
    assert cluster.env.redis is not None
    leases = PartitionLeases(cluster.env.redis)  # only to read who holds what
    env_vars = cluster.sync_env(QUOTA_SYNC_INTERVAL="0.05", QUOTA_SYNC_BATCH="40",
                                QUOTA_SYNC_LEASE_TIMEOUT="1")
    syncs = [sync_process(env_vars), sync_process(env_vars)]
    victim, survivor = syncs

    async def holders_by_pid() -> dict[int, set[int]]:
        by_pid: dict[int, set[int]] = {}
        for partition, token in (await leases.holders()).items():
            by_pid.setdefault(int(token.rsplit(":", 2)[1]), set()).add(partition)
        return by_pid

    async def shared() -> bool:
        held = await holders_by_pid()
        return (set(held) == {victim.pid, survivor.pid} and len(held[victim.pid]) == 8
                and len(held[survivor.pid]) == 8)

    async def taken_over() -> bool:
        return await holders_by_pid() == {survivor.pid: set(range(16))}

    try:
        await wait_until(shared, "both syncs hold half the partitions")
        # the load runs until stopped (iterations 0), so it is still running when the victim is killed
        cfg = cluster.worker(mode="cycle", tasks=6, iterations=0, user_ids=uids, amount=200, pause=0.01)
        workers = await asyncio.to_thread(start_all, [{**cfg, "seed": 8}, {**cfg, "seed": 9}])
        async def synced_some() -> bool:  # the syncs are moving the load's usage into SQL
            return any([await cluster.env.logs(user_id=uid) for uid in uids])

        await wait_until(synced_some, "the syncs applied some of the load")
        assert all(w.proc.poll() is None for w in workers), "the load ended before the kill"
        assert await shared(), "the victim lost its share before it was killed"
        victim.kill()  # SIGKILL, wherever it is in its batch
        await asyncio.to_thread(victim.wait)
        await wait_until(taken_over, "the survivor holds every partition after the leases timed out")
        for w in workers:
            w.stop()
        lines = [line for w in workers for line in await asyncio.to_thread(w.finish)]
        assert survivor.poll() is None
        survivor.terminate()  # SIGTERM: drains what is queued and gives its leases back
        assert await asyncio.to_thread(survivor.wait, 60) == 0
        assert await leases.holders() == {}
    finally:
        for sync in syncs:
            if sync.poll() is None:
                sync.kill()
                sync.wait()
    successes = settled_ok(lines)
    assert successes
    for uid in uids:
        await assert_conserved(cluster.env, uid, initial)
    logged = [x for uid in uids for x in await cluster.env.logs(user_id=uid) if x.type == 2]
    assert sorted(x.ref for x in logged) == sorted(successes)  # every success once, nothing twice
    assert all(x.quota == successes[x.ref] for x in logged)


# ---- I4 ---------------------------------------------------------------------------------------------

async def test_i4_adjustments_during_load_keep_the_books_exact(cluster: Cluster) -> None:
    initial = 2_000_000
    uid = await cluster.env.add_user(initial)
    cfg = cluster.worker(mode="cycle", tasks=10, iterations=40, user_id=uid, amount=400)
    load = asyncio.create_task(run_all([{**cfg, "seed": 8}, {**cfg, "seed": 9}]))
    deltas: list[int] = []
    rng = random.Random(10)
    n = 0
    while not load.done():
        n += 1
        ref = f"admin-{n}"
        choice = rng.random()
        try:
            if choice < 0.4:
                adj = await cluster.env.engine.credit("user", uid, rng.randint(1, 5000), ref=ref,
                                                      log={"type": 1, "content": "topup", "quota": 1})
            elif choice < 0.8:
                adj = await cluster.env.engine.debit("user", uid, rng.randint(1, 5000), ref=ref)
            else:
                adj = await cluster.env.engine.set("user", uid, rng.randint(100_000, 3_000_000), ref=ref,
                                                   log={"type": 3, "content": "override {before}->{after}"})
            deltas.append(adj.delta)
            again = await cluster.env.engine.credit("user", uid, 1, ref=ref)  # a retried request
            assert not again.applied
        except SubtractTooLarge:
            pass
        await asyncio.sleep(0.005)
    lines = await load
    assert n >= 5, "the load ended before the adjustments could interleave with it"
    await assert_conserved(cluster.env, uid, initial, adjustments=sum(deltas))
    await assert_every_success_logged(cluster.env, uid, settled_ok(lines))
    final = await cluster.env.engine.set("user", uid, 777_777, ref="final-override")
    await assert_conserved(cluster.env, uid, initial, adjustments=sum(deltas) + final.delta)
    assert (await cluster.env.user_row(uid)).quota == 777_777


# ---- I5 ---------------------------------------------------------------------------------------------

@pytest.fixture
async def private_redis(tmp_path: Path) -> AsyncIterator[str]:
    """A Redis of our own (no persistence), so that FLUSHALL touches nothing else."""
    binary = shutil.which("redis-server")
    if binary is None:
        unavailable("redis-server", "not installed")
    assert binary is not None
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(tmp_path)], stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    client = aioredis.Redis.from_url(url)
    for _ in range(100):
        try:
            await client.ping()
            break
        except Exception:
            await asyncio.sleep(0.05)
    await client.aclose()
    try:
        yield url
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("kind", ["mariadb", "postgres"])
async def test_i5_flushall_during_load_reloads_from_sql(kind: str, databases: _Databases,
                                                        private_redis: str) -> None:
    url = await fresh_database(databases, kind)
    env = build(url, private_redis, f"i5:{secrets.token_hex(3)}:")
    try:
        initial = 3_000_000
        uid = await env.add_user(initial)
        successes: dict[str, int] = {}
        started = asyncio.Event()
        flushed = asyncio.Event()

        async def caller(seed: int) -> None:
            rng = random.Random(seed)
            after_flush = 0
            for n in range(10_000):  # until 60 calls after the flush (a bound, never reached)
                if n == 60:
                    started.set()
                if flushed.is_set():
                    after_flush += 1
                    if after_flush > 60:
                        return
                try:
                    r = await env.engine.reserve(uid, 300)
                except InsufficientQuota:
                    continue
                cost = rng.randint(0, 600)
                if (await env.engine.settle(r, cost, log=consume_log())).applied:
                    successes[r.hold_id] = cost
                await asyncio.sleep(0)

        env.sync.interval = 0.01
        sync_task = asyncio.create_task(env.sync.run_forever())
        load = asyncio.gather(*(caller(i) for i in range(8)))
        await started.wait()  # the flush lands during the load, after at least 60 calls per caller
        assert not load.done(), "the load ended before the flush"
        async with env.redis.client.pipeline(transaction=True) as pipe:  # type: ignore[union-attr]
            assert isinstance(env.store, RedisQuotaStore)
            for stream in env.store.streams:
                pipe.xlen(stream)
            pipe.flushall()
            lost_bound = sum((await pipe.execute())[:-1])
        flushed.set()
        await load
        env.sync.stop()
        await sync_task
        await assert_conserved(env, uid, initial)  # what was lost was lost from charges and logs alike
        logged = {x.ref for x in await env.logs(user_id=uid) if x.type == 2}
        lost = [ref for ref in successes if ref not in logged]
        assert len(lost) <= lost_bound  # at most what was waiting in the stream at the flush
        assert len(successes) > len(lost)  # and the service kept answering after it
    finally:
        await env.close()
