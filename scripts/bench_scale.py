"""The capacity model: the three unit costs of a model call measured here, and what a target rate needs.

    python -m scripts.bench_scale [--duration 5] [--concurrency 16] [--entries 40000] [--target 20000]

Why: how many workers, Redis shards and `tollway quota-sync` processes a rate needs follows from three
unit costs, which this machine can measure even though it cannot reach the rate. On a private
`redis-server` (a free port, no persistence; stopped at the end), a throw-away MariaDB database and the
upstream of `scripts/bench.py` (nginx, or its Python stand-in):

1. the hot path: `tollway serve`, 1 worker pinned to CPU 0, the quota sync off, moderation calls from
   `wrk` (`scripts.bench.wrk`): worker CPU per call (its process tree, /proc) and Redis CPU per call
   (`INFO cpu` used_cpu_sys + used_cpu_user, `INFO commandstats` per command and `INFO stats`' reads
   from clients — round trips — before and after). Then a second run of the same load with Redis's
   `SLOWLOG` on (threshold 0 on the private server) gives each EVALSHA's time, grouped by the SHA of the
   script in `backend/lua/` or `quota/lua/`; the slow log costs Redis CPU of its own, so the headline
   figure is the first run's;
2. the sync: a backlog of `--entries` settled calls spread over 64 accounts (so over the partitions),
   queued through the real engine as `scripts/bench_sync.py` does, then drained by 1 and then by 2
   `tollway quota-sync` processes: sustained entries/s, the syncs' CPU per entry and Redis's CPU per entry
   (from when the first entry left the stream until it is empty; process start-up is left out). A process
   still pays something once, whatever it moves (not isolated; its warm-up), so the default backlog is
   large: with 10,000 entries two capped syncs measured 1.75–1.83 × one, with 40,000 2.05–2.54 ×. The syncs
   are started first and the backlog is queued once they share the partitions (while they are paused),
   so that no sync drains it alone before the others have their leases;
3. the same with each sync capped at `--share` of one core (a cgroup, scripts/cpu_share.py; skipped
   without a writable cgroup file system): the cap, not the two shared cores, limits each sync, so K
   processes against one shows how the sync scales (K × one while MariaDB and Redis keep up).

It prints the figures and the model: calls/s per worker core, per Redis shard, per sync process, and for
`--target` calls/s how many of each. One stream entry per call (a moderation call settles once).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import math
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import redis
import uvloop

from backend import lua as shared_lua
from backend.redis import RedisBackend
from models.db import Database
from models.quota import SqlBalanceSource
from quota import lua
from quota.backends.redis_quota import RedisQuotaStore
from quota.engine import QuotaEngine
from quota.partitions import DEFAULT_PARTITIONS, tag
from scripts.bench import wrk
from scripts.bench_env import (
    SCENARIOS,
    Proc,
    cpu_used,
    free_port,
    mariadb,
    mariadb_database,
    pinned,
    prepare_tollway,
    spawn,
    start_nginx,
    start_python_upstream,
    tollway_env,
    upstream_locations,
    wait_for,
)
from scripts.bench_sync import accounts, consume_log
from scripts.cpu_share import CpuShare

ACCOUNTS = 64  # accounts the sync backlog is spread over (16 partitions by default)
SYNC_ENV = {
    "QUOTA_SYNC_LEASE_TIMEOUT": "600",  # the leases outlive the syncs' pause while the backlog is queued
    "QUOTA_SYNC_INTERVAL": "0.05",  # continued, each sync passes within 50 ms
}


def script_names() -> dict[str, str]:
    """SHA → name of every script in backend/lua/ and quota/lua/, alone and after the gcra prelude (as the
    store loads it)."""
    names: dict[str, str] = {}
    folders = (Path(shared_lua.__file__).parent, Path(lua.__file__).parent)
    for path in sorted(path for folder in folders for path in folder.glob("*.lua")):
        for preludes in ((), ("gcra",)):
            source = lua.load(path.stem, *preludes)
            names[hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()] = path.stem
    return names


@dataclass(frozen=True)
class RedisStats:
    cpu_s: float
    commands: dict[str, tuple[int, int]]  # command → (calls, µs)
    reads: int  # reads from clients' connections (each a pass of Redis's event loop over a client)

    @staticmethod
    def read(r: redis.Redis) -> RedisStats:
        cpu = r.info("cpu")
        stats = r.info("commandstats")
        return RedisStats(float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]),
                          {k.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
                           for k, v in stats.items()},
                          int(r.info("stats")["total_reads_processed"]))

    def since(self, before: RedisStats) -> tuple[float, dict[str, tuple[int, int]]]:
        zero = (0, 0)
        delta = {name: (calls - before.commands.get(name, zero)[0], usec - before.commands.get(name, zero)[1])
                 for name, (calls, usec) in self.commands.items()}
        return self.cpu_s - before.cpu_s, {k: v for k, v in delta.items() if v[0] > 0}


def per_script(r: redis.Redis) -> dict[str, tuple[int, int]]:
    """(calls, µs) per EVALSHA script from the slow log (every command logged: threshold 0)."""
    names = script_names()
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for entry in r.slowlog_get(10**6):
        words = entry["command"].split()
        if words and words[0].upper() == b"EVALSHA" and len(words) > 1:
            cell = out[names.get(words[1].decode(), words[1].decode()[:8])]
            cell[0] += 1
            cell[1] += int(entry["duration"])
    return {k: (v[0], v[1]) for k, v in out.items()}


async def fill(redis_url: str, prefix: str, db_url: str, entries: int) -> None:
    """Queue `entries` settled calls over ACCOUNTS accounts through the real engine (each with a consume
    log shaped like the gateway's)."""
    backend = RedisBackend(redis_url, prefix)
    db = Database(db_url)
    try:
        store = RedisQuotaStore(backend)
        engine = QuotaEngine(store, SqlBalanceSource(db))
        pairs = [await accounts(db) for _ in range(ACCOUNTS)]

        async def one(n: int) -> None:
            for i in range(n, entries, 16):
                user_id, key_id = pairs[i % ACCOUNTS]
                held = await engine.reserve(user_id, 12, key_id=key_id, key_limited=True)
                await engine.settle(held, 12, channel_id=1, log=consume_log(i))

        await asyncio.gather(*(one(n) for n in range(16)))
    finally:
        await db.dispose()
        await backend.close()


def pending(r: redis.Redis, prefix: str) -> int:
    """Entries not yet synced: each partition's stream keeps its last synced entry (`synced.lua` trims
    up to the cursor, inclusive of it), which is not counted."""
    streams = [f"{prefix}q:{tag(p)}:stream" for p in range(DEFAULT_PARTITIONS)]  # no SCAN while polling
    with r.pipeline(transaction=False) as pipe:
        for stream in streams:
            pipe.xlen(stream)
            pipe.get(stream.removesuffix("stream") + "cursor")
        got = pipe.execute()
    left = 0
    for stream, length, cursor in zip(streams, got[::2], got[1::2], strict=True):
        left += int(length) - (1 if cursor and r.xrange(stream, cursor, cursor) else 0)
    return left


@dataclass(frozen=True)
class Drain:
    entries: int
    seconds: float
    sync_cpu_s: float
    redis_cpu_s: float
    throttled: int  # CFS periods in which a capped sync was held back (0 when uncapped)


def lease_holders(r: redis.Redis, prefix: str) -> list[bytes | None]:
    """Who holds each partition's lease (quota/leases.py), by partition."""
    return cast(list[bytes | None], r.mget([f"{prefix}q:{tag(p)}:lease" for p in range(DEFAULT_PARTITIONS)]))


def signal_all(procs: list[Proc], sig: signal.Signals) -> None:
    for p in procs:
        os.kill(p.popen.pid, sig)


def drain(r: redis.Redis, prefix: str, syncs: int, env: dict[str, str], workdir: Path, *,
          backlog: Callable[[], None] | None = None, share: float | None = None) -> Drain:
    """Start `syncs` quota-sync processes on the backlog and time it from its first drop to empty.

    `backlog`: queue it only once the syncs share the partitions evenly — a sync that started alone
    would otherwise claim every partition and drain the whole backlog in its first pass. The syncs are
    stopped (SIGSTOP; their leases outlive the pause) while it fills and continued together. `share`:
    each sync is capped at that fraction of one core (scripts/cpu_share.py)."""
    start = pending(r, prefix)
    procs: list[Proc] = [spawn(f"sync-{syncs}-{i}", [sys.executable, "-m", "server.cli", "quota-sync"],
                               workdir, env) for i in range(syncs)]
    shares = [CpuShare(f"sync-{i}", share) for i in range(syncs)] if share is not None else []
    try:
        for group, p in zip(shares, procs, strict=False):
            group.add(p.popen.pid)
        deadline = time.monotonic() + 300
        if backlog is not None:
            while len(set(held := lease_holders(r, prefix))) != syncs or None in held:
                if time.monotonic() > deadline or any(p.popen.poll() is not None for p in procs):
                    raise RuntimeError(f"the syncs did not share the partitions: see {workdir}")
                time.sleep(0.05)
            signal_all(procs, signal.SIGSTOP)
            backlog()
            start = pending(r, prefix)
            signal_all(procs, signal.SIGCONT)
            deadline = time.monotonic() + 300
        while (left := pending(r, prefix)) >= start:
            if time.monotonic() > deadline or any(p.popen.poll() is not None for p in procs):
                raise RuntimeError(f"the sync did not start: see {workdir}")
            time.sleep(0.01)
        t0, cpu0, redis0 = time.perf_counter(), [p.cpu_seconds() for p in procs], RedisStats.read(r)
        throttled0 = sum(g.throttled() for g in shares)
        first = left
        while (left := pending(r, prefix)) > 0:
            if time.monotonic() > deadline or any(p.popen.poll() is not None for p in procs):
                raise RuntimeError(f"the sync did not finish: {left} entries left; see {workdir}")
            time.sleep(0.01)
        seconds = time.perf_counter() - t0
        cpu = sum(cpu_used(b, p.cpu_seconds()) for b, p in zip(cpu0, procs, strict=True))
        redis_cpu, _ = RedisStats.read(r).since(redis0)
        return Drain(first, seconds, cpu, redis_cpu, sum(g.throttled() for g in shares) - throttled0)
    finally:
        for p in procs:
            p.stop()
        for group in shares:
            group.close()


def model(args: argparse.Namespace, worker_us: float, redis_us: float, sync_us: float,
          sync_rates: dict[int, float], capped: dict[int, float]) -> list[str]:
    rows = [("worker core", 1e6 / worker_us), ("Redis shard", 1e6 / redis_us),
            ("sync process (a full core)", 1e6 / sync_us)]
    lines = [f"capacity model (target {args.target:,} calls/s):"]
    lines += [f"  per {name}: {rate:,.0f} calls/s -> {math.ceil(args.target / rate)} needed"
              for name, rate in rows]
    lines.append("  sync measured here (cores shared with Redis and MariaDB): " + ", ".join(
        f"{k} process{'es' if k > 1 else ''} {rate:,.0f} entries/s" for k, rate in sync_rates.items()))
    if capped:
        lines.append(f"  sync, each process capped at {args.share:.0%} of a core: " + ", ".join(
            f"{k} × {rate / k:,.0f} = {rate:,.0f} entries/s" for k, rate in capped.items()))
    return lines


def run(args: argparse.Namespace, workdir: Path) -> None:
    procs: list[Proc] = []
    db_name = ""
    try:
        up_port = free_port()
        procs.append(start_nginx(workdir, up_port, upstream_locations(), "1") if shutil.which("nginx")
                     else start_python_upstream(workdir, up_port))
        redis_port = free_port()
        procs.append(spawn("redis", ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                                     "--save", "", "--appendonly", "no", "--dir", str(workdir)], workdir))
        r = redis.Redis(port=redis_port)
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(redis.ConnectionError):
                r.ping()
                break
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)
        db_name, db_url = mariadb_database()
        redis_url, prefix, port = f"redis://127.0.0.1:{redis_port}/0", f"scale:{secrets.token_hex(3)}:", \
            free_port()
        env = tollway_env(workdir, port, {
            "DATABASE_URL": db_url, "REDIS_URL": redis_url, "REDIS_KEY_PREFIX": prefix,
            "SECRET_KEY": secrets.token_hex(32), "QUOTA_SYNC_IN_SERVER": "false"})
        serve = spawn("serve", pinned("0", [sys.executable, "-m", "server.cli", "serve", "--workers", "1"]),
                      workdir, env)
        procs.append(serve)
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/api/status")
        key = prepare_tollway(base, f"http://127.0.0.1:{up_port}")
        path, body = SCENARIOS["moderation"]
        wrk(base + path, key, body, 4, 1, workdir)  # warm-up: caches, pools, the loaded balance

        # 1 + 2: the hot path, measured without the slow log (it costs Redis CPU of its own), then again
        # with it for the split per script
        cpu0, redis0 = serve.cpu_seconds(), RedisStats.read(r)
        result = wrk(base + path, key, body, args.concurrency, args.duration, workdir)
        worker_cpu = cpu_used(cpu0, serve.cpu_seconds())
        redis_cpu, commands = RedisStats.read(r).since(redis0)
        reads = RedisStats.read(r).reads - redis0.reads
        r.config_set("slowlog-max-len", 1_000_000)
        r.config_set("slowlog-log-slower-than", 0)
        r.slowlog_reset()
        logged0 = RedisStats.read(r)
        logged = wrk(base + path, key, body, args.concurrency, args.duration, workdir)
        logged_cpu, _ = RedisStats.read(r).since(logged0)
        scripts = per_script(r)
        r.config_set("slowlog-log-slower-than", 10_000)
        r.slowlog_reset()
        calls, logged_calls = max(1, result.calls), max(1, logged.calls)
        print(f"hot path: {result.calls:,} moderation calls in {args.duration:g} s at concurrency "
              f"{args.concurrency} ({result.rps:,.0f}/s, {result.errors} errors), 1 worker on CPU 0")
        print(f"  worker CPU: {1e6 * worker_cpu / calls:.0f} µs/call")
        print(f"  Redis CPU (INFO cpu): {1e6 * redis_cpu / calls:.1f} µs/call; {reads / calls:.2f} reads "
              f"from clients per call (INFO stats total_reads_processed: round trips, any client)")
        print("  INFO commandstats (command: calls per model call, µs per command call, µs per model call): "
              + "; ".join(f"{name} {n / calls:.2f}, {us / n:.1f}, {us / calls:.1f}"
                          for name, (n, us) in sorted(commands.items(), key=lambda kv: -kv[1][1])))
        print(f"  with SLOWLOG on (a second run, {logged.calls:,} calls, {logged.rps:,.0f}/s): Redis CPU "
              f"{1e6 * logged_cpu / logged_calls:.1f} µs/call; EVALSHA per script (calls per model call, "
              "µs per script call): "
              + "; ".join(f"{name} {n / logged_calls:.2f}, {us / n:.1f}"
                          for name, (n, us) in sorted(scripts.items(), key=lambda kv: -kv[1][1])))

        # 3: the sync, with 1 then 2 processes
        first = drain(r, prefix, 1, env, workdir)  # the hot path's backlog (one account: one partition)
        print(f"sync of the hot path's backlog (one account, so one partition): {first.entries:,} entries, "
              f"{first.entries / first.seconds:,.0f}/s, {1e6 * first.sync_cpu_s / first.entries:.0f} µs "
              f"sync CPU/entry")
        aio_url = db_url.replace("mysql://", "mysql+aiomysql://", 1)

        def backlog() -> None:
            uvloop.run(fill(redis_url, prefix, aio_url, args.entries))

        sync_env = env | SYNC_ENV
        rates: dict[int, float] = {}
        sync_us: list[float] = []
        redis_sync_us: list[float] = []
        for syncs in (1, 2):
            d = drain(r, prefix, syncs, sync_env, workdir, backlog=backlog)
            rates[syncs] = d.entries / d.seconds
            sync_us.append(1e6 * d.sync_cpu_s / d.entries)
            redis_sync_us.append(1e6 * d.redis_cpu_s / d.entries)
            print(f"sync, {syncs} process{'es' if syncs > 1 else ''}, {ACCOUNTS} accounts: {d.entries:,} "
                  f"entries in {d.seconds:.2f} s = {rates[syncs]:,.0f} entries/s; sync CPU "
                  f"{sync_us[-1]:.0f} µs/entry; Redis CPU {redis_sync_us[-1]:.1f} µs/entry")
        capped: dict[int, float] = {}
        if CpuShare.available():
            for syncs in (1, 2):
                d = drain(r, prefix, syncs, sync_env, workdir, backlog=backlog, share=args.share)
                capped[syncs] = d.entries / d.seconds
                print(f"sync, {syncs} process{'es' if syncs > 1 else ''} each capped at {args.share:.0%} "
                      f"of a core: {d.entries:,} entries in {d.seconds:.2f} s = {capped[syncs]:,.0f} "
                      f"entries/s ({capped[syncs] / capped[1]:.2f} × one capped process); sync CPU "
                      f"{1e6 * d.sync_cpu_s / d.entries:.0f} µs/entry; throttled in {d.throttled} periods")
        else:
            print("sync with a capped CPU share: skipped (no writable cgroup file system here)")
        redis_us = 1e6 * redis_cpu / calls + min(redis_sync_us)
        print(f"per call: worker {1e6 * worker_cpu / calls:.0f} µs, Redis {redis_us:.1f} µs (hot path + the "
              f"sync's share), sync {min(sync_us):.0f} µs")
        print("\n".join(model(args, 1e6 * worker_cpu / calls, redis_us, min(sync_us), rates, capped)))
    finally:
        for proc in reversed(procs):
            proc.stop()
        if db_name:
            mariadb(f"DROP DATABASE IF EXISTS {db_name}", check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds of load on the hot path")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--entries", type=int, default=40_000,
                        help="backlog drained by 1 and by 2 syncs (large: each process pays something once)")
    parser.add_argument("--target", type=int, default=20_000, help="calls/s the model sizes for")
    parser.add_argument("--share", type=float, default=0.1,
                        help="the fraction of a core each sync is capped at in the capped runs")
    args = parser.parse_args()
    if shutil.which("wrk") is None or shutil.which("redis-server") is None:
        sys.exit("bench_scale: wrk and redis-server are needed (Debian: apt-get install wrk redis-server)")
    workdir = Path(tempfile.mkdtemp(prefix="tollway-scale-"))
    run(args, workdir)  # a failure keeps the directory: the processes' logs are what tells why
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
