"""What the operators' routes answer: the metrics scrape (behind `METRICS_TOKEN`, and `METRICS_ALLOW`'s
client addresses when it is set) and readiness.

The scrape's client address is the one the request pipeline decided (`Guard.identify`: the peer, or the
hop before the `TRUSTED_PROXIES`), never a header read here: behind a proxy that is not trusted, every
scrape comes from the proxy's address.

Readiness asks, each within `READY_TIMEOUT` seconds: the database answers and its schema is at the head
revision this code carries; Redis answers (embedded mode has none to ask); and the quota sync's oldest
waiting entry is younger than `READY_MAX_SYNC_LAG` seconds. Each check that fails is named.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from enum import StrEnum
from pathlib import Path

from core.enums import CreditStatus
from models.credits import PendingCreditRepository
from models.db import Database
from models.migrate import current, head
from quota.backends.base import Backend
from quota.engine import QuotaEngine
from quota.sync import QuotaSync
from server import metrics
from server.web.client_ip import Network, in_networks

log = logging.getLogger("tollway.observability")


class Check(StrEnum):
    """A readiness check, as `/readyz` names it when it fails."""

    DATABASE = "database"
    SCHEMA = "schema"
    REDIS = "redis"
    QUOTA_SYNC = "quota_sync"


class ObservabilityService:
    def __init__(self, *, db: Database, backend: Backend, sync: QuotaSync, quota: QuotaEngine, redis: bool,
                 token: str | None, allow: tuple[Network, ...], metrics_dir: Path | None, timeout: float,
                 max_sync_lag: float) -> None:
        self.db, self.backend, self.sync, self.quota, self.redis = db, backend, sync, quota, redis
        self.token, self.allow, self.metrics_dir = token, allow, metrics_dir
        self.timeout, self.max_sync_lag = timeout, max_sync_lag

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

    async def _within(self, pending: Awaitable[object]) -> bool:
        try:
            await asyncio.wait_for(pending, self.timeout)
        except Exception:
            return False
        return True

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
        if oldest is not None and time.time() - oldest / 1000 > self.max_sync_lag:
            return Check.QUOTA_SYNC
        return None

    async def not_ready(self) -> list[Check]:
        """The checks that fail (none: ready), asked at once."""
        failed: list[Check] = []
        redis_ok = True
        if self.redis:
            redis_ok = await self._within(self.backend.ping())
            if not redis_ok:
                failed.append(Check.REDIS)
        schema = await self._schema()
        if schema is not None:
            failed.append(schema)
        if redis_ok and schema is not Check.DATABASE:  # the sync check needs both
            sync = await self._sync()
            if sync is not None:
                failed.append(sync)
        return failed
