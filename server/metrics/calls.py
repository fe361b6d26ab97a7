"""Model calls and their upstream attempts: outcomes, retries, tokens and quota charged, upstream latency
and time to first byte, channels taken out of routing and brought back, error logs of failed calls dropped
by their bounds."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from prometheus_client import Counter, Histogram

from core.enums import ChannelType
from server.metrics.tally import BufferedCounter, BufferedHistogram


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


OTHER_MODEL = "-"
"""The model label of a call refused before a price was found for its model (a name from the caller)."""

MODEL_CALLS = Counter("tollway_model_calls",
                      "Model calls by model, route, provider and channel (the last one tried) and outcome "
                      "(success: a charged call)", ("model", "route", "provider", "channel", "outcome"))
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
ERROR_LOGS_DROPPED = Counter("tollway_error_logs_dropped",
                             "Error logs of failed model calls not written, by reason", ("reason",))

METRICS = (MODEL_CALLS, UPSTREAM_REQUESTS, UPSTREAM_DURATION, UPSTREAM_TTFB, MODEL_CALL_RETRIES, TOKENS,
           QUOTA_CHARGED, CHANNEL_AUTO_DISABLES, CHANNEL_AUTO_ENABLES, ERROR_LOGS_DROPPED)

_calls: dict[tuple[str, str, int, int, Outcome], BufferedCounter] = {}


def count_call(model: str, route: str, outcome: Outcome, channel_type: int = 0, channel_id: int = 0) -> None:
    """One model call ended; `model` must be a bounded name (one with a price) or `OTHER_MODEL`, `route`
    the route format's name (`chat`, `embeddings`, `generate`, …); the channel is the last one tried (the
    one that answered, for a success), 0 and 0 when none was."""
    key = (model, route, channel_type, channel_id, outcome)
    child = _calls.get(key)
    if child is None:
        child = _calls[key] = BufferedCounter(MODEL_CALLS.labels(
            model, route, provider_label(channel_type) if channel_id else "",
            str(channel_id) if channel_id else "", outcome.value))
    child.inc()


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


class ErrorLogDrop(StrEnum):
    """Why the error log of a failed model call was not written (server/logs/error_logs.py)."""

    KEY_LIMIT = "key_limit"  # its API key had as many error logs as it may in the last minute (this worker)
    BUFFER_FULL = "buffer_full"  # the worker's buffer held as many rows as it may
    WRITE_FAILED = "write_failed"  # the log database refused the batch, attempt after attempt


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


_attempts: dict[tuple[int, int, UpstreamResult], BufferedCounter] = {}
_providers: dict[int, tuple[BufferedHistogram, BufferedHistogram]] = {}
_retries: dict[str, BufferedCounter] = {}
_charges: dict[str, tuple[BufferedCounter, BufferedCounter, BufferedCounter]] = {}
_disables: dict[DisableReason, Any] = {}
_error_log_drops: dict[ErrorLogDrop, BufferedCounter] = {}


def _timings(channel_type: int) -> tuple[Any, Any]:
    children = _providers.get(channel_type)
    if children is None:
        label = provider_label(channel_type)
        children = _providers[channel_type] = (BufferedHistogram(UPSTREAM_DURATION.labels(label)),
                                                BufferedHistogram(UPSTREAM_TTFB.labels(label)))
    return children


def upstream_attempt(channel_type: int, channel_id: int, result: UpstreamResult, *, ttfb: float | None,
                     seconds: float | None) -> None:
    """One upstream attempt ended as `result`: `ttfb` once the head of its answer came, `seconds` once
    the attempt is over (None: a stream, timed by `upstream_done` at its end)."""
    key = (channel_type, channel_id, result)
    child = _attempts.get(key)
    if child is None:
        child = _attempts[key] = BufferedCounter(
            UPSTREAM_REQUESTS.labels(provider_label(channel_type), str(channel_id), result.value))
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
        child = _retries[model] = BufferedCounter(MODEL_CALL_RETRIES.labels(model))
    child.inc()


def charged(model: str, input_tokens: int, output_tokens: int, quota: int) -> None:
    """A model call was charged `quota` units for its tokens (`model`: one with a price)."""
    children = _charges.get(model)
    if children is None:
        children = _charges[model] = (BufferedCounter(TOKENS.labels(model, "input")),
                                      BufferedCounter(TOKENS.labels(model, "output")),
                                      BufferedCounter(QUOTA_CHARGED.labels(model)))
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


def error_logs_dropped(reason: ErrorLogDrop, count: int = 1) -> None:
    """`count` error logs of failed model calls were dropped (a flood of refusals passes here: buffered)."""
    child = _error_log_drops.get(reason)
    if child is None:
        child = _error_log_drops[reason] = BufferedCounter(ERROR_LOGS_DROPPED.labels(reason.value))
    child.inc(count)
