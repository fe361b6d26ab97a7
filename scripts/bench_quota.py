"""Benchmark: reserve + settle pairs per second from one process against a local Redis.

    python -m scripts.bench_quota [--redis redis://127.0.0.1:6379/0] [--pairs 20000] [--concurrency 8]

Each pair is the hot path's quota work for one model call: one Lua call to reserve, one to settle (which
queues the usage for the SQL sync). The durable side is not on this path and is not measured here.
Prints throughput, the latency of a pair (p50/p99) and the CPU per pair, the median of `--runs` runs.
Runs on uvloop, like the server's workers. `--rate-limit separate|folded` adds the per-user model request
limit: as its own Lua calls before and after the pair (what the gateway does today), or carried by the
pair itself (`reserve(limits=…)`, `settle(charges=…)`).
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import time
from typing import Any

import uvloop

from backend.redis import RedisBackend
from quota.backends.redis_quota import RedisQuotaStore
from quota.engine import QuotaEngine
from quota.ratelimit import ModelRateLimiter, UserPolicy
from quota.types import Account


class _NoSql:
    """Balances are preloaded into Redis, so the engine never asks SQL during the run."""

    async def durable(self, account: Account, account_id: int, partition: int) -> tuple[int, str, str] | None:
        raise AssertionError("the benchmark must not load from SQL")

    async def locked(self, account: Account, account_id: int, partition: int, load: object) -> int | None:
        raise AssertionError("the benchmark must not load from SQL")


POLICY = UserPolicy(60.0, 10**9, 10**9)  # the per-user model request limit on, never reached


async def one_run(engine: QuotaEngine, pairs: int, concurrency: int, users: int, rate_limit: str = "off",
                  limiter: ModelRateLimiter | None = None) -> tuple[float, list[float]]:
    latencies: list[float] = []
    per_task = pairs // concurrency
    log = {"type": 2, "model_name": "gemini-2.5-flash-preview-tts", "prompt_tokens": 10,
           "completion_tokens": 500, "request_id": "bench"}

    async def worker(n: int) -> None:
        uid = 1 + n % users
        who: dict[str, Any] = {"user_id": uid, "key_id": uid, "user_policy": POLICY}
        for _ in range(per_task):
            t0 = time.perf_counter()
            if rate_limit == "separate" and limiter is not None:  # as the gateway does today
                await limiter.admit(key_rpm=0, key_tpm=0, **who)
                r = await engine.reserve(uid, 3000, key_id=uid, key_limited=True)
                await engine.settle(r, 2503, channel_id=1, log=log)
                await limiter.record(key_tpm=0, tokens=510, success=True, **who)
            elif rate_limit == "folded":
                p = engine.partition(uid)
                limits = ModelRateLimiter.admission_limits(key_rpm=0, key_tpm=0, partition=p, **who)
                r = await engine.reserve(uid, 3000, key_id=uid, key_limited=True, limits=limits)
                await engine.settle(r, 2503, channel_id=1, log=log, charges=ModelRateLimiter.usage_charges(
                    key_tpm=0, tokens=510, success=True, partition=p, **who))
            else:
                r = await engine.reserve(uid, 3000, key_id=uid, key_limited=True)
                await engine.settle(r, 2503, channel_id=1, log=log)
            latencies.append(time.perf_counter() - t0)

    start = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return per_task * concurrency / (time.perf_counter() - start), latencies


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rate-limit", choices=("off", "separate", "folded"), default="off",
                        help="the per-user limit: off, its own Lua calls (admit, record), or carried by "
                             "reserve(limits=…) and settle(charges=…)")
    args = parser.parse_args()

    prefix = f"bench:{secrets.token_hex(3)}:"
    backend = RedisBackend(args.redis, prefix)
    store = RedisQuotaStore(backend)
    engine = QuotaEngine(store, _NoSql())
    try:
        for uid in range(1, args.users + 1):  # live balances, as after the first call of each account
            await store.load_locked("user", uid, 10**15, "0-0")
            await store.load_locked("key", uid, 10**15, "0-0", owner=uid)
        limiter = ModelRateLimiter(backend, engine.partition)
        await one_run(engine, 2_000, args.concurrency, args.users, args.rate_limit, limiter)  # warm up
        results = []
        for _ in range(args.runs):
            cpu = time.process_time()
            rate, lat = await one_run(engine, args.pairs, args.concurrency, args.users, args.rate_limit,
                                      limiter)
            cpu_us = (time.process_time() - cpu) * 1e6 / args.pairs
            lat.sort()
            results.append((rate, lat[len(lat) // 2] * 1000, lat[int(len(lat) * 0.99)] * 1000, cpu_us))
            await backend.client.delete(*store.streams)  # keep the streams from growing
        rate = statistics.median(r[0] for r in results)
        p50 = statistics.median(r[1] for r in results)
        p99 = statistics.median(r[2] for r in results)
        cpu_us = statistics.median(r[3] for r in results)
        print(f"reserve+settle pairs (rate limit {args.rate_limit}): {rate:,.0f}/s  p50 {p50:.3f} ms  "
              f"p99 {p99:.3f} ms  CPU {cpu_us:.0f} µs/pair "
              f"(concurrency {args.concurrency}, {args.pairs} pairs × {args.runs} runs, median)")
    finally:
        await drop(backend)


async def drop(backend: RedisBackend) -> None:
    """Delete what a run left under the backend's prefix, and close it."""
    keys = [k async for k in backend.client.scan_iter(match=f"{backend.prefix}*")]
    if keys:
        await backend.client.delete(*keys)
    await backend.close()


if __name__ == "__main__":
    uvloop.run(main())  # the event loop the server's workers run on (Sanic installs uvloop)
