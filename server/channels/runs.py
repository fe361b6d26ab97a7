"""Running one step over many channels, a few at a time, stoppable between steps: what "test every
channel" and "update every balance" share.

`each(items, limit, step, stop)` runs `step(item)` for every item with at most `limit` running at once;
once `stop` is set no new item starts. A step's own error is logged and the run goes on with the next
item (one channel's failure never ends the run). `until_stopped(coro, stop)` awaits an upstream call
unless `stop` comes first, in which case the call is cancelled: a run asked to stop (the worker is
shutting down) gives up its calls in flight at once and never starts a database write it could not
finish (CONVENTIONS.md, rule 14).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

log = logging.getLogger("tollway.channels")

T = TypeVar("T")
R = TypeVar("R")


async def each(items: Iterable[T], limit: int, step: Callable[[T], Awaitable[None]],
               stop: asyncio.Event | None = None) -> None:
    """`step(item)` for every item, at most `limit` at a time (see the module docstring)."""
    pending = iter(items)

    async def worker() -> None:
        for item in pending:  # the workers share one iterator: each item is taken once
            if stop is not None and stop.is_set():
                return
            try:
                await step(item)
            except Exception:
                log.exception("a step of a channel run failed; going on with the next channel")

    await asyncio.gather(*(worker() for _ in range(max(1, limit))))


async def until_stopped(coro: Coroutine[Any, Any, R], stop: asyncio.Event) -> R | None:
    """The result of `coro`, or None when `stop` is set first (the call is then cancelled)."""
    call = asyncio.ensure_future(coro)
    if stop.is_set():
        call.cancel()
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((call, stopping), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not call.done():
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call
    if call.cancelled():
        return None
    return call.result()
