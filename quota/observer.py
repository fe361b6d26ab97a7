"""What the quota engine, its sweeper, the Redis backend and the version tracker tell an observer.

`quota/` imports neither server/ nor prometheus: whoever builds these parts (server/context.py,
server/quota_sync.py) passes them an observer explicitly; server/metrics/ implements it with
Prometheus counters. The default, `NO_OBSERVER` / `ignore_error`, does nothing, so the parts work as
before for a caller that does not measure (scripts, tests of the engine itself).

The calls sit on the model call's hot path (a reservation and a settlement per call): an observer's
method must be cheap and must never raise.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Protocol


class ReserveResult(StrEnum):
    """How a `QuotaEngine.reserve` ended."""

    HELD = "held"
    REFUSED_QUOTA = "refused_quota"  # the user's balance or the key's remaining quota
    REFUSED_RATE = "refused_rate"  # a rate limit given to the reservation
    ERROR = "error"  # the store failed, or the account does not exist


class SettleResult(StrEnum):
    """How a `QuotaEngine.settle` or `release` ended."""

    APPLIED = "applied"  # settled: the cost charged, the usage queued for the sync
    DUPLICATE = "duplicate"  # already settled, released or swept: nothing changed
    RELEASED = "released"  # the hold was given back
    ERROR = "error"


class ErrorKind(StrEnum):
    """Why a call to Redis or the database failed."""

    TIMEOUT = "timeout"
    CONNECTION = "connection"  # refused, reset, closed by the server
    OTHER = "other"


ErrorObserver = Callable[[ErrorKind], None]
"""Told once per failed call to a store (Redis) or per failed transaction (the database)."""


def ignore_error(kind: ErrorKind) -> None:
    """The default `ErrorObserver`: nothing is counted."""


class QuotaObserver(Protocol):
    def reserved(self, result: ReserveResult, seconds: float) -> None:
        """A reservation ended with `result` after `seconds`."""
        ...

    def settled(self, result: SettleResult, seconds: float) -> None:
        """A settlement or a release ended with `result` after `seconds`."""
        ...

    def swept(self, count: int) -> None:
        """The sweeper released `count` (> 0) holds whose lease had passed."""
        ...


class NoObserver:
    """Counts nothing (the default)."""

    def reserved(self, result: ReserveResult, seconds: float) -> None:
        pass

    def settled(self, result: SettleResult, seconds: float) -> None:
        pass

    def swept(self, count: int) -> None:
        pass


NO_OBSERVER: QuotaObserver = NoObserver()


ReloadObserver = Callable[[str], None]
"""Told when a worker reloaded a cached kind of shared state (`channels`, `options`, `records`:
quota/versions.py) because its version moved."""


def ignore_reload(kind: str) -> None:
    """The default `ReloadObserver`: nothing is counted."""
