"""The quota sync as its own process: `tollway quota-sync` (or `python -m scripts.quota_sync`).

Moves settled usage and balance adjustments from Redis into SQL every QUOTA_SYNC_INTERVAL seconds, exactly
once, alongside (or instead of, with QUOTA_SYNC_IN_SERVER=false) the sync inside `tollway serve`. Several
may run at once, on any nodes: they share the quota partitions by leases (quota/leases.py), so they sync
in parallel. SIGTERM/SIGINT give the leases back, drain what is queued and exit. With Redis, `tollway
serve` starts one itself (`QUOTA_SYNC_PROCESS`, server/supervise.py `Helper`); that one also exits once
the server's main process is gone (`TOLLWAY_PARENT_PID`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

from backend.base import BackendUnavailable
from models.db import Database, DatabaseUnavailable
from models.deployment import deployment_id
from models.quota import SqlQuotaSink
from quota.backends.redis_quota import RedisQuotaStore
from quota.leases import PartitionLeases
from quota.store import SetupRefused
from quota.sync import QuotaSync
from server import metrics
from server.clock import Clock
from server.config import Config, ConfigError, load
from server.logging_setup import announce, configure
from server.redis_client import redis_backend

log = logging.getLogger("tollway.quota_sync")

BESIDE_WORKERS_NICE = 5
"""The niceness the sync takes beside `tollway serve`'s workers: under full load the kernel gives it about a
third of a busy worker's share (enough to keep up: docs/PERFORMANCE.md#figures-behind-the-code), and its
batches no longer preempt a worker's calls on a shared core."""


async def run(config: Config, *, once: bool = False) -> None:
    backend = redis_backend(config, on_error=metrics.redis_error)
    if backend is None:
        raise ConfigError("REDIS_URL: the separate sync worker needs Redis (embedded mode syncs in-process)")
    logs_url = config.separate_logs_url
    db = Database(config.database_url, pool_size=2, logs_elsewhere=logs_url is not None,
                  on_error=metrics.db_error)
    log_db = Database(logs_url, pool_size=2, on_error=metrics.db_error) if logs_url else None
    sink = SqlQuotaSink(db, Clock().now, logs=log_db, alone=True,
                        on_logs_committed=config.faults.after_log_commit())
    store = RedisQuotaStore(backend)
    leases = PartitionLeases(backend, lease_seconds=config.quota_lease_seconds)
    sync = QuotaSync(store, sink, interval=config.quota_sync_interval,
                     batch=config.quota_sync_batch, progress=metrics.sync_progress, leases=leases)
    try:
        await db.check()
        if log_db is not None:
            await log_db.check()
        deployment = await deployment_id(db, Clock().now_s())
        try:  # reaches Redis, and refuses a store this process must not sync (another deployment's, …)
            await store.setup(deployment)
        except BackendUnavailable:
            raise ConfigError(f"{config.redis_setting}: cannot connect to Redis (is it running?)") from None
        except SetupRefused as exc:
            raise ConfigError(str(exc)) from None
        if once:
            await sync.drain()
            return
        task = asyncio.create_task(sync.run_forever(), name="quota-sync")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        parent = os.environ.get("TOLLWAY_PARENT_PID", "")
        watch = None
        if parent.isdigit():  # started by `tollway serve`: yield the cores to its workers when they need them
            os.nice(BESIDE_WORKERS_NICE)
            watch = asyncio.create_task(_orphaned(int(parent), stop))
        log.info("quota sync running every %.2fs", config.quota_sync_interval)
        await stop.wait()
        if watch is not None:
            watch.cancel()
        sync.stop()  # finish the batch in progress; never cancel a transaction mid-flight
        await task
        await sync.drain()
    finally:
        await backend.close()
        await db.dispose()
        if log_db is not None:
            await log_db.dispose()


async def _orphaned(parent: int, stop: asyncio.Event, every: float = 1.0) -> None:
    """Stop once the process that started this one is gone (its children are re-parented)."""
    while os.getppid() == parent:
        try:
            await asyncio.wait_for(stop.wait(), every)
            return
        except TimeoutError:
            continue
    log.warning("the server process %d is gone; the quota sync stops", parent)
    stop.set()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    try:
        config = load()
    except ConfigError as exc:
        announce(exc.log_format, f"tollway quota-sync: {exc}", error=True)
        raise SystemExit(2) from None
    configure(config.log_level, config.log_format)  # LOG_FORMAT=json: JSON lines here too
    try:
        asyncio.run(run(config, once="--once" in args))
    except (ConfigError, DatabaseUnavailable) as exc:
        announce(config.log_format, f"tollway quota-sync: {exc}", error=True)
        raise SystemExit(2) from None

