"""The atomic primitives of quota accounting, implemented by the Redis and the in-process store.

Each method is one indivisible step (one Lua script on Redis). The invariant every step keeps, for each
user and limited key:

    live balance = durable balance (SQL) + sum of unsynced stream entries − sum of open holds

`load` establishes it for an account that has no live balance yet; `reserve`, `settle`, `release` and
`adjust` preserve it; the sync moves stream entries into SQL and advances the cursor.

The *epoch* names one incarnation of a partition of the store (a random token, created when missing). A
Redis that lost its data (FLUSHALL, restart without persistence) gets a new one. The sync applies a batch
only if the epoch it was read under is still current, checked while it holds the partition's SQL cursor
row lock; an account is loaded without that lock only when SQL last synced from the current epoch.
Together these keep a batch read before a loss from landing in SQL after an account was reloaded without
it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from backend.versions import Versions
from quota.types import Account, AdjustMode, Entry, Reservation

if TYPE_CHECKING:
    from backend.base import Limit


class NeedsLoad(Exception):
    """The live balance of `account` is not in the store yet; load it from SQL and retry. `owner`: the
    user the account belongs to (itself for a user), whose partition it lives in."""

    def __init__(self, account: Account, account_id: int, owner: int) -> None:
        super().__init__(f"{account} {account_id} has no live balance")
        self.account = account
        self.account_id = account_id
        self.owner = owner


class SetupRefused(Exception):
    """A store this process cannot use as configured (`setup`): the message says why, in one line, for the
    start-up to print (partitions.PartitionCountChanged, redis_quota.UnsupportedRedis,
    redis_setup.WrongRedisKind, redis_setup.OtherDeployment)."""


class CursorMoved(Exception):
    """The sync advanced while a balance was read from SQL; read it again."""


class EpochChanged(Exception):
    """SQL last synced from another incarnation of the store: load under the SQL cursor lock."""


class QuotaStore(Protocol):
    """The quota state of one deployment, in `partitions` partitions (quota/partitions.py). An account
    lives in its owner's partition: `owner` is the user id of a key account's owner (for a user account,
    0 or the user's own id). Each partition has its own stream, cursor and epoch."""

    partitions: int

    def partition(self, user_id: int) -> int:
        """The partition of user `user_id` and of its API keys."""
        ...

    async def setup(self, deployment: str) -> None:
        """At start, before any other use: record in the store the id of the deployment it belongs to
        (`deployment`, read by the caller from SQL: models/deployment.py) and the number of partitions, or
        refuse (SetupRefused): the store belongs to another deployment (OtherDeployment) or holds another
        number (PartitionCountChanged), or its server is of the other kind than its setting says
        (WrongRedisKind) or too old (UnsupportedRedis)."""
        ...

    async def reserve(self, hold_id: str, user_id: int, key_id: int, key_limited: bool, amount: int,
                      lease_ms: int, limits: Sequence[Limit] = ()
                      ) -> tuple[bool, str, int, int, Versions, str]:
        """(ok, refused_account, user_balance, key_balance, versions, incarnation); raises NeedsLoad.
        `versions` are the counters of the cached shared state (backend/versions.py) as of the hold, UNKNOWN
        when refused; `incarnation` names the store's state the hold is made in (`Reservation`).
        With `limits` (active ones), the call is first admitted through them in the same step: a refusal
        raises RateLimited and changes nothing; once admitted they stay charged even if the balance then
        refuses, and a repeated run for the same hold id does not charge them again."""
        ...

    async def settle(self, hold: Reservation, channel_id: int, actual: int, log: dict[str, Any] | None,
                     charges: Sequence[Limit] = ()) -> tuple[bool, int | None, int | None]:
        """(applied, user_balance, key_balance); idempotent per hold. `hold`: as reserved (its id, user,
        key, whether the key is limited, the amount held). `charges` (active, cost > 0) are charged forced
        in the same step, only when the settlement applies: exactly once."""
        ...

    async def release(self, hold: Reservation) -> bool:
        """Return the whole hold (as reserved); idempotent. False when already settled or released."""
        ...

    async def adjust(self, account: Account, account_id: int, mode: AdjustMode, value: int, ref: str,
                     log: dict[str, Any] | None, allow_negative: bool, *, owner: int = 0
                     ) -> tuple[int, int, int, int]:
        """(status, before, after, delta): status 1 applied, 2 applied earlier (same ref), 0 refused
        (subtract above balance), 3 refused (the balance would leave ±2^53). Raises NeedsLoad."""
        ...

    async def load(self, account: Account, account_id: int, durable: int, cursor: str, epoch: str, *,
                   owner: int = 0) -> int:
        """Set the live balance from SQL + unsynced entries − holds unless present (`cursor`, `epoch`: the
        SQL cursor row of the account's partition).
        Raises CursorMoved (read SQL again) or EpochChanged (use `load_locked`)."""
        ...

    async def load_locked(self, account: Account, account_id: int, durable: int, cursor: str, *,
                          owner: int = 0) -> tuple[int, str]:
        """As `load`, for a caller holding the SQL cursor lock; returns (live, current epoch)."""
        ...

    async def live(self, account: Account, ids: list[int], owners: Sequence[int] = ()) -> dict[int, int]:
        """Live balances of the accounts that have one (`owners`: of key accounts, in the order of `ids`)."""
        ...

    async def ceilings(self, account: Account, ids: list[int], owners: Sequence[int] = ()) -> dict[int, int]:
        """As `live`, plus each account's open holds: the balance it returns to if every call in flight is
        released — what `adjust` keeps within 2^53 − 1 when it raises a balance."""
        ...

    async def renew(self, hold: Reservation, lease_ms: int) -> bool: ...

    async def sweep(self, limit: int = 100) -> int:
        """Release holds whose lease passed (their worker died); returns how many."""
        ...

    async def read(self, partition: int, after: str, count: int) -> tuple[str, list[Entry]]:
        """(epoch, entries of the partition's stream with id > `after`, oldest first)."""
        ...

    async def epoch(self, partition: int) -> str | None:
        """The partition's current epoch (None when the store lost it and nobody made a new one yet)."""
        ...

    async def synced(self, partition: int, cursor: str) -> None:
        """The sync committed the partition's entries up to `cursor`: publish it and trim its stream."""
        ...

    async def pending(self, partition: int | None = None) -> int:
        """Entries in one partition's stream, or in all (synced ones may linger until trimmed)."""
        ...

    async def open_holds(self) -> int:
        """Holds reserved and not yet settled, released or swept (one cheap read: for the metrics)."""
        ...
