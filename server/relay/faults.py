"""What a failed upstream connection was: a timeout, or a drop (refused, reset, closed mid-reply).

Only a timeout is reported as one (504 `upstream_timeout`, a stream's `DEADLINE_EXCEEDED` event); a drop
is the provider failing (503). The exception type alone cannot say which with the aiohttp transport:
httpx-aiohttp maps every aiohttp connection error — a refused connection, a server that closed the socket
before answering — to `httpx.ConnectTimeout`. The aiohttp error it chained (`__cause__`) is the truth, so
it decides when present; httpx's own transport maps its errors faithfully.
"""

from __future__ import annotations

import aiohttp
import httpx


def is_timeout(exc: httpx.TransportError) -> bool:
    """True when the upstream did not answer in time; False for a refused or dropped connection."""
    cause = exc.__cause__
    if isinstance(cause, aiohttp.ClientError):
        return isinstance(cause, TimeoutError)  # aiohttp's timeout errors are TimeoutErrors, drops are not
    return isinstance(exc, httpx.TimeoutException)


def describe(exc: httpx.TransportError) -> str:
    """`Type: message` of the failure as the transport saw it (the aiohttp error, not httpx's mapping),
    for logs and auto-disable reasons. Not redacted: the caller redacts."""
    cause = exc.__cause__
    shown: BaseException = cause if isinstance(cause, aiohttp.ClientError) else exc
    return f"{type(shown).__name__}: {shown}"
