"""The Prometheus metrics of a Tollway process: the declared list (`DECLARED`) and their exposition.

Every metric is created at import, in prometheus-client's default registry, by the module of its subject:
`http` (requests by route, build information), `calls` (model calls and their upstream attempts),
`quota` (the quota engine, its sync and the credit outbox), `infra` (Redis and database errors, pools,
cache reloads, sign-ins, payment webhooks). Their functions are used as `metrics.<name>` from here.

`tollway serve` runs its processes (the workers and the quota-sync process it starts) with
`PROMETHEUS_MULTIPROC_DIR` set to a fresh directory of its own (server/cli.py): prometheus-client then keeps
each process's values in a file of that directory, and a scrape of any worker (`exposition`) sums them over
every process of the node with `MultiProcessCollector`. The files of a dead process stay (a counter is
never lost or counted twice when a worker is restarted: its replacement writes a file of its own); its
`live…` gauges are dropped by the supervisor (`process_gone`). Without that directory (a test's in-process
app) the values live in memory.

The hot path pays one dict lookup and one addition in memory per figure: the labelled children are looked
up once per label set and kept, the figures every model call touches are summed in memory and written to
the multiprocess files once a second (`tally`: a scrape sees another worker's counts up to a second late),
and every label set is bounded — route templates (never raw paths), the HTTP
methods we route, the statuses we answer, the models a price was found for, channel ids and types (the
admin's channels), and enums (`Outcome`, `UpstreamResult`, `DisableReason`, `ErrorLogDrop`, the quota
results, `ErrorKind`, `SignInFailure`).
"""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, multiprocess

from server.metrics import calls, http, infra, quota, tally
from server.metrics.calls import (
    OTHER_MODEL,
    DisableReason,
    ErrorLogDrop,
    Outcome,
    UpstreamResult,
    auto_disabled,
    auto_enabled,
    charged,
    count_call,
    error_logs_dropped,
    provider_label,
    result_of_status,
    retried,
    upstream_attempt,
    upstream_done,
)
from server.metrics.http import UNMATCHED, observe_http
from server.metrics.infra import (
    SignInFailure,
    cache_reload,
    db_error,
    db_pool,
    payment_webhook,
    redis_error,
    sign_in_failed,
    sign_in_locked,
)
from server.metrics.quota import QUOTA, holds_in_flight, outbox, sync_progress
from server.metrics.tally import FLUSH_INTERVAL, flush

__all__ = [
    "CONTENT_TYPE", "DECLARED", "FLUSH_INTERVAL", "METRICS", "OTHER_MODEL", "QUOTA", "UNMATCHED",
    "DisableReason", "ErrorLogDrop", "Outcome",
    "SignInFailure", "UpstreamResult", "authorized", "auto_disabled", "auto_enabled", "cache_reload",
    "charged", "count_call", "db_error", "db_pool", "error_logs_dropped", "exposition", "flush",
    "holds_in_flight", "observe_http",
    "outbox", "payment_webhook", "process_gone", "provider_label", "redis_error", "result_of_status",
    "retried", "sign_in_failed", "sign_in_locked", "sync_progress", "upstream_attempt", "upstream_done",
]

CONTENT_TYPE = CONTENT_TYPE_LATEST

DECLARED: dict[str, tuple[str, tuple[str, ...]]] = {
    "tollway_http_requests": ("counter", ("route", "method", "status")),
    "tollway_http_request_duration_seconds": ("histogram", ("route", "method")),
    "tollway_model_calls": ("counter", ("model", "route", "provider", "channel", "outcome")),
    "tollway_quota_sync_backlog": ("gauge", ()),
    "tollway_quota_sync_lag_seconds": ("gauge", ()),
    "tollway_quota_sync_batch_seconds": ("histogram", ()),
    "tollway_build_info": ("gauge", ("version", "python")),
    # ---- relay
    "tollway_upstream_requests": ("counter", ("provider", "channel", "result")),
    "tollway_upstream_duration_seconds": ("histogram", ("provider",)),
    "tollway_upstream_ttfb_seconds": ("histogram", ("provider",)),
    "tollway_model_call_retries": ("counter", ("model",)),
    "tollway_tokens": ("counter", ("model", "direction")),
    "tollway_quota_charged": ("counter", ("model",)),
    "tollway_channel_auto_disables": ("counter", ("reason",)),
    "tollway_channel_auto_enables": ("counter", ()),
    "tollway_error_logs_dropped": ("counter", ("reason",)),
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
labels. A new metric is a deliberate change: tests/test_observability.py checks the registry against this."""


METRICS: tuple[Any, ...] = (*http.METRICS, *calls.METRICS, *quota.METRICS, *infra.METRICS)
"""Every metric object, for the check against `DECLARED`."""


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
    tally.flush()  # this process's own figures are current; the other processes' at most a flush late
    if directory is None:
        return generate_latest(REGISTRY)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(directory))  # type: ignore[no-untyped-call]
    return generate_latest(registry)


def process_gone(pid: int, directory: Path | None) -> None:
    """A process of the node died: drop its `live…` gauges (its counters stay, so nothing is lost)."""
    if directory is not None:
        multiprocess.mark_process_dead(pid, str(directory))  # type: ignore[no-untyped-call]
