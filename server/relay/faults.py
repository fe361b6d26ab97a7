"""What a failed upstream connection was: a timeout, or a drop (refused, reset, closed mid-reply).

Only a timeout is reported as one (504 `upstream_timeout`, a stream's `DEADLINE_EXCEEDED` event); a drop
is the provider failing (503). Both transports raise httpx's error for what happened
(`server/relay/transports.py` corrects httpx-aiohttp's mapping), so the type decides.
"""

from __future__ import annotations

import aiohttp
import httpx


def is_timeout(exc: httpx.TransportError) -> bool:
    """True when the upstream did not answer in time; False for a refused or dropped connection."""
    return isinstance(exc, httpx.TimeoutException)


def describe(exc: httpx.TransportError) -> str:
    """`Type: message` of the failure as the transport saw it (the aiohttp error when there is one),
    for logs and auto-disable reasons. Not redacted: the caller redacts."""
    cause = exc.__cause__
    shown: BaseException = cause if isinstance(cause, aiohttp.ClientError) else exc
    return f"{type(shown).__name__}: {shown}"
