"""The quota engine and its sync: reservations and settlements, holds in flight and swept, the sync's
backlog, lag and batch time, the credit outbox.

The engine lives below server/ and never imports this module: it is given `QUOTA` (its observer,
quota/observer.py) where it is built. The deployment-wide figures no process counts as it goes (holds
open in the store, the credit outbox) are read when scraped (server/observability/service.py).
"""

from __future__ import annotations

import time

from prometheus_client import Counter, Gauge, Histogram

from quota.observer import ReserveResult, SettleResult
from server.metrics.tally import BufferedCounter, BufferedHistogram

SYNC_BACKLOG = Gauge("tollway_quota_sync_backlog", "Entries waiting in the quota store for the sync",
                     multiprocess_mode="livemax")
SYNC_LAG = Gauge("tollway_quota_sync_lag_seconds",
                 "Age of the oldest entry the quota sync committed in its last batch (0: nothing waited)",
                 multiprocess_mode="livemax")
SYNC_BATCH = Histogram("tollway_quota_sync_batch_seconds", "Time the quota sync took for one batch",
                       buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))

QUOTA_BUCKETS = (0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)

RESERVATIONS = Counter("tollway_quota_reservations", "Quota reservations by result", ("result",))
RESERVATION_SECONDS = Histogram("tollway_quota_reservation_seconds", "Time one quota reservation took",
                                buckets=QUOTA_BUCKETS)
SETTLEMENTS = Counter("tollway_quota_settlements", "Quota settlements and releases by result", ("result",))
SETTLEMENT_SECONDS = Histogram("tollway_quota_settlement_seconds",
                               "Time one quota settlement or release took", buckets=QUOTA_BUCKETS)
HOLDS_IN_FLIGHT = Gauge("tollway_quota_holds_in_flight",
                        "Quota holds open in the store (calls reserved, not settled yet), read at the scrape",
                        multiprocess_mode="livemostrecent")
HOLDS_SWEPT = Counter("tollway_quota_holds_swept", "Holds released by the sweeper after their lease passed")
CREDITS_PENDING = Gauge("tollway_credits_pending",
                        "Credits in the outbox not yet durable in SQL, read at the scrape",
                        multiprocess_mode="livemostrecent")
CREDITS_FAILED = Gauge("tollway_credits_failed", "Credits in the outbox refused for good (kept for an admin)",
                       multiprocess_mode="livemostrecent")

METRICS = (SYNC_BACKLOG, SYNC_LAG, SYNC_BATCH, RESERVATIONS, RESERVATION_SECONDS, SETTLEMENTS,
           SETTLEMENT_SECONDS, HOLDS_IN_FLIGHT, HOLDS_SWEPT, CREDITS_PENDING, CREDITS_FAILED)


class QuotaMetrics:
    """The quota engine's observer (quota/observer.py): one increment and one observation per step, on
    children looked up once and buffered (server/metrics/tally.py)."""

    def __init__(self) -> None:
        self._reserved = {r: BufferedCounter(RESERVATIONS.labels(r.value)) for r in ReserveResult}
        self._settled = {r: BufferedCounter(SETTLEMENTS.labels(r.value)) for r in SettleResult}
        self._reserve_seconds = BufferedHistogram(RESERVATION_SECONDS)
        self._settle_seconds = BufferedHistogram(SETTLEMENT_SECONDS)

    def reserved(self, result: ReserveResult, seconds: float) -> None:
        self._reserved[result].inc()
        self._reserve_seconds.observe(seconds)

    def settled(self, result: SettleResult, seconds: float) -> None:
        self._settled[result].inc()
        self._settle_seconds.observe(seconds)

    def swept(self, count: int) -> None:
        HOLDS_SWEPT.inc(count)


QUOTA = QuotaMetrics()


def sync_progress(backlog: int, oldest_ms: int | None, batch_seconds: float | None) -> None:
    """What the quota sync saw after a pass: entries still waiting, the stream time (ms) of the oldest
    entry it committed (None: nothing waited), how long the batch took (None: no batch)."""
    SYNC_BACKLOG.set(backlog)
    SYNC_LAG.set(0.0 if oldest_ms is None else max(0.0, time.time() - oldest_ms / 1000))
    if batch_seconds is not None:
        SYNC_BATCH.observe(batch_seconds)


def outbox(pending: int, failed: int) -> None:
    CREDITS_PENDING.set(pending)
    CREDITS_FAILED.set(failed)


def holds_in_flight(count: int) -> None:
    HOLDS_IN_FLIGHT.set(count)
