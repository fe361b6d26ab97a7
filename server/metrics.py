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

METRICS = (HTTP_REQUESTS, HTTP_DURATION, MODEL_CALLS, SYNC_BACKLOG, SYNC_LAG, SYNC_BATCH, BUILD_INFO)


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
