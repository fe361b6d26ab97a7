"""What the quota engine and its sweeper tell an observer.

`quota/` imports neither server/ nor prometheus: whoever builds the engine (server/context.py,
server/quota_sync.py) passes it an observer explicitly; server/metrics/ implements it with Prometheus
counters. The default, `NO_OBSERVER`, does nothing, so the engine works as before for a caller that does
not measure (scripts, tests of the engine itself). (The store's failures and the reloads of cached state
are told to the observers of backend/observer.py.)

The calls sit on the model call's hot path (a reservation and a settlement per call): an observer's
method must be cheap and must never raise.
"""

from __future__ import annotations

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
