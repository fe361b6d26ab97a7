"""What an upstream failure was, and what it means for the channel: the one fault vocabulary of every call
made upstream (model calls, channel tests, balances, model lists, the payment checkout).

- A failed connection was a timeout, or a drop (refused, reset, closed mid-reply, an answer that is not
  HTTP): only a timeout is reported as one (504 `upstream_timeout`, a stream's `DEADLINE_EXCEEDED` event,
  an administrative call's "no answer within"); a drop is the provider failing (503, "could not be reached
  or dropped the connection"). The vocabulary is httpx's exception classes, raised by every upstream call
  on both transports (`server/upstream/client.py`; `transports.fault` translates aiohttp's): a timeout is
  an `httpx.TimeoutException`, anything else an `httpx.TransportError` that is not one (`ConnectError`,
  `ReadError`, `RemoteProtocolError`). So the type decides (`is_timeout`, `describe`).
- A failed answer is judged by the options (`judge`): retried on another channel when its status is in
  `AutomaticRetryStatusCodes`, and the channel (or key) disabled when its status is in
  `AutomaticDisableStatusCodes` or a retryable answer holds a disable keyword
  (docs/api/channels.md#auto-disable).
"""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp
import httpx

from core.option_values import status_in
from core.settings import Settings


def is_timeout(exc: httpx.TransportError) -> bool:
    """True when the upstream did not answer in time; False for a refused or dropped connection."""
    return isinstance(exc, httpx.TimeoutException)


def describe(exc: httpx.TransportError) -> str:
    """`Type: message` of the failure as the transport saw it (the aiohttp error when there is one),
    for logs and auto-disable reasons. Not redacted: the caller redacts."""
    cause = exc.__cause__
    shown: BaseException = cause if isinstance(cause, aiohttp.ClientError) else exc
    return f"{type(shown).__name__}: {shown}"


@dataclass(frozen=True, slots=True)
class Verdict:
    retry: bool  # try another channel
    disable: bool  # take the channel (or key) out of routing
    by_keyword: bool = False  # disabled for a keyword only (its status is not a disabling one)


def judge(settings: Settings, status: int, message: str) -> Verdict:
    """What a failed upstream answer means; `status` is the one the provider counts it as."""
    retry = status_in(status, settings.automatic_retry_status_codes)
    keyword = retry and keyword_disables(settings, message)
    by_status = status_in(status, settings.automatic_disable_status_codes)
    disable = by_status or keyword
    return Verdict(retry or disable, disable, disable and not by_status)


def keyword_disables(settings: Settings, message: str) -> bool:
    """The message holds one of the automatic-disable keywords (a connection-level failure disables
    only by keyword)."""
    lowered = message.lower()
    return any(word in lowered for word in settings.automatic_disable_keywords)
