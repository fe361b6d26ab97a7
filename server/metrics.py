"""The Prometheus metrics of a Tollway process, declared once (`DECLARED`), and their exposition.

Every metric is created here, at import, in prometheus-client's default registry. `tollway serve` runs its
processes (the workers and the quota-sync process it starts) with `PROMETHEUS_MULTIPROC_DIR` set to a fresh
directory of its own (server/cli.py): prometheus-client then keeps each process's values in a file of that
directory, and a scrape of any worker (`exposition`) sums them over every process of the node with
`MultiProcessCollector`. The files of a dead process stay (a counter is never lost or counted twice when a
worker is restarted: its replacement writes a file of its own); its `live…` gauges are dropped by the
supervisor (`process_gone`). Without that directory (a test's in-process app) the values live in memory.

The hot path pays one dict lookup and one increment per figure: the labelled children are looked up once
per label set and kept (`_http`, `_calls`, `_attempts`, `_providers`, `_retries`, `_charges`, `_disables`),
and every label set is bounded — route templates (never raw paths), the HTTP methods we route, the statuses
we answer, the models a price was found for, channel ids and types (the admin's channels), `Outcome`,
`UpstreamResult`, `DisableReason`.
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

from core.enums import ChannelType

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
    "tollway_model_calls": ("counter", ("model", "provider", "channel", "outcome")),
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
}
"""Every metric (its name as prometheus-client registers it: a counter without `_total`), its type and its
labels. A new metric is a deliberate change: tests/test_metrics.py checks the registry against this."""

HTTP_REQUESTS = Counter("tollway_http_requests",
                        "HTTP requests answered, by route template, method and status",
                        ("route", "method", "status"))
HTTP_DURATION = Histogram("tollway_http_request_duration_seconds",
                          "Time from a request's head to the end of its answer, by route template and method",
                          ("route", "method"))
MODEL_CALLS = Counter("tollway_model_calls",
                      "Model calls by model, provider and channel (the last one tried) and outcome "
                      "(success: a charged call)", ("model", "provider", "channel", "outcome"))
SYNC_BACKLOG = Gauge("tollway_quota_sync_backlog", "Entries waiting in the quota store for the sync",
                     multiprocess_mode="livemax")
SYNC_LAG = Gauge("tollway_quota_sync_lag_seconds",
                 "Age of the oldest entry the quota sync committed in its last batch (0: nothing waited)",
                 multiprocess_mode="livemax")
SYNC_BATCH = Histogram("tollway_quota_sync_batch_seconds", "Time the quota sync took for one batch",
                       buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))
BUILD_INFO = Gauge("tollway_build_info", "Always 1: the version running and its Python",
                   ("version", "python"), multiprocess_mode="livemax")

# ---- relay
UPSTREAM_REQUESTS = Counter("tollway_upstream_requests",
                            "Upstream attempts of model calls, by provider, channel and result",
                            ("provider", "channel", "result"))
UPSTREAM_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
UPSTREAM_DURATION = Histogram("tollway_upstream_duration_seconds",
                              "Time of one upstream attempt, from sending it to the end of its answer (a "
                              "stream: to its end; a failure: to the failure), by provider",
                              ("provider",), buckets=UPSTREAM_BUCKETS)
UPSTREAM_TTFB = Histogram("tollway_upstream_ttfb_seconds",
                          "Time from sending an upstream attempt to the head of its answer, by provider",
                          ("provider",), buckets=UPSTREAM_BUCKETS)
MODEL_CALL_RETRIES = Counter("tollway_model_call_retries",
                             "Upstream attempts of model calls after their first, by model", ("model",))
TOKENS = Counter("tollway_tokens", "Tokens of charged model calls, by model and direction (input, output)",
                 ("model", "direction"))
QUOTA_CHARGED = Counter("tollway_quota_charged", "Quota units charged by model calls, by model", ("model",))
CHANNEL_AUTO_DISABLES = Counter("tollway_channel_auto_disables",
                                "Channels (or keys of multi-key channels) taken out of routing "
                                "automatically, by reason", ("reason",))
CHANNEL_AUTO_ENABLES = Counter("tollway_channel_auto_enables",
                               "Automatically disabled channels brought back by a channel test run")

METRICS = (HTTP_REQUESTS, HTTP_DURATION, MODEL_CALLS, SYNC_BACKLOG, SYNC_LAG, SYNC_BATCH, BUILD_INFO,
           # ---- relay
           UPSTREAM_REQUESTS, UPSTREAM_DURATION, UPSTREAM_TTFB, MODEL_CALL_RETRIES, TOKENS, QUOTA_CHARGED,
           CHANNEL_AUTO_DISABLES, CHANNEL_AUTO_ENABLES)


def _version() -> str:
    try:
        return version("tollway")
    except PackageNotFoundError:
        return "unknown"


BUILD_INFO.labels(_version(), platform.python_version()).set(1)

_http: dict[tuple[str, str, int], tuple[Any, Any]] = {}
_calls: dict[tuple[str, int, int, Outcome], Any] = {}


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


def count_call(model: str, outcome: Outcome, channel_type: int = 0, channel_id: int = 0) -> None:
    """One model call ended; `model` must be a bounded name (one with a price) or `OTHER_MODEL`; the
    channel is the last one tried (the one that answered, for a success), 0 and 0 when none was."""
    key = (model, channel_type, channel_id, outcome)
    child = _calls.get(key)
    if child is None:
        child = _calls[key] = MODEL_CALLS.labels(model, provider_label(channel_type) if channel_id else "",
                                                 str(channel_id) if channel_id else "", outcome.value)
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


# ---- relay


class UpstreamResult(StrEnum):
    """How one upstream attempt of a model call ended (`tollway_upstream_requests_total`)."""

    OK = "ok"  # a 2xx, its body read (a stream: its head came; how the stream ends is the call's)
    HTTP_4XX = "http_4xx"
    HTTP_5XX = "http_5xx"
    HTTP_OTHER = "http_other"  # a 1xx or 3xx final answer (redirects are never followed)
    TIMEOUT = "timeout"  # no answer, or no whole body, in time
    CONNECT_ERROR = "connect_error"  # refused, unreachable, dropped before the answer, not HTTP
    BAD_REPLY = "bad_reply"  # a 2xx whose body broke off


class DisableReason(StrEnum):
    """Why a channel (or a key of a multi-key channel) was taken out of routing automatically."""

    UPSTREAM_STATUS = "upstream_status"  # a model call's answer had a status of AutomaticDisableStatusCodes
    UPSTREAM_KEYWORD = "upstream_keyword"  # a model call's failure held an AutomaticDisableKeywords word
    TEST_FAILED = "test_failed"  # a channel test run's test failed that way
    TEST_SLOW = "test_slow"  # a channel test run's answer took longer than ChannelDisableThreshold
    BALANCE_USED_UP = "balance_used_up"  # the balance update of every channel read 0 or less


def provider_label(channel_type: int) -> str:
    """The `provider` label of a channel type: the name of its `ChannelType` (`gemini`, `openai`), else
    `type_<n>` (a number from the channel catalog the code does not name)."""
    try:
        return ChannelType(channel_type).name.lower()
    except ValueError:
        return f"type_{channel_type}"


def result_of_status(status: int) -> UpstreamResult:
    """The result of an attempt the upstream answered with `status`."""
    if 200 <= status < 300:
        return UpstreamResult.OK
    if 400 <= status < 500:
        return UpstreamResult.HTTP_4XX
    if status >= 500:
        return UpstreamResult.HTTP_5XX
    return UpstreamResult.HTTP_OTHER


_attempts: dict[tuple[int, int, UpstreamResult], Any] = {}
_providers: dict[int, tuple[Any, Any]] = {}
_retries: dict[str, Any] = {}
_charges: dict[str, tuple[Any, Any, Any]] = {}
_disables: dict[DisableReason, Any] = {}


def _timings(channel_type: int) -> tuple[Any, Any]:
    children = _providers.get(channel_type)
    if children is None:
        label = provider_label(channel_type)
        children = _providers[channel_type] = (UPSTREAM_DURATION.labels(label), UPSTREAM_TTFB.labels(label))
    return children


def upstream_attempt(channel_type: int, channel_id: int, result: UpstreamResult, *, ttfb: float | None,
                     seconds: float | None) -> None:
    """One upstream attempt ended as `result`: `ttfb` once the head of its answer came, `seconds` once
    the attempt is over (None: a stream, timed by `upstream_done` at its end)."""
    key = (channel_type, channel_id, result)
    child = _attempts.get(key)
    if child is None:
        child = _attempts[key] = UPSTREAM_REQUESTS.labels(provider_label(channel_type), str(channel_id),
                                                          result.value)
    child.inc()
    duration, first_byte = _timings(channel_type)
    if ttfb is not None:
        first_byte.observe(ttfb)
    if seconds is not None:
        duration.observe(seconds)


def upstream_done(channel_type: int, seconds: float) -> None:
    """A streamed attempt's answer ended, `seconds` after it was sent."""
    _timings(channel_type)[0].observe(seconds)


def retried(model: str) -> None:
    """A model call makes another attempt (`model`: one with a price)."""
    child = _retries.get(model)
    if child is None:
        child = _retries[model] = MODEL_CALL_RETRIES.labels(model)
    child.inc()


def charged(model: str, input_tokens: int, output_tokens: int, quota: int) -> None:
    """A model call was charged `quota` units for its tokens (`model`: one with a price)."""
    children = _charges.get(model)
    if children is None:
        children = _charges[model] = (TOKENS.labels(model, "input"), TOKENS.labels(model, "output"),
                                      QUOTA_CHARGED.labels(model))
    children[0].inc(input_tokens)
    children[1].inc(output_tokens)
    children[2].inc(quota)


def auto_disabled(reason: DisableReason) -> None:
    """A channel, or a key of a multi-key channel, was taken out of routing automatically."""
    child = _disables.get(reason)
    if child is None:
        child = _disables[reason] = CHANNEL_AUTO_DISABLES.labels(reason.value)
    child.inc()


def auto_enabled() -> None:
    """An automatically disabled channel passed a channel test run's test and serves again."""
    CHANNEL_AUTO_ENABLES.inc()
