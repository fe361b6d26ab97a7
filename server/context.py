"""What one worker holds: database, Redis or in-process backend, session store, caches, options, clock.

`State.open(config)` builds it inside the worker (one Redis pool and one engine per worker);
`State.close()` releases it: this is the one place that opens and closes the worker's resources.
Background tasks are named, owned here, and drained on shutdown. Services never see `State`:
`server/container.py` hands each the components it uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from backend.base import Backend, KeyValue
from backend.broadcasts import Broadcasts
from backend.memory import MemoryBackend
from backend.versions import RECORDS, VersionTracker
from models.db import Database
from models.deployment import deployment_id
from models.kv import SqlKeyValue
from models.quota import SqlBalanceSource, SqlQuotaSink
from models.sessions import SessionRepository
from quota.backends.memory_quota import MemoryQuotaStore
from quota.backends.redis_quota import RedisQuotaStore
from quota.engine import QuotaEngine
from quota.leases import PartitionLeases
from quota.store import QuotaStore, SetupRefused
from quota.sync import QuotaSync, sweep_forever
from server import metrics
from server.clock import Clock
from server.components.channel_table import ChannelTable
from server.components.keys import KeyDirectory
from server.components.options import Options
from server.components.sessions import RedisSessionStore, SessionStore, SqlSessionStore
from server.components.users import UserDirectory
from server.config import Config, ConfigError
from server.credits import CreditOutbox
from server.crypto import Passwords, SecretBox
from server.logs.error_logs import ErrorLogs
from server.logs.outbox import LogOutboxMover
from server.redis_client import redis_backend
from server.upstream.client import Upstream

log = logging.getLogger("tollway")

POOL_SAMPLE_INTERVAL = 5.0  # seconds between two samples of a worker's database pool (and at each scrape)


class Tasks:
    """Named background tasks owned by the worker. `drain` first asks the tasks that have a graceful
    `stop` to finish their current step, and lets the adopted ones (settlements) end, for up to `grace`
    seconds; then it cancels and awaits the rest."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        self._stoppers: dict[str, Callable[[], None]] = {}
        self._adopted: set[str] = set()

    def start(self, name: str, coro: Coroutine[Any, Any, Any], *, stop: Callable[[], None] | None = None
              ) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks[name] = task
        if stop is not None:
            self._stoppers[name] = stop
        task.add_done_callback(lambda t: self._done(name, t))

    def _done(self, name: str, task: asyncio.Task[Any]) -> None:
        self._tasks.pop(name, None)
        self._stoppers.pop(name, None)
        self._adopted.discard(name)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s failed", name, exc_info=task.exception())

    def adopt(self, task: asyncio.Task[Any]) -> None:
        """Own a short task started elsewhere that must run to its end (e.g. a settlement that must
        outlive its request): `drain` waits for it before cancelling anything."""
        name = f"{task.get_name()}#{id(task)}"
        self._tasks[name] = task
        self._adopted.add(name)
        task.add_done_callback(lambda t: self._done(name, t))

    @property
    def names(self) -> list[str]:
        return sorted(self._tasks)

    async def drain(self, grace: float = 10.0) -> None:
        waited = [self._tasks[n] for n in (*self._stoppers, *self._adopted) if n in self._tasks]
        for stop in self._stoppers.values():
            stop()
        if waited:
            await asyncio.wait(waited, timeout=grace)
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            # a client library that swallows a cancellation must not hang the shutdown
            _, stuck = await asyncio.wait(tasks, timeout=3.0)
            for task in stuck:
                log.warning("background task %s did not stop; abandoning it", task.get_name())


@dataclass
class State:
    config: Config
    clock: Clock
    db: Database
    backend: Backend
    sessions: SessionStore
    kv: KeyValue  # account security's short-lived keys: the backend with Redis, else SQL (models/kv.py)
    box: SecretBox
    passwords: Passwords
    options: Options
    users: UserDirectory
    keys: KeyDirectory
    quota: QuotaEngine
    quota_sync: QuotaSync
    channels: ChannelTable
    upstream: Upstream
    versions: VersionTracker
    credits: CreditOutbox
    started_at: int
    log_db: Database  # the database of the `logs` table: `db` itself unless LOG_DATABASE_URL names another
    error_logs: ErrorLogs  # failed model calls' logs, written to `log_db` by the task `error-logs`
    log_outbox: LogOutboxMover | None = None  # with a separate log database: moves the services' logs
    tasks: Tasks = field(default_factory=Tasks)

    @classmethod
    async def open(cls, config: Config, clock: Clock | None = None) -> State:
        clock = clock or Clock()
        logs_url = config.separate_logs_url
        db = Database(config.database_url, logs_elsewhere=logs_url is not None, on_error=metrics.db_error)
        log_db = Database(logs_url, on_error=metrics.db_error) if logs_url else db
        backend: Backend
        sessions: SessionStore
        kv: KeyValue
        store: QuotaStore
        leases: PartitionLeases | None = None  # embedded: one partition, one sync
        redis = redis_backend(config, on_error=metrics.redis_error)
        if redis is not None:
            backend, sessions, kv = redis, RedisSessionStore(redis), redis
            store = RedisQuotaStore(redis, marker_ttl=int(max(3600, 2 * config.quota_hold_timeout)))
            leases = PartitionLeases(redis, lease_seconds=config.quota_lease_seconds)
        else:
            memory = MemoryBackend()
            backend, sessions, kv = memory, SqlSessionStore(db, clock), SqlKeyValue(db)
            store = MemoryQuotaStore(versions=memory.versions_now, limiter=memory,
                                     marker_ms=int(config.quota_hold_timeout * 1000))
        box = SecretBox(config.secret_key)
        versions = VersionTracker(backend, on_reload=metrics.cache_reload)
        quota = QuotaEngine(store, SqlBalanceSource(db), lease_seconds=config.quota_hold_timeout,
                            observer=metrics.QUOTA)
        options = Options(db, box, versions)
        state = cls(
            config=config, clock=clock, db=db, backend=backend, sessions=sessions, kv=kv, box=box,
            passwords=Passwords(*config.faults.password_cost) if config.faults.password_cost else Passwords(),
            options=options,
            users=UserDirectory(db, backend, config.user_cache_seconds),
            keys=KeyDirectory(db, backend, box, clock, ttl=config.user_cache_seconds),
            quota=quota,
            quota_sync=QuotaSync(store, SqlQuotaSink(db, clock.now,
                                                     export=lambda: options.settings.data_export_enabled,
                                                     logs=log_db if logs_url else None,
                                                     on_logs_committed=config.faults.after_log_commit()),
                                 interval=config.quota_sync_interval, batch=config.quota_sync_batch,
                                 progress=metrics.sync_progress, leases=leases),
            channels=ChannelTable(db, box, clock.now_s, versions),
            upstream=Upstream(config.upstream_timeout, transport=config.upstream_transport,
                              allow_private=config.upstream_allow_private),
            versions=versions, started_at=clock.now_s(),
            credits=CreditOutbox(db=db, quota=quota, clock=clock,
                                 on_committed=config.faults.after_credit_commit()),
            log_db=log_db, log_outbox=LogOutboxMover(db, log_db) if logs_url else None,
            error_logs=ErrorLogs(log_db, clock),
        )
        versions.register(RECORDS, state._forget_records)
        broadcasts = Broadcasts(backend)  # each component registers the messages it owns
        versions.listen(broadcasts)
        state.users.listen(broadcasts)
        state.keys.listen(broadcasts)
        try:  # refuses another deployment's store, another QUOTA_PARTITIONS, a Redis too old or of the
            # other kind than its setting says
            await store.setup(await deployment_id(db, clock.now_s()))
        except SetupRefused as exc:
            raise ConfigError(str(exc)) from None
        await versions.start()
        state.tasks.start("invalidation-listener", broadcasts.listen())
        if config.quota_sync_in_server or config.embedded:  # embedded: the stream lives in this process
            state.tasks.start("quota-sync", state.quota_sync.run_forever(), stop=state.quota_sync.stop)
        sweeper_stop = asyncio.Event()
        if config.embedded:
            purge_stop = asyncio.Event()
            state.tasks.start("session-purge", state._purge_sessions(purge_stop), stop=purge_stop.set)
        state.tasks.start("quota-sweeper",
                          sweep_forever(quota.sweep, min(5.0, config.quota_hold_timeout / 4), sweeper_stop),
                          stop=sweeper_stop.set)
        keys_stop = asyncio.Event()
        state.tasks.start("key-access-flush", state.keys.flush_forever(keys_stop), stop=keys_stop.set)
        credits_stop = asyncio.Event()  # credits a crashed process recorded but never delivered
        state.tasks.start("credit-replay", state.credits.run_forever(credits_stop), stop=credits_stop.set)
        pool_stop = asyncio.Event()
        state.tasks.start("pool-gauges", state._sample_pools(pool_stop), stop=pool_stop.set)
        flush_stop = asyncio.Event()
        state.tasks.start("metrics-flush", _flush_metrics(flush_stop), stop=flush_stop.set)
        errors_stop = asyncio.Event()
        state.tasks.start("error-logs", state.error_logs.run_forever(errors_stop), stop=errors_stop.set)
        if state.log_outbox is not None:
            outbox_stop = asyncio.Event()
            state.tasks.start("log-outbox", state.log_outbox.run_forever(outbox_stop), stop=outbox_stop.set)
        return state

    async def _forget_records(self) -> None:
        self.users.forget_all()
        self.keys.forget_all()

    def sample_pools(self) -> None:
        """Set this process's database pool gauges (the main and the log database's pools, summed)."""
        in_use, idle = self.db.connections()
        if self.log_db is not self.db:
            more_in_use, more_idle = self.log_db.connections()
            in_use, idle = in_use + more_in_use, idle + more_idle
        metrics.db_pool(in_use, idle)

    async def _sample_pools(self, stop: asyncio.Event, every: float = POOL_SAMPLE_INTERVAL) -> None:
        while not stop.is_set():
            self.sample_pools()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), every)

    async def _purge_sessions(self, stop: asyncio.Event, every: float = 3600.0) -> None:
        """Delete expired SQL sessions and short-lived keys (Redis expires its own)."""
        while not stop.is_set():
            try:
                async with self.db.transaction() as tx:
                    removed = await SessionRepository(tx).purge_expired(self.clock.now_s())
                if removed:
                    log.info("purged %d expired sessions", removed)
                if isinstance(self.kv, SqlKeyValue):
                    await self.kv.purge_expired()
            except Exception:
                log.exception("session purge failed; retrying later")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), every)

    async def close(self) -> None:
        await self.tasks.drain()
        if self.config.quota_sync_in_server or self.config.embedded:
            try:  # flush settled usage before the process goes away
                await self.quota_sync.drain()
            except Exception:
                log.exception("final quota sync failed; the entries stay queued in Redis")
        try:
            await self.error_logs.flush()
        except Exception:
            log.exception("writing the last error logs failed; they are lost")
        if self.log_outbox is not None:
            try:
                await self.log_outbox.drain()
            except Exception:
                log.exception("moving the last service logs failed; they stay in the outbox")
        await self.upstream.aclose()
        await self.backend.close()
        await self.db.dispose()
        if self.log_db is not self.db:
            await self.log_db.dispose()


async def _flush_metrics(stop: asyncio.Event) -> None:
    """Write the model-call path's buffered counts to the metrics every `FLUSH_INTERVAL` seconds, and once
    more when the worker stops (server/metrics/tally.py)."""
    try:
        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), metrics.FLUSH_INTERVAL)
            metrics.flush()
    finally:
        metrics.flush()
