"""The storage interface every engine strategy is written against.

Exceptions:

    BackendUnavailable      the store cannot be reached (Redis down, timed out); callers answer 503
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol


class BackendUnavailable(RuntimeError):
    """The shared store did not answer in time; nothing was changed that the caller can rely on."""


@dataclass(frozen=True, slots=True)
class RateResult:
    """Outcome of one GCRA check: allowed or not, what is left of the burst, and when to retry."""

    allowed: bool
    remaining: int
    retry_after: float  # seconds; 0 when allowed


class Backend(Protocol):
    """Counters, GCRA rate limits and a broadcast channel, shared by every worker that uses the store."""

    async def ping(self) -> None: ...

    async def gcra(self, key: str, limit: int, period: float, cost: int = 1) -> RateResult:
        """Admit `cost` units against `limit` per `period` seconds (burst = `limit`)."""
        ...

    async def incr(self, key: str, ttl: float) -> int:
        """Increment a counter; its expiry is set when it is created. Returns the new value."""
        ...

    async def get_int(self, key: str) -> int: ...

    async def ttl(self, key: str) -> float:
        """Seconds until `key` expires; 0 when it does not exist."""
        ...

    async def delete(self, *keys: str) -> None: ...

    async def publish(self, channel: str, message: str) -> None:
        """Deliver `message` to every subscriber of `channel` on every worker and node."""
        ...

    def subscribe(self, *channels: str) -> AsyncIterator[tuple[str, str]]:
        """Yield `(channel, message)` until cancelled."""
        ...

    async def close(self) -> None: ...
