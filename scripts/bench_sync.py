"""What one quota sync batch costs the worker that runs it: CPU per entry and the longest loop stall.

    python -m scripts.bench_sync [--entries 1000] [--batch 2000] [--rounds 3] [--stores memory,redis]

For each store (the in-process one on SQLite, Redis on MariaDB) it settles `--entries` calls through the
real engine (each with a consume log shaped like the gateway's), then runs the sync until the stream is
empty, and reports: the wall time, the CPU time of the event-loop thread and of the whole process per
entry, and the longest stretch the event loop went without running anything else (measured by a task that
only yields, `await asyncio.sleep(0)`, and notes the longest gap between its turns). That longest stretch
is what a model call arriving during the sync may wait, once per point where it awaits.

Needs MariaDB and Redis on 127.0.0.1 for the `redis` store (a throw-away database and key prefix).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import secrets
import statistics
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvloop

from backend.redis import RedisBackend
from core.enums import LogType
from core.log_entry import LogEntry
from models.db import Database
from models.keys import ApiKey
from models.migrate import upgrade
from models.quota import SqlBalanceSource, SqlQuotaSink
from models.tables import User
from quota.backends.memory_quota import MemoryQuotaStore
from quota.backends.redis_quota import RedisQuotaStore
from quota.engine import QuotaEngine
from quota.store import QuotaStore
from quota.sync import QuotaSync


def consume_log(i: int) -> dict[str, Any]:
    """A consume log shaped like the one `server/relay/usage_log.py` `consume_log` builds."""
    return LogEntry(
        type=LogType.CONSUME, created_at=1_700_000_000 + i, username="bench", token_name="bench",
        model_name="omni-moderation-latest", prompt_tokens=12, completion_tokens=0, use_time=0,
        is_stream=False, group="default", request_id=secrets.token_hex(16), quota=12,
        content="omni-moderation-latest: 12 prompt + 0 completion tokens",
        other={"model_ratio": 1.0, "group_ratio": 1.0, "completion_ratio": 1.0, "model_price": -1,
               "channels_tried": [1], "audio_output_tokens": 0, "text_output_tokens": 0,
               "stream_interrupted": False, "is_model_mapped": False,
               "upstream_model_name": "omni-moderation-latest", "request_path": "/v1/moderations",
               "admin_info": {"use_channel": [1]}},
    ).to_log()


@dataclass
class Figures:
    wall_ms: float
    loop_cpu_us: float  # per entry, the event-loop thread
    process_cpu_us: float  # per entry, every thread (aiosqlite's included)
    longest_ms: float


def mariadb(sql: str) -> None:
    subprocess.run(["mariadb", "-uroot", "-h127.0.0.1", "-e", sql], check=True)


@contextlib.asynccontextmanager
async def stack(kind: str) -> AsyncIterator[tuple[Database, QuotaStore, RedisBackend | None]]:
    if kind == "memory":
        with tempfile.TemporaryDirectory() as tmp:
            db = Database(f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}")
            await upgrade(db.engine)
            try:
                yield db, MemoryQuotaStore(), None
            finally:
                await db.dispose()
        return
    name = f"tollway_syncbench_{secrets.token_hex(3)}"
    await asyncio.to_thread(mariadb, f"CREATE DATABASE {name}")
    backend = RedisBackend("redis://127.0.0.1:6379/0", f"syncbench:{secrets.token_hex(3)}:")
    db = Database(f"mysql+aiomysql://root@127.0.0.1:3306/{name}")
    try:
        await upgrade(db.engine)
        yield db, RedisQuotaStore(backend), backend
    finally:
        await db.dispose()
        purge = "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end"
        await backend.client.eval(purge, 0, backend.key("*"))
        await backend.close()
        await asyncio.to_thread(mariadb, f"DROP DATABASE {name}")


async def accounts(db: Database) -> tuple[int, int]:
    async with db.transaction() as tx:
        user = User(username=f"u{secrets.token_hex(4)}", password="x", display_name="", email="", role=1,
                    status=1, group="default", quota=10**15, used_quota=0, request_count=0, aff_count=0,
                    aff_quota=0, aff_history_quota=0, inviter_id=0, setting="", remark="",
                    stripe_customer="", created_at=0, last_login_at=0)
        tx.add(user)
        await tx.flush()
        key = ApiKey(user_id=user.id, name="k", key_digest=secrets.token_hex(32), key_encrypted="x", status=1,
                     created_time=0, accessed_time=0, expired_time=-1, remain_quota=10**15, used_quota=0,
                     unlimited_quota=False, model_limits_enabled=False, model_limits="", allow_ips="",
                     group="")
        tx.add(key)
        await tx.flush()
        return user.id, key.id


async def yielder(stop: asyncio.Event, gaps: list[float]) -> None:
    """Only yield to the loop, noting the longest time between two turns."""
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(0)
        now = time.perf_counter()
        gaps[0] = max(gaps[0], now - last)
        last = now


async def one_round(kind: str, entries: int, batch: int) -> tuple[Figures, Figures]:
    """(figures without the stall probe, figures with it)."""
    out: list[Figures] = []
    async with stack(kind) as (db, store, _):
        engine = QuotaEngine(store, SqlBalanceSource(db))
        user_id, key_id = await accounts(db)
        sync = QuotaSync(store, SqlQuotaSink(db, time.time), batch=batch)
        for probe in (False, True):
            for i in range(entries):
                held = await engine.reserve(user_id, 12, key_id=key_id, key_limited=True)
                await engine.settle(held, 12, channel_id=1, log=consume_log(i))
            gc.collect()
            gc.freeze()  # as the serving worker does once it has started (server/cli.py)
            gaps = [0.0]
            stop = asyncio.Event()
            task = asyncio.create_task(yielder(stop, gaps)) if probe else None
            wall, cpu, proc = time.perf_counter(), time.thread_time(), time.process_time()
            await sync.drain()
            wall, cpu, proc = (time.perf_counter() - wall, time.thread_time() - cpu,
                               time.process_time() - proc)
            stop.set()
            if task is not None:
                await task
            out.append(Figures(wall * 1000, cpu * 1e6 / entries, proc * 1e6 / entries, max(gaps) * 1000))
    return out[0], out[1]


async def main_async(args: argparse.Namespace) -> None:
    print("| store | entries | wall ms | loop CPU µs/entry | process CPU µs/entry | longest stall ms |")
    print("|---|---|---|---|---|---|")
    for kind in args.stores:
        plain, probed = [], []
        for _ in range(args.rounds):
            a, b = await one_round(kind, args.entries, args.batch)
            plain.append(a)
            probed.append(b)
        print(f"| {kind} | {args.entries} | {statistics.median(f.wall_ms for f in plain):.0f} | "
              f"{statistics.median(f.loop_cpu_us for f in plain):.1f} | "
              f"{statistics.median(f.process_cpu_us for f in plain):.1f} | "
              f"{statistics.median(f.longest_ms for f in probed):.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=2000, help="QUOTA_SYNC_BATCH")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stores", default="memory,redis")
    args = parser.parse_args()
    args.stores = args.stores.split(",")
    uvloop.run(main_async(args))


if __name__ == "__main__":
    main()
