"""Values the quota engine passes around, and its exceptions.

    QuotaError
     ├── InsufficientQuota      the hold does not fit the user's balance or the key's remaining quota
     ├── SubtractTooLarge       an admin subtract above the live balance (nothing changed)
     ├── BalanceOutOfRange      the balance would leave ±2^53 (nothing changed)
     ├── BalanceUnknown         the account does not exist in the durable store (cannot be loaded)
     └── RateLimited            a rate limit given to `reserve` refused the call (nothing changed)

`BackendUnavailable` (backend.base) is raised when the store cannot be reached.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Account = Literal["user", "key"]

BALANCE_MAX = 2**53 - 1  # the largest balance the stores compute exactly (Lua numbers are doubles)
AdjustMode = Literal["add", "sub", "set"]


class QuotaError(Exception):
    pass


class InsufficientQuota(QuotaError):
    def __init__(self, account: Account, available: int) -> None:
        super().__init__(f"insufficient {account} quota (available {available})")
        self.account = account
        self.available = available


class SubtractTooLarge(QuotaError):
    def __init__(self, available: int) -> None:
        super().__init__(f"cannot subtract more than the live balance ({available})")
        self.available = available


class BalanceOutOfRange(QuotaError):
    def __init__(self, available: int) -> None:
        super().__init__(f"the balance would exceed the largest supported amount ({BALANCE_MAX})")
        self.available = available


class BalanceUnknown(QuotaError):
    def __init__(self, account: Account, account_id: int) -> None:
        super().__init__(f"no such {account}: {account_id}")
        self.account = account
        self.account_id = account_id


class RateLimited(QuotaError):
    """A limit passed to `reserve(limits=…)` refused: nothing was held or charged. `retry_after` is the
    longest wait (seconds), `refused_by` that limit's key, `remaining` what is free now (the minimum)."""

    def __init__(self, retry_after: float, refused_by: str, remaining: int) -> None:
        super().__init__(f"rate limited by {refused_by} (retry after {retry_after:.3f} s)")
        self.retry_after = retry_after
        self.refused_by = refused_by
        self.remaining = remaining


@dataclass(frozen=True, slots=True)
class Reservation:
    """A hold on a user's (and maybe a key's) balance; settle or release it exactly once."""

    hold_id: str
    user_id: int
    key_id: int  # 0 = no key
    key_limited: bool  # False for no key or an unlimited key: the key balance is neither checked nor held
    amount: int
    user_balance: int  # live balances right after the hold
    key_balance: int  # -1 when not limited
    # the version counters of the cached shared state as of the hold (backend/versions.py)
    versions: tuple[int, int, int] = (0, 0, 0)
    # the store's incarnation the hold was made in (Redis: the partition's epoch, so that a settle can tell
    # a hold it already settled from one Redis lost with its data); '' where nothing is ever lost
    incarnation: str = ""


@dataclass(frozen=True, slots=True)
class Settlement:
    applied: bool  # False when the reservation was already settled or released
    user_balance: int | None = None  # live balance after it, None when not applied or not loaded
    key_balance: int | None = None


@dataclass(frozen=True, slots=True)
class Adjustment:
    applied: bool  # False when this idempotency key was applied before (then the first result is returned)
    before: int
    after: int
    delta: int


@dataclass(frozen=True, slots=True)
class Entry:
    """One durable record waiting in the stream for the sync.

    kind "use": a settled call — user quota −amount, used_quota +amount, request_count +1; the key's
    remain −amount (when limited) and used_quota +amount; the channel's used_quota +amount; maybe a log.
    kind "adj": a credit/debit/override — the user's (or key's) balance +amount (signed); maybe a log.
    """

    id: str  # stream id "ms-seq", totally ordered
    kind: Literal["use", "adj"]
    user_id: int
    key_id: int
    key_limited: bool
    channel_id: int
    amount: int
    ref: str  # hold id or idempotency key
    log: dict[str, Any] | None = field(default=None)


def stream_id(value: str) -> tuple[int, int]:
    """Order of stream ids ("1700000000000-3")."""
    ms, _, seq = value.partition("-")
    return int(ms or 0), int(seq or 0)


ZERO_ID = "0-0"
