"""What the operators' routes answer: the metrics scrape (behind `METRICS_TOKEN`, and `METRICS_ALLOW`'s
client addresses when it is set) and readiness.

The scrape's client address is the one the request pipeline decided (`Guard.identify`: the peer, or the
hop before the `TRUSTED_PROXIES`), never a header read here: behind a proxy that is not trusted, every
scrape comes from the proxy's address.

Readiness asks, each within `READY_TIMEOUT` seconds and all at once: the database answers and its schema is at
the head revision this code carries; Redis answers (embedded mode has none to ask); and the quota sync's
oldest waiting entry is younger than `READY_MAX_SYNC_LAG` seconds. Each check that fails is named. The checks
run in the background — the worker's task `readiness` (`watch`) begins a round `READY_INTERVAL` seconds after
the previous one ended — never for a request: `/readyz` answers from the last round without any I/O, so a
flood of it cannot crowd the database pool or Redis into the timeouts that once made healthy workers answer
503. A failure shows within `READY_INTERVAL + 2 × READY_TIMEOUT` (the round in progress may have missed it;
the next one names it). A worker runs its first round before it accepts a connection (`server/app.py`), so it
never answers from nothing (without a round the answer would be `starting`). A last round that began longer
ago than `stale_after` — twice the longest a working checker leaves between two results — is `stale`: the
checker is stuck or gone, and the node cannot vouch for itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from backend.base import Backend
from core.enums import CreditStatus
from models.credits import PendingCreditRepository
from models.db import Database
from models.migrate import current, head
from quota.engine import QuotaEngine
from quota.sync import QuotaSync
from server import metrics
from server.clock import Clock
from server.web.client_ip import Network, in_networks

log = logging.getLogger("tollway.observability")


class Check(StrEnum):
    """A readiness check, as `/readyz` names it when it fails."""

    DATABASE = "database"
    SCHEMA = "schema"
    REDIS = "redis"
    QUOTA_SYNC = "quota_sync"
    STARTING = "starting"  # no round has completed yet
    STALE = "stale"  # the last round began longer ago than `stale_after`: the checker is stuck or gone


@dataclass(frozen=True, slots=True)
class Round:
    """One round of the readiness checks: when it began (the clock's seconds) and what failed."""

    began: float
    failed: tuple[Check, ...]


class ObservabilityService:
    def __init__(self, *, db: Database, backend: Backend, sync: QuotaSync, quota: QuotaEngine, redis: bool,
                 token: str | None, allow: tuple[Network, ...], metrics_dir: Path | None, clock: Clock,
                 interval: float, timeout: float, max_sync_lag: float) -> None:
        self.db, self.backend, self.sync, self.quota, self.redis = db, backend, sync, quota, redis
        self.token, self.allow, self.metrics_dir = token, allow, metrics_dir
        self.clock, self.interval, self.timeout, self.max_sync_lag = clock, interval, timeout, max_sync_lag
        self.last: Round | None = None

    async def scrape(self, authorization: str | None, client_ip: str) -> bytes | None:
        """The metrics in the text format, or None when the caller may not read them: no token configured,
        none sent or a wrong one, or a client address outside `METRICS_ALLOW`. The figures of the whole
        deployment that no process counts as it goes (holds open in the store, the credit outbox) are read
        first, each within the readiness deadline; one that cannot be read keeps its last value."""
        admitted = not self.allow or in_networks(client_ip, self.allow)  # no METRICS_ALLOW: any address
        if not admitted or not metrics.authorized(self.token, authorization):
            return None
        await self._read_shared_figures()
        return metrics.exposition(self.metrics_dir)

    async def _read_shared_figures(self) -> None:
        try:
            metrics.holds_in_flight(await asyncio.wait_for(self.quota.holds_in_flight(), self.timeout))
        except Exception as exc:
            log.debug("metrics: could not read the open quota holds: %s", type(exc).__name__)
        try:
            async with asyncio.timeout(self.timeout), self.db.transaction() as tx:
                counts = await PendingCreditRepository(tx).counts()
        except Exception as exc:
            log.debug("metrics: could not count the credit outbox: %s", type(exc).__name__)
        else:
            metrics.outbox(counts[CreditStatus.PENDING], counts[CreditStatus.FAILED])

    # ---- readiness --------------------------------------------------------------------------------------

    @property
    def stale_after(self) -> float:
        """Seconds after which the last round no longer vouches for the node. A working checker begins a
        round at most `interval + timeout` after the previous one began (the round, then the pause) and
        finishes it within `timeout`: twice that, so that a loaded event loop is not taken for a stuck
        checker."""
        return 2 * (self.interval + 2 * self.timeout)

    def not_ready(self) -> list[Check]:
        """The checks that failed in the last round (none: ready), read without any I/O; `starting`
        before the first round, `stale` when the last one began longer ago than `stale_after`."""
        last = self.last
        if last is None:
            return [Check.STARTING]
        if self.clock.now() - last.began > self.stale_after:
            return [Check.STALE]
        return list(last.failed)

    async def check(self) -> Round:
        """Run one round of the checks, all at once, and keep it as the last unless a round that began
        later has already finished."""
        began = self.clock.now()
        done = Round(began, tuple(await self._failing()))
        if self.last is None or done.began >= self.last.began:
            self.last = done
        return done

    async def watch(self, stop: asyncio.Event) -> None:
        """A round `interval` seconds after the previous one ended, until `stop` is set (the worker's task
        `readiness`, started after the first round). It is stopped between rounds, never cancelled in
        one: a round runs database queries (CONVENTIONS rule 14)."""
        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)
            if stop.is_set():
                return
            try:
                await self.check()
            except Exception:  # no new round: the last one ages until it is `stale`
                log.exception("readiness: a round of checks failed; retrying")

    async def _within(self, pending: Awaitable[object]) -> bool:
        try:
            await asyncio.wait_for(pending, self.timeout)
        except Exception:
            return False
        return True

    async def _redis(self) -> Check | None:
        if not self.redis:  # embedded mode: no Redis to ask
            return None
        return None if await self._within(self.backend.ping()) else Check.REDIS

    async def _schema(self) -> Check | None:
        try:
            revision = await asyncio.wait_for(current(self.db.engine), self.timeout)
        except Exception:
            return Check.DATABASE
        return None if revision == head() else Check.SCHEMA

    async def _sync(self) -> Check | None:
        try:
            oldest = await asyncio.wait_for(self.sync.oldest_waiting(), self.timeout)
        except Exception:
            return Check.QUOTA_SYNC
        # the stream's entry ids are Redis's real time, not the service's (movable) clock
        if oldest is not None and time.time() - oldest / 1000 > self.max_sync_lag:
            return Check.QUOTA_SYNC
        return None

    async def _failing(self) -> list[Check]:
        """The checks that fail now, asked at once (a round takes one `timeout` at most)."""
        redis, schema, sync = await asyncio.gather(self._redis(), self._schema(), self._sync())
        failed = [found for found in (redis, schema) if found is not None]
        if sync is not None and redis is None and schema is not Check.DATABASE:  # needs both to be told
            failed.append(sync)
        return failed
