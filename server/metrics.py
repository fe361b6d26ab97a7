"""The Prometheus metrics of a Tollway process, declared once (`DECLARED`), and their exposition.

Every metric is created here, at import, in prometheus-client's default registry. `tollway serve` runs its
processes (the workers and the quota-sync process it starts) with `PROMETHEUS_MULTIPROC_DIR` set to a fresh
directory of its own (server/cli.py): prometheus-client then keeps each process's values in a file of that
directory, and a scrape of any worker (`exposition`) sums them over every process of the node with
`MultiProcessCollector`. The files of a dead process stay (a counter is never lost or counted twice when a
worker is restarted: its replacement writes a file of its own); its `live…` gauges are dropped by the
supervisor (`process_gone`). Without that directory (a test's in-process app) the values live in memory.

The hot path pays one dict lookup and one increment per figure: the labelled children are looked up once
per label set and kept (`_http`, `_calls`), and every label set is bounded — route templates (never raw
paths), the HTTP methods we route, the statuses we answer, the models a price was found for, `Outcome`.

The quota engine, the Redis backend, the database and the version tracker live below server/ and never
import this module: they are given an observer (quota/observer.py) where they are built (server/context.py,
server/quota_sync.py), which the objects and functions of the quota block below implement. The figures of
the whole deployment that no process counts as it goes (holds open in the store, the credit outbox) are
read when scraped (server/observability/service.py), never on the model-call path.
"""

from __future__ import annotations

import hmac
import platform
import time
from enum import StrEnum
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

from quota.observer import ErrorKind, ReserveResult, SettleResult
from quota.versions import NAMES as VERSIONED

CONTENT_TYPE = CONTENT_TYPE_LATEST


class Outcome(StrEnum):
    """How a model call ended: `success` is a charged call, every other value a refusal or a failure."""

    SUCCESS = "success"
    INSUFFICIENT_QUOTA = "insufficient_quota"  # the user's balance, or the key's own quota
    RATE_LIMITED = "rate_limited"
    NO_CHANNEL = "no_channel"  # the model is offered, but no channel of it is enabled
    UPSTREAM_FAILED = "upstream_failed"  # every channel tried failed
    UPSTREAM_REJECTED = "upstream_rejected"  # an upstream 4xx passed through
    TIMEOUT = "timeout"
    REFUSED_KEY = "refused_key"  # the key, its owner, its IP or group, or the model is not allowed
    BAD_REQUEST = "bad_request"  # the body, the model, a missing price or modality
    CANCELLED = "cancelled"  # the client went away, or the server stopped, before the call was charged
    ERROR = "error"  # anything else (a bug, Redis or the database failing)


UNMATCHED = "unmatched"
"""The route label of a request no route matched (its raw path is never a label)."""

OTHER_MODEL = "-"
"""The model label of a call refused before a price was found for its model (a name from the caller)."""

METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})

DECLARED: dict[str, tuple[str, tuple[str, ...]]] = {
    "tollway_http_requests": ("counter", ("route", "method", "status")),
    "tollway_http_request_duration_seconds": ("histogram", ("route", "method")),
    "tollway_model_calls": ("counter", ("model", "outcome")),
    "tollway_quota_sync_backlog": ("gauge", ()),
    "tollway_quota_sync_lag_seconds": ("gauge", ()),
    "tollway_quota_sync_batch_seconds": ("histogram", ()),
    "tollway_build_info": ("gauge", ("version", "python")),
    # ---- quota, outbox, payments, infrastructure
    "tollway_quota_reservations": ("counter", ("result",)),
    "tollway_quota_reservation_seconds": ("histogram", ()),
    "tollway_quota_settlements": ("counter", ("result",)),
    "tollway_quota_settlement_seconds": ("histogram", ()),
    "tollway_quota_holds_in_flight": ("gauge", ()),
    "tollway_quota_holds_swept": ("counter", ()),
    "tollway_credits_pending": ("gauge", ()),
    "tollway_credits_failed": ("gauge", ()),
    "tollway_payment_webhooks": ("counter", ("provider", "outcome")),
    "tollway_redis_errors": ("counter", ("kind",)),
    "tollway_db_errors": ("counter", ("kind",)),
    "tollway_db_pool_connections": ("gauge", ("state",)),
    "tollway_cache_reloads": ("counter", ("kind",)),
    "tollway_sign_in_failures": ("counter", ("reason",)),
    "tollway_sign_in_lockouts": ("counter", ()),
}
"""Every metric (its name as prometheus-client registers it: a counter without `_total`), its type and its
labels. A new metric is a deliberate change: tests/test_metrics.py checks the registry against this."""

HTTP_REQUESTS = Counter("tollway_http_requests",
                        "HTTP requests answered, by route template, method and status",
                        ("route", "method", "status"))
HTTP_DURATION = Histogram("tollway_http_request_duration_seconds",
                          "Time from a request's head to the end of its answer, by route template and method",
                          ("route", "method"))
MODEL_CALLS = Counter("tollway_model_calls", "Model calls by model and outcome (success: a charged call)",
                      ("model", "outcome"))
SYNC_BACKLOG = Gauge("tollway_quota_sync_backlog", "Entries waiting in the quota store for the sync",
                     multiprocess_mode="livemax")
SYNC_LAG = Gauge("tollway_quota_sync_lag_seconds",
                 "Age of the oldest entry the quota sync committed in its last batch (0: nothing waited)",
                 multiprocess_mode="livemax")
SYNC_BATCH = Histogram("tollway_quota_sync_batch_seconds", "Time the quota sync took for one batch",
                       buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))
BUILD_INFO = Gauge("tollway_build_info", "Always 1: the version running and its Python",
                   ("version", "python"), multiprocess_mode="livemax")

METRICS: tuple[Any, ...] = (HTTP_REQUESTS, HTTP_DURATION, MODEL_CALLS, SYNC_BACKLOG, SYNC_LAG, SYNC_BATCH,
                            BUILD_INFO)


def _version() -> str:
    try:
        return version("tollway")
    except PackageNotFoundError:
        return "unknown"


BUILD_INFO.labels(_version(), platform.python_version()).set(1)

_http: dict[tuple[str, str, int], tuple[Any, Any]] = {}
_calls: dict[tuple[str, Outcome], Any] = {}


def observe_http(route: str, method: str, status: int, seconds: float) -> None:
    """One request answered: `route` is the route's template (or `UNMATCHED`)."""
    if method not in METHODS:
        method = "OTHER"
    key = (route, method, status)
    children = _http.get(key)
    if children is None:
        children = _http[key] = (HTTP_REQUESTS.labels(route, method, str(status)),
                                 HTTP_DURATION.labels(route, method))
    children[0].inc()
    children[1].observe(seconds)


def count_call(model: str, outcome: Outcome) -> None:
    """One model call ended; `model` must be a bounded name (one with a price) or `OTHER_MODEL`."""
    child = _calls.get((model, outcome))
    if child is None:
        child = _calls[(model, outcome)] = MODEL_CALLS.labels(model, outcome.value)
    child.inc()


def sync_progress(backlog: int, oldest_ms: int | None, batch_seconds: float | None) -> None:
    """What the quota sync saw after a pass: entries still waiting, the stream time (ms) of the oldest
    entry it committed (None: nothing waited), how long the batch took (None: no batch)."""
    SYNC_BACKLOG.set(backlog)
    SYNC_LAG.set(0.0 if oldest_ms is None else max(0.0, time.time() - oldest_ms / 1000))
    if batch_seconds is not None:
        SYNC_BATCH.observe(batch_seconds)


def authorized(token: str | None, authorization: str | None) -> bool:
    """Whether a scrape may read the metrics: `METRICS_TOKEN` is set and the caller sent it as a bearer
    token (compared in constant time)."""
    if not token or not authorization:
        return False
    scheme, _, sent = authorization.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(sent.strip().encode(), token.encode())


def exposition(directory: Path | None) -> bytes:
    """The text format of every metric: summed over the node's processes when `directory` (the
    multiprocess directory of `tollway serve`) is set, else this process's own."""
    if directory is None:
        return generate_latest(REGISTRY)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(directory))  # type: ignore[no-untyped-call]
    return generate_latest(registry)


def process_gone(pid: int, directory: Path | None) -> None:
    """A process of the node died: drop its `live…` gauges (its counters stay, so nothing is lost)."""
    if directory is not None:
        multiprocess.mark_process_dead(pid, str(directory))  # type: ignore[no-untyped-call]


# ---- quota, outbox, payments, infrastructure

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
PAYMENT_WEBHOOKS = Counter("tollway_payment_webhooks", "Payment webhook deliveries by provider and outcome",
                           ("provider", "outcome"))
REDIS_ERRORS = Counter("tollway_redis_errors", "Failed Redis calls by kind", ("kind",))
DB_ERRORS = Counter("tollway_db_errors", "Database transactions failed by the database, by kind", ("kind",))
DB_POOL = Gauge("tollway_db_pool_connections", "Database pool connections by state (sampled)", ("state",),
                multiprocess_mode="livesum")
CACHE_RELOADS = Counter("tollway_cache_reloads", "Reloads of a worker's cached shared state by kind",
                        ("kind",))
SIGN_IN_FAILURES = Counter("tollway_sign_in_failures", "Failed sign-ins by reason", ("reason",))
SIGN_IN_LOCKOUTS = Counter("tollway_sign_in_lockouts",
                           "Sign-in locks started (password: per account and IP; 2FA: per account)")

METRICS += (RESERVATIONS, RESERVATION_SECONDS, SETTLEMENTS, SETTLEMENT_SECONDS, HOLDS_IN_FLIGHT,
            HOLDS_SWEPT, CREDITS_PENDING, CREDITS_FAILED, PAYMENT_WEBHOOKS, REDIS_ERRORS, DB_ERRORS, DB_POOL,
            CACHE_RELOADS, SIGN_IN_FAILURES, SIGN_IN_LOCKOUTS)


class SignInFailure(StrEnum):
    """Why a sign-in failed (the caller is told less: `invalid username or password`)."""

    PASSWORD = "password"  # a wrong password, or no such user  # noqa: S105 (a label, not a secret)
    DISABLED = "disabled"  # the right password of a disabled account
    LOCKED = "locked"  # refused unchecked: too many failures (the lockout)
    TOTP = "totp"  # a wrong 2FA code in the second step
    PASSKEY = "passkey"  # a passkey assertion refused


class QuotaMetrics:
    """The quota engine's observer (quota/observer.py): one increment and one observation per step, on
    children looked up once."""

    def __init__(self) -> None:
        self._reserved = {result: RESERVATIONS.labels(result.value) for result in ReserveResult}
        self._settled = {result: SETTLEMENTS.labels(result.value) for result in SettleResult}

    def reserved(self, result: ReserveResult, seconds: float) -> None:
        self._reserved[result].inc()
        RESERVATION_SECONDS.observe(seconds)

    def settled(self, result: SettleResult, seconds: float) -> None:
        self._settled[result].inc()
        SETTLEMENT_SECONDS.observe(seconds)

    def swept(self, count: int) -> None:
        HOLDS_SWEPT.inc(count)


QUOTA = QuotaMetrics()
_redis_errors = {kind: REDIS_ERRORS.labels(kind.value) for kind in ErrorKind}
_db_errors = {kind: DB_ERRORS.labels(kind.value) for kind in ErrorKind}
_reloads = {kind: CACHE_RELOADS.labels(kind) for kind in VERSIONED}
_sign_in = {reason: SIGN_IN_FAILURES.labels(reason.value) for reason in SignInFailure}


def redis_error(kind: ErrorKind) -> None:
    """The Redis backend's error observer."""
    _redis_errors[kind].inc()


def db_error(kind: ErrorKind) -> None:
    """The database's error observer."""
    _db_errors[kind].inc()


def cache_reload(kind: str) -> None:
    """The version tracker's reload observer: `kind` is one of quota/versions.py's NAMES."""
    child = _reloads.get(kind)
    if child is not None:
        child.inc()


def sign_in_failed(reason: SignInFailure) -> None:
    _sign_in[reason].inc()


def sign_in_locked() -> None:
    """A sign-in lock started (a later refusal while it lasts is a failure `locked`, not another lock)."""
    SIGN_IN_LOCKOUTS.inc()


def payment_webhook(provider: str, outcome: str) -> None:
    """One webhook delivery; `outcome` is a bounded enum value (server/payments/service.py `Outcome`)."""
    PAYMENT_WEBHOOKS.labels(provider, outcome).inc()


def outbox(pending: int, failed: int) -> None:
    CREDITS_PENDING.set(pending)
    CREDITS_FAILED.set(failed)


def holds_in_flight(count: int) -> None:
    HOLDS_IN_FLIGHT.set(count)


def db_pool(in_use: int, idle: int) -> None:
    """This process's database connections (its pools summed); summed over the node's processes."""
    DB_POOL.labels("in_use").set(in_use)
    DB_POOL.labels("idle").set(idle)
