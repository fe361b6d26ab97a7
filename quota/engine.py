"""The public API of quota accounting: reserve → settle | release, and credit / debit / set.

Every change of a balance goes through here (docs/API.md#quota), on top of a `QuotaStore` (Redis or in
process) and a `BalanceSource` (the durable balances in SQL, read only to load an account the store has
not seen yet — never on the hot path once it is loaded).

The protocol, for each user and each limited API key:

    live = durable + unsynced entries − open holds

* reserve   holds `amount` on the user and the key (refused without any change if it does not fit)
* settle    turns the hold into the actual cost and queues the usage (log + counters) for the sync
* release   returns the hold
* credit / debit / set
            change the live balance once per idempotency key and queue the same change for SQL; `set`
            (an admin override to X) becomes the delta X − holds − live: the balance is X as of that
            moment (usage settled before it, synced or not, is absorbed, and stays in the logs and
            counters); calls in flight when it ran are charged on top of X
"""

from __future__ import annotations

import asyncio
import os
import secrets
import weakref
from collections.abc import Awaitable, Callable, Sequence
from time import perf_counter
from typing import Any, Protocol

from backend.base import Limit, active_limits
from quota.observer import NO_OBSERVER, QuotaObserver, ReserveResult, SettleResult
from quota.partitions import owner_of
from quota.store import CursorMoved, EpochChanged, NeedsLoad, QuotaStore
from quota.types import (
    BALANCE_MAX,
    Account,
    Adjustment,
    AdjustMode,
    BalanceOutOfRange,
    BalanceUnknown,
    InsufficientQuota,
    RateLimited,
    Reservation,
    Settlement,
    SubtractTooLarge,
)

LOAD_ATTEMPTS = 40


class HoldIds:
    """Hold ids: 24 hex characters, this process's random prefix (64 bits, drawn at start, after a fork,
    and again every 2^32 holds) and a counter — unique across processes and nodes like 96 random bits
    (two prefixes collide with odds of n²/2^65), without a call for randomness (a system call, a third
    of an in-process reservation's CPU) per hold. They are never shown to a caller.

    Each engine owns one; a forked child draws a new prefix before it makes its first hold."""

    __slots__ = ("__weakref__", "count", "prefix")

    def __init__(self) -> None:
        self.reset()
        me = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _reset(me))

    def reset(self) -> None:
        self.prefix = secrets.token_hex(8)
        self.count = 0

    def next(self) -> str:
        count = self.count
        if count >= 0xFFFF_FFFF:
            self.reset()
            count = 0
        self.count = count + 1
        return f"{self.prefix}{count:08x}"


def _reset(ref: weakref.ref[HoldIds]) -> None:
    hold_ids = ref()
    if hold_ids is not None:
        hold_ids.reset()


LockedLoad = Callable[[int, str], Awaitable[tuple[int, str]]]


class BalanceSource(Protocol):
    async def durable(self, account: Account, account_id: int, partition: int) -> tuple[int, str, str] | None:
        """(balance, the partition's sync cursor and epoch) read in one statement; None when the account
        does not exist."""
        ...

    async def locked(self, account: Account, account_id: int, partition: int, load: LockedLoad
                     ) -> int | None:
        """Under the partition's SQL cursor row lock: read (balance, cursor), call `load`, record the epoch
        it returns as the one SQL now follows; the live balance, None when the account does not exist."""
        ...


class QuotaEngine:
    """`observer` (quota/observer.py) is told how each reservation, settlement and release ended and how
    long it took; the default counts nothing."""

    def __init__(self, store: QuotaStore, source: BalanceSource, *, lease_seconds: float = 600.0,
                 observer: QuotaObserver = NO_OBSERVER) -> None:
        self.store = store
        self.source = source
        self.lease_ms = int(lease_seconds * 1000)
        self.hold_ids = HoldIds()
        self.observer = observer

    def partition(self, user_id: int) -> int:
        """The partition of user `user_id` and its API keys (quota/partitions.py)."""
        return self.store.partition(user_id)

    async def _load(self, account: Account, account_id: int, owner: int) -> int:
        partition = self.store.partition(owner)
        for attempt in range(LOAD_ATTEMPTS):
            durable = await self.source.durable(account, account_id, partition)
            if durable is None:
                raise BalanceUnknown(account, account_id)
            try:
                return await self.store.load(account, account_id, *durable, owner=owner)
            except CursorMoved:
                await asyncio.sleep(min(0.005 * (attempt + 1), 0.1))
            except EpochChanged:
                return await self._load_locked(account, account_id, owner)
        raise CursorMoved()

    async def _load_locked(self, account: Account, account_id: int, owner: int) -> int:
        """The store lost its data (or never synced): load while no sync batch can commit."""

        async def load(balance: int, cursor: str) -> tuple[int, str]:
            return await self.store.load_locked(account, account_id, balance, cursor, owner=owner)

        live = await self.source.locked(account, account_id, self.store.partition(owner), load)
        if live is None:
            raise BalanceUnknown(account, account_id)
        return live

    async def reserve(self, user_id: int, amount: int, *, key_id: int = 0, key_limited: bool = False,
                      limits: Sequence[Limit] = ()) -> Reservation:
        """Hold `amount` (≥ 0); raises InsufficientQuota without changing anything when it does not fit.
        A hold of 0 (a free call) always fits, even a balance below zero; it still makes the call's
        settlement exactly-once.

        `limits` (rate limits, as for `Backend.gcra_many`) admit the call first, in the same atomic step
        and round trip: RateLimited when one refuses (nothing held, nothing charged); once admitted they
        stay charged even if InsufficientQuota follows — as a separate admission before the reservation
        would, but one Lua call instead of two. The store must share the rate limiter's state (Redis: the
        same prefix; in process: built with `limiter=`)."""
        if amount < 0:
            raise ValueError("amount must be ≥ 0")
        started = perf_counter()
        try:
            reservation = await self._reserve(user_id, amount, key_id, key_limited and key_id > 0, limits)
        except InsufficientQuota:
            self.observer.reserved(ReserveResult.REFUSED_QUOTA, perf_counter() - started)
            raise
        except RateLimited:
            self.observer.reserved(ReserveResult.REFUSED_RATE, perf_counter() - started)
            raise
        except Exception:
            self.observer.reserved(ReserveResult.ERROR, perf_counter() - started)
            raise
        self.observer.reserved(ReserveResult.HELD, perf_counter() - started)
        return reservation

    async def _reserve(self, user_id: int, amount: int, key_id: int, limited: bool, limits: Sequence[Limit]
                       ) -> Reservation:
        hold_id = self.hold_ids.next()
        active = active_limits(limits)
        for _ in range(3):
            try:
                ok, refused, user, key, versions, incarnation = await self.store.reserve(
                    hold_id, user_id, key_id, limited, amount, self.lease_ms, active)
            except NeedsLoad as missing:
                await self._load(missing.account, missing.account_id, missing.owner)
                continue
            if not ok:
                raise InsufficientQuota("user" if refused == "user" else "key", user)
            return Reservation(hold_id, user_id, key_id, limited, amount, user, key, versions, incarnation)
        raise CursorMoved()

    async def settle(self, reservation: Reservation, actual: int, *, channel_id: int = 0,
                     log: dict[str, Any] | None = None, charges: Sequence[Limit] = ()) -> Settlement:
        """Charge `actual` instead of the hold and queue the usage; a second call changes nothing.

        `charges` (rate limits, as for `Backend.gcra_charge`: forced, usage that happened) are charged in
        the same atomic step, only when this settlement applies — so exactly once, with no round trip of
        their own."""
        if actual < 0:
            raise ValueError("actual cost must be ≥ 0")
        started = perf_counter()
        try:
            applied, user, key = await self.store.settle(
                reservation, channel_id, actual, log,
                [limit for limit in active_limits(charges) if limit.cost > 0],
            )
        except Exception:
            self.observer.settled(SettleResult.ERROR, perf_counter() - started)
            raise
        self.observer.settled(SettleResult.APPLIED if applied else SettleResult.DUPLICATE,
                              perf_counter() - started)
        return Settlement(applied, user, key)

    async def release(self, reservation: Reservation) -> bool:
        """Return the hold; False (nothing changed) when it was already settled, released or swept."""
        started = perf_counter()
        try:
            released = await self.store.release(reservation)
        except Exception:
            self.observer.settled(SettleResult.ERROR, perf_counter() - started)
            raise
        self.observer.settled(SettleResult.RELEASED if released else SettleResult.DUPLICATE,
                              perf_counter() - started)
        return released

    async def renew(self, reservation: Reservation) -> bool:
        return await self.store.renew(reservation, self.lease_ms)

    async def holds_in_flight(self) -> int:
        """Holds reserved and not yet settled, released or swept, in the whole store."""
        return await self.store.open_holds()

    async def sweep(self) -> int:
        released = await self.store.sweep()
        if released:
            self.observer.swept(released)
        return released

    async def _adjust(self, account: Account, account_id: int, mode: AdjustMode, value: int, ref: str,
                      log: dict[str, Any] | None, allow_negative: bool = False, owner: int = 0,
                      load: bool = True) -> Adjustment:
        owner = owner_of(account, account_id, owner)
        for _ in range(3):
            try:
                status, before, after, delta = await self.store.adjust(
                    account, account_id, mode, value, ref, log, allow_negative, owner=owner
                )
            except NeedsLoad:
                if not load:
                    raise
                await self._load(account, account_id, owner)
                continue
            if status == 0:
                raise SubtractTooLarge(before)
            if status == 3:
                raise BalanceOutOfRange(before)
            return Adjustment(status == 1, before, after, delta)
        raise CursorMoved()

    # `owner`: for a key account, the user id of the key's owner (the partition the key lives in).
    # `load=False`: an account the store has not loaded raises NeedsLoad instead of being loaded from SQL —
    # for a caller holding a SQL row lock, which must not wait for another SQL connection (the load's).
    # A raise (credit, or a set above the balance) is refused with BalanceOutOfRange when the balance plus
    # the open holds — what it returns to when the calls in flight end — would pass BALANCE_MAX.

    async def credit(self, account: Account, account_id: int, amount: int, *, ref: str,
                     log: dict[str, Any] | None = None, owner: int = 0, load: bool = True) -> Adjustment:
        """Add `amount` > 0 once per `ref` (redemption code, order, admin request …)."""
        if amount <= 0:
            raise ValueError("amount must be > 0")
        return await self._adjust(account, account_id, "add", amount, ref, log, owner=owner, load=load)

    async def debit(self, account: Account, account_id: int, amount: int, *, ref: str,
                    log: dict[str, Any] | None = None, allow_negative: bool = False,
                    owner: int = 0, load: bool = True) -> Adjustment:
        """Subtract `amount` > 0 once per `ref`; SubtractTooLarge above the live balance."""
        if amount <= 0:
            raise ValueError("amount must be > 0")
        return await self._adjust(account, account_id, "sub", amount, ref, log, allow_negative, owner, load)

    async def set(self, account: Account, account_id: int, value: int, *, ref: str,
                  log: dict[str, Any] | None = None, owner: int = 0, load: bool = True) -> Adjustment:
        """Override the balance to `value` ≥ 0 as of now; calls in flight are charged on top of it."""
        if value < 0:
            raise ValueError("value must be ≥ 0")
        return await self._adjust(account, account_id, "set", value, ref, log, owner=owner, load=load)

    async def can_credit(self, account: Account, account_id: int, amount: int, *, owner: int = 0) -> bool:
        """Whether `credit(amount)` would be taken now: the balance with its open holds plus `amount`
        stays within `BALANCE_MAX` (loading the account on first use; BalanceUnknown when it does not
        exist). Only a check: a credit that lands in between may still fill the room first."""
        owner = owner_of(account, account_id, owner)
        await self.balance(account, account_id, owner=owner)  # loaded
        ceiling = (await self.ceilings(account, [account_id], [owner])).get(account_id)
        if ceiling is None:  # lost again meanwhile: the balance it loads with has no holds
            ceiling = await self.balance(account, account_id, owner=owner)
        return ceiling + amount <= BALANCE_MAX

    async def ceilings(self, account: Account, ids: list[int], owners: Sequence[int] = ()) -> dict[int, int]:
        """The live balance plus the open holds of those accounts that are loaded (nothing is loaded): the
        balance each returns to if every call in flight is released, which a credit must keep within
        `BALANCE_MAX`."""
        return await self.store.ceilings(account, ids, owners)

    async def balance(self, account: Account, account_id: int, *, owner: int = 0) -> int:
        """The live balance, loading it from SQL on first use."""
        owner = owner_of(account, account_id, owner)
        live = await self.store.live(account, [account_id], [owner])
        if account_id in live:
            return live[account_id]
        return await self._load(account, account_id, owner)

    async def balances(self, account: Account, ids: list[int], owners: Sequence[int] = ()) -> dict[int, int]:
        """Live balances of those accounts that are loaded (one round trip; nothing is loaded). `owners`:
        for key accounts, each key's owner, in the order of `ids`."""
        return await self.store.live(account, ids, owners)
