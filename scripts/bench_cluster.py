"""Client CPU of a Lua script call (a rate-limit check, `RedisBackend.gcra`) on one Redis server and on a
Redis Cluster, through each path the backend can take: the pipelined connection (`redis_pipe.RedisPipe`;
on a cluster `ClusterPipes`, one per master) and redis-py's own client (the pool; the cluster client).

    python -m scripts.bench_cluster --nodes 127.0.0.1:7000,127.0.0.1:7001 [--redis redis://127.0.0.1:6379/0]
                                    [--calls 4000] [--concurrency 32] [--rounds 3]

Prints the worker process's CPU time per call (the best of the rounds: steadier than a rate on a shared
machine). The keys live under a fresh prefix and are deleted at the end. A test cluster can be started
with tests/redis_cluster.py's `own_cluster`.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import time
from collections.abc import Callable

from backend.redis import LuaScript, RedisBackend
from scripts.bench_quota import drop


def _without_pipe(backend: RedisBackend) -> RedisBackend:
    backend.pipe = None
    backend._gcra = LuaScript(backend.client, backend._gcra.source, None)
    return backend


async def _measure(backend: RedisBackend, calls: int, concurrency: int, rounds: int) -> float:
    async def caller(n: int) -> None:
        for _ in range(calls // concurrency):
            await backend.gcra(f"bench:{n}", 10**9, 60)

    await backend.gcra("bench:warm", 10**9, 60)
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        await asyncio.gather(*(caller(n) for n in range(concurrency)))
        best = min(best, (time.process_time() - start) / (calls // concurrency * concurrency) * 1e6)
    return best


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", required=True, help="seed nodes of a Redis Cluster: host:port,…")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    nodes = tuple((h, int(p)) for h, _, p in (n.strip().rpartition(":") for n in args.nodes.split(",")))
    prefix = f"benchcluster:{secrets.token_hex(3)}:"
    variants: list[tuple[str, Callable[[], RedisBackend]]] = [
        ("one Redis, pipelined connection", lambda: RedisBackend(args.redis, prefix)),
        ("one Redis, redis-py pool", lambda: _without_pipe(RedisBackend(args.redis, prefix))),
        ("cluster, pipelined per master", lambda: RedisBackend(prefix=prefix, nodes=nodes)),
        ("cluster, redis-py cluster client", lambda: _without_pipe(RedisBackend(prefix=prefix, nodes=nodes))),
    ]
    for label, make in variants:
        backend = make()
        try:
            cpu = await _measure(backend, args.calls, args.concurrency, args.rounds)
            print(f"{label:34} {cpu:6.0f} µs CPU per call")
        finally:
            await drop(backend)


if __name__ == "__main__":
    asyncio.run(main())
