"""Running one step over many channels, a few at a time, stoppable between steps: what "test every
channel" and "update every balance" share.

`each(items, limit, step, stop)` runs `step(item)` for every item with at most `limit` running at once;
once `stop` is set no new item starts. A step's own error is logged and the run goes on with the next
item (one channel's failure never ends the run). `until_stopped(coro, stop)` awaits an upstream call
unless `stop` comes first, in which case the call is cancelled: a run asked to stop (the worker is
shutting down) gives up its calls in flight at once and never starts a database write it could not
finish (CONVENTIONS.md, rule 14). `lock_ttl` is how long a run's cluster-wide lock lives.

`Progress` is how far a run has come — channels in the run, done, passed, failed, the last failures with
the upstream's (redacted) message — written to the shared backend at its start, after each channel and
at its end, so that `GET /api/channel/progress` on any worker or node tells it (the console shows it as
the run moves). While the run lasts the record lives as long as the run's lock; a finished run's record
is kept a day. Steps finish in any order, so a snapshot read mid-run may lag one channel behind; the last
one, written after every step, is exact.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import math
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from backend.base import KeyValue
from core.enums import ChannelRun

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


def lock_ttl(count: int, concurrency: int, seconds_each: float) -> float:
    """How long a run over `count` channels can take at worst, plus a margin: its lock's time to live
    (a holder that dies blocks the next run this long at most)."""
    return math.ceil(count / concurrency) * (seconds_each + 5.0) + 60.0


PROGRESS_KEY = "channel-run:{run}"
FAILURES_KEPT = 20
FINISHED_KEPT_SECONDS = 86_400.0


@dataclass
class Failure:
    channel_id: int
    name: str
    message: str


@dataclass
class RunState:
    """How far one run has come (what `GET /api/channel/progress` tells)."""

    run: ChannelRun
    total: int = 0
    started_at: int = 0
    done: int = 0
    passed: int = 0
    failed: int = 0
    finished_at: int = 0
    failures: list[Failure] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return self.started_at != 0 and self.finished_at == 0

    def dump(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def load(cls, text: str) -> RunState:
        fields = json.loads(text)
        failures = [Failure(**f) for f in fields.pop("failures")]
        return cls(**(fields | {"run": ChannelRun(fields["run"]), "failures": failures}))


@dataclass
class Progress:
    """One run's `RunState`, published to the shared backend as it moves (see the module docstring)."""

    backend: KeyValue
    state: RunState
    ttl: float
    """How long the record lives while the run lasts (the run's lock's time to live)."""

    @classmethod
    def start(cls, backend: KeyValue, run: ChannelRun, total: int, now: int, ttl: float) -> Progress:
        return cls(backend, RunState(run, total=total, started_at=max(now, 1)), ttl)

    async def publish(self) -> None:
        ttl = FINISHED_KEPT_SECONDS if self.state.finished_at else self.ttl
        await self.backend.set_text(PROGRESS_KEY.format(run=self.state.run), self.state.dump(), ttl)

    async def passed_one(self) -> None:
        self.state.done += 1
        self.state.passed += 1
        await self.publish()

    async def failed_one(self, channel_id: int, name: str, message: str) -> None:
        self.state.done += 1
        self.state.failed += 1
        if len(self.state.failures) < FAILURES_KEPT:
            self.state.failures.append(Failure(channel_id, name, message[:300]))
        await self.publish()

    async def skipped_one(self) -> None:
        """A channel that was not tested after all (deleted or disabled meanwhile, or the run stopped)."""
        self.state.done += 1
        await self.publish()

    async def finish(self, now: int) -> None:
        self.state.finished_at = max(now, self.state.started_at)
        await self.publish()


async def read_progress(backend: KeyValue, run: ChannelRun) -> RunState:
    """The last state of `run` published, or an empty one (every count 0, not running) when none is kept."""
    text = await backend.get_text(PROGRESS_KEY.format(run=run))
    return RunState(run) if text is None else RunState.load(text)
