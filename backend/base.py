"""The storage interface of the shared state, split by capability, so that each component asks only for
what it uses:

    KeyValue          short-lived counters and texts (locks, sessions, challenges, progress, memos' copies)
    RateLimits        GCRA rate limits (below)
    VersionCounters   the version counters of cached state, and copies written only while one stands still
    PubSub            broadcasts to every worker and node
    Backend           all of them, with `ping`, `get_int` and `close`: what the app builds (`RedisBackend`,
                      `MemoryBackend`, both implement every capability)

Rate limits are GCRA (generic cell rate algorithm) over one or more `Limit`s, each stored as a single
value per key: its theoretical arrival time (TAT), in whole nanoseconds, that expires when the TAT passes.

Exceptions:

    BackendUnavailable      the store cannot be reached (Redis down, timed out); callers answer 503
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # an annotation only: backend.versions sits above the backends
    from backend.versions import Versions

# A forced charge never pushes a TAT further than this ahead of now (or one period, if longer): the
# arithmetic stays exact in a Lua double (2^53 ns ≈ 104 days) and a huge charge cannot lock a key for years.
MAX_AHEAD_NS = 30 * 86_400 * 1_000_000_000
# The longest `retry_after` reported (2^53 ns ≈ 104 days): only a cost above the count comes near it.
MAX_WAIT_NS = 2**53


# yielded by `subscribe` after each (re)subscription: messages may have been missed before it
SUBSCRIBED = "\x00subscribed"


class BackendUnavailable(RuntimeError):
    """The shared store did not answer in time; nothing was changed that the caller can rely on."""


@dataclass(frozen=True, slots=True)
class Limit:
    """`count` units per `period` seconds on `key` (burst = `count`); this request takes `cost` units.

    `count <= 0` means no limit: the limit is skipped. `cost == 0` is a peek: it is refused when not even
    one unit is left, and charges nothing (a tokens-per-minute limit is checked before a call with a
    peek and charged with the actual tokens afterwards).
    """

    key: str
    count: int
    period: float
    cost: int = 1

    def __post_init__(self) -> None:
        if self.cost < 0:
            raise ValueError(f"limit {self.key!r}: cost must be ≥ 0")
        if self.count > 0 and not self.period > 0:
            raise ValueError(f"limit {self.key!r}: period must be > 0")

    @property
    def active(self) -> bool:
        return self.count > 0

    @property
    def interval_ns(self) -> int:
        """The emission interval: one unit frees up every `period / count` (whole ns, at least 1)."""
        return max(1, round(self.period * 1e9 / self.count))


def active_limits(limits: Sequence[Limit]) -> list[Limit]:
    """The limits that limit something, each key at most once (a key twice in one call is a bug)."""
    active = [limit for limit in limits if limit.active]
    keys = [limit.key for limit in active]
    if len(set(keys)) != len(keys):
        raise ValueError(f"gcra: a key appears twice in one call: {keys}")
    return active


@dataclass(frozen=True, slots=True)
class RateResult:
    """Outcome of one GCRA check: allowed or not, what is left of the burst, and when to retry.

    Over several limits: `remaining` is the minimum over them (after this request's charge when allowed,
    what is free now when refused; `NO_LIMIT` when there was none), `retry_after` the longest wait among
    the refusing limits and `refused_by` that limit's key.
    """

    allowed: bool
    remaining: int
    retry_after: float  # seconds; 0 when allowed
    refused_by: str | None = None


NO_LIMIT = 2**63 - 1  # `remaining` when no limit applied


class KeyValue(Protocol):
    """Short-lived keys: counters and texts with a time to live, some of them single-use. Every backend
    has them; without Redis, account security keeps its keys in SQL instead (models/kv.py), so that a
    restart forgets no challenge, code, token or failure count."""

    async def incr(self, key: str, ttl: float) -> int:
        """Increment a counter; its expiry is set when it is created. Returns the new value."""
        ...

    async def ttl(self, key: str) -> float:
        """Seconds until `key` expires; 0 when it does not exist."""
        ...

    async def delete(self, *keys: str) -> None: ...

    async def get_text(self, key: str) -> str | None: ...

    async def set_text(self, key: str, value: str, ttl: float) -> None: ...

    async def set_text_if_absent(self, key: str, value: str, ttl: float) -> bool:
        """Store `value` under `key` for `ttl` seconds only if the key does not exist (one atomic step);
        False (nothing changed) when it does. The building block of `backend.locks.exclusive`."""
        ...

    async def delete_if_equal(self, key: str, value: str) -> bool:
        """Delete `key` only if it holds the text `value` (one atomic step); False when it does not."""
        ...

    async def take_text(self, key: str) -> str | None:
        """Read and delete `key` in one atomic step (GETDEL): of any number of concurrent takers on any
        worker or node exactly one gets the text, the others None. The single-use secrets (challenges,
        e-mail codes, reset tokens) are taken with it."""
        ...


class RateLimits(Protocol):
    """GCRA rate limits (module docstring): the guard's limits per IP and account, the e-mail sending limits,
    the log search's, the model calls' (quota/ratelimit.py) and a channel key's pick."""

    async def gcra(self, key: str, limit: int, period: float, cost: int = 1) -> RateResult:
        """Admit `cost` units against `limit` per `period` seconds (burst = `limit`)."""
        ...

    async def gcra_many(self, limits: Sequence[Limit]) -> RateResult:
        """Check every limit, then charge all of them only if every one admits (one atomic step).

        Limits with `count <= 0` are skipped; peeks (`cost == 0`) are checked and never charged.
        """
        ...

    async def gcra_charge(self, *limits: Limit) -> None:
        """Charge each limit its `cost` unconditionally, even past the limit (the key's expiry follows)."""
        ...


class VersionCounters(Protocol):
    """The version counters of the shared state workers cache (backend/versions.py), and the shared copies
    written only while a counter has not moved (backend/records.py)."""

    async def versions(self) -> Versions:
        """The counters, in the order of `backend.versions.NAMES`."""
        ...

    async def bump(self, name: str) -> int:
        """Increment one version counter; returns its new value (never below one handed out before)."""
        ...

    async def get_text_versioned(self, key: str, name: str) -> tuple[str | None, int]:
        """`get_text(key)` and the version counter `name`, read together (one round trip)."""
        ...

    async def set_text_if_version(self, key: str, value: str, ttl: float, name: str, version: int) -> bool:
        """`set_text` only if counter `name` still equals `version`; False (nothing stored) otherwise."""
        ...


class PubSub(Protocol):
    """A broadcast channel to every worker and node of the deployment (backend/broadcasts.py)."""

    async def publish(self, channel: str, message: str) -> None:
        """Deliver `message` to every subscriber of `channel` on every worker and node of this deployment
        (the same store: with Redis, the same server, database and key prefix), and nowhere else."""
        ...

    def subscribe(self, *channels: str) -> AsyncIterator[tuple[str, str]]:
        """Yield `(channel, message)` until cancelled; `("", SUBSCRIBED)` after every (re)subscription,
        so that the subscriber can reload what it may have missed while it was not listening."""
        ...


class Backend(KeyValue, RateLimits, VersionCounters, PubSub, Protocol):
    """The whole store — short-lived keys, rate limits, version counters and a broadcast channel — shared by
    every worker that uses it: what the app builds (`RedisBackend`, `MemoryBackend`) and hands to each
    component as the capability it asks for."""

    async def ping(self) -> None: ...

    async def get_int(self, key: str) -> int:
        """The counter `key` (`incr`), 0 when it does not exist."""
        ...

    async def close(self) -> None: ...
