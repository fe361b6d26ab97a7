"""The quota primitives in process (embedded mode): the Lua scripts' logic over dictionaries.

Each method runs without awaiting in between, so on one event loop it is as atomic as a Lua script.
The stream is a list; it lives as long as the process, so the sync should run often (it also runs on
shutdown) — a `kill -9` loses at most one sync interval of settled usage, exactly like Redis without AOF.

Settled and released holds leave a marker (`_Markers`), so that a second settle or release of the same
hold changes nothing. A marker only has to outlive any repetition of that step, and that is bounded by the
hold's lease: only the call that reserved a hold knows its id, it settles or releases it once as it ends
(the pipeline's one settle-or-release), and a repetition — a retry, or a bug — follows the step it
repeats at once; no step of a call comes later than its hold's lease after the hold was last renewed
without the hold being swept first (and a settle after the sweep is charged in full by design). So the
markers are kept one lease (`marker_ms`, at least a minute) instead of Redis's hour, as an ordered set
with per-second expiry buckets instead of a timestamp each: at 1,000 calls/s and the default 600 s lease
that is about 600,000 markers of ~100 bytes (~60 MB) at most, where an hour of 147-byte markers grew by
~0.5 GB.
"""

from __future__ import annotations

import asyncio
import bisect
import secrets
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from typing import Any

import ujson

from backend.base import Limit
from backend.memory import MemoryBackend
from backend.versions import UNKNOWN, Versions
from quota.store import CursorMoved, EpochChanged, NeedsLoad
from quota.types import BALANCE_MAX, ZERO_ID, Account, AdjustMode, Entry, RateLimited, Reservation, stream_id

READ_SLICE = 128  # logs decoded per turn of the event loop by `read` (a short stretch of the loop)

MARKER_TTL_MS = 600_000  # the default lease (QUOTA_HOLD_TIMEOUT); see the module docstring
CHARGED_TTL_MS = 60_000  # as reserve.lua's q:rl:{h}
IDEMPOTENCY_TTL_MS = 7 * 86_400_000
MAX_EXACT = BALANCE_MAX  # the same bound as the Lua scripts, whose numbers are doubles


@dataclass
class _Hold:
    user_id: int
    key_id: int
    limited: bool
    amount: int
    expires_ms: int


class _Bits:
    """Counters of one hold-id prefix, as a bitmap from `lo` (a multiple of 8)."""

    __slots__ = ("bits", "lo")

    SPAN = 1 << 27  # at most 16 MB of bits ahead of `lo`; an id beyond it goes to the plain set

    def __init__(self, counter: int) -> None:
        self.lo = counter - counter % 8
        self.bits = bytearray()

    def has(self, counter: int) -> bool:
        i = counter - self.lo
        return 0 <= i < 8 * len(self.bits) and bool(self.bits[i >> 3] >> (i & 7) & 1)

    def add(self, counter: int) -> bool:
        i = counter - self.lo
        if i < 0 or i >= self.SPAN:
            return False
        need = (i >> 3) + 1 - len(self.bits)
        if need > 0:
            self.bits.extend(bytes(need))
        self.bits[i >> 3] |= 1 << (i & 7)
        return True

    def forget_below(self, counter: int) -> None:
        drop = (counter - self.lo) >> 3
        if drop > 0:
            del self.bits[:drop]
            self.lo += 8 * drop
        rest = counter - self.lo
        if 0 < rest < 8 and self.bits:
            self.bits[0] &= 0xFF ^ ((1 << rest) - 1)
        empty = next((n for n, byte in enumerate(self.bits) if byte), len(self.bits))
        if empty:  # nothing marked at the front: move past it
            del self.bits[:empty]
            self.lo += 8 * empty

    def __len__(self) -> int:
        return sum(byte.bit_count() for byte in self.bits)


class _Markers:
    """Hold ids settled or released, each kept at least `ttl_ms` after it was added.

    The engine's hold ids are a 16-hex prefix and an 8-hex counter (`quota/engine.py` `HoldIds`),
    handed out in order: their markers are bits of a bitmap per prefix (an eighth of a byte each, where a
    dict entry and the id's string took ~100 bytes: at the default 600 s lease and 3,500 calls/s that is
    ~260 KB instead of ~210 MB). A marker of the bitmap is forgotten by trimming the bitmap's front: each
    second's bucket remembers the highest counter marked by then, and once the bucket is `ttl_ms` old
    every counter up to it is dropped — markers added by then, and holds reserved by then but not settled
    yet, whose later markers (below the trimmed front) go to the plain set instead. Any other id goes to
    the plain set: a dict used as an ordered set with its own per-second buckets, expired from the front.
    A clock that steps back only keeps a marker longer, never drops one early."""

    __slots__ = ("_bits", "_buckets", "_ids", "_marks", "ttl_ms")

    def __init__(self, ttl_ms: int) -> None:
        self.ttl_ms = ttl_ms
        self._ids: dict[str, None] = {}
        self._buckets: deque[list[int]] = deque()  # [expiry second, how many of _ids]
        self._bits: dict[str, _Bits] = {}
        self._marks: deque[tuple[int, str, int]] = deque()  # (expiry second, prefix, highest counter)

    @staticmethod
    def _split(hold_id: str) -> tuple[str, int] | None:
        if len(hold_id) != 24:
            return None
        try:
            return hold_id[:16], int(hold_id[16:], 16)
        except ValueError:
            return None

    def __contains__(self, hold_id: str) -> bool:
        split = self._split(hold_id)
        if split is not None:
            bits = self._bits.get(split[0])
            if bits is not None and bits.has(split[1]):
                return True
        return hold_id in self._ids

    def __len__(self) -> int:
        return len(self._ids) + sum(len(bits) for bits in self._bits.values())

    def add(self, hold_id: str, now_ms: int) -> None:
        if hold_id in self:
            return
        second = (now_ms + self.ttl_ms) // 1000 + 1  # expires once that second has begun
        split = self._split(hold_id)
        if split is not None:
            prefix, counter = split
            bits = self._bits.get(prefix)
            if bits is None:
                bits = self._bits[prefix] = _Bits(counter)
            if bits.add(counter):
                marks = self._marks
                if marks and marks[-1][0] >= second and marks[-1][1] == prefix:
                    if counter > marks[-1][2]:
                        marks[-1] = (marks[-1][0], prefix, counter)
                else:
                    marks.append((second, prefix, counter))
                return
        self._ids[hold_id] = None
        buckets = self._buckets
        if buckets and buckets[-1][0] >= second:
            buckets[-1][1] += 1
        else:
            buckets.append([second, 1])

    def expire(self, now_ms: int) -> None:
        buckets, due = self._buckets, 0
        while buckets and buckets[0][0] * 1000 <= now_ms:
            due += buckets.popleft()[1]
        if due:
            for hold_id in list(islice(self._ids, due)):
                del self._ids[hold_id]
        marks = self._marks
        while marks and marks[0][0] * 1000 <= now_ms:
            _, prefix, counter = marks.popleft()
            bits = self._bits.get(prefix)
            if bits is not None:
                bits.forget_below(counter + 1)
                if not bits.bits and not any(m[1] == prefix for m in marks):
                    del self._bits[prefix]


class MemoryQuotaStore:
    """One process's quota state: a single partition (nothing to spread over nodes; quota/partitions.py)."""

    partitions = 1

    def __init__(self, clock_ms: Callable[[], int] = lambda: int(time.time() * 1000), *,
                 versions: Callable[[], Versions] = lambda: UNKNOWN, limiter: MemoryBackend | None = None,
                 marker_ms: int = MARKER_TTL_MS) -> None:
        self._now = clock_ms
        self._versions = versions
        self._limiter = limiter  # whose rate limits `reserve(limits=…)`, `settle(charges=…)` use
        self._live: dict[tuple[Account, int], int] = {}
        self._held: dict[tuple[Account, int], int] = {}
        self._holds: dict[str, _Hold] = {}
        # settled/released markers (one lease, see the module docstring), adjustment results (7 days)
        self._done = _Markers(max(60_000, marker_ms))
        self._adjusted: dict[str, tuple[int, tuple[int, int, int]]] = {}
        self._charged: dict[str, int] = {}  # holds refused by the balance after their limits were charged
        self._stream: list[Entry] = []  # their logs are in `_logs`, as JSON (see `_append`)
        self._logs: list[str | None] = []
        self._ids: list[tuple[int, int]] = []  # the stream's ids, parsed (ascending): found by bisection
        self._last_id = (0, 0)
        self._cursor: str | None = None
        self._epoch = secrets.token_hex(8)  # one incarnation per process

    def partition(self, user_id: int) -> int:
        return 0

    async def setup(self, deployment: str) -> None:
        """Nothing to check: the state lives in this process, which has one database (embedded mode)."""
        return None

    def _append(self, entry: Entry, log: dict[str, Any] | None) -> None:
        """Queue `entry` with `log` kept as compact JSON, read back by `read`: a copy the caller cannot
        change, in a third of the memory of the dict (the stream holds everything not synced yet, which
        grows under a load the sync falls behind) and for less CPU than copying the dict."""
        self._stream.append(entry)
        self._logs.append(ujson.dumps(log, ensure_ascii=False, escape_forward_slashes=False)
                          if log is not None else None)
        self._ids.append(self._last_id)

    def _next_id(self) -> str:
        ms = self._now()
        last_ms, last_seq = self._last_id
        self._last_id = (ms, 0) if ms > last_ms else (last_ms, last_seq + 1)
        return f"{self._last_id[0]}-{self._last_id[1]}"

    def _add(self, account: Account, account_id: int, delta: int) -> int | None:
        key = (account, account_id)
        if key not in self._live:
            return None
        self._live[key] += delta
        return self._live[key]

    def _limits(self) -> MemoryBackend:
        if self._limiter is None:
            raise ValueError("rate limits need the store built with limiter= (the worker's MemoryBackend)")
        return self._limiter

    async def reserve(self, hold_id: str, user_id: int, key_id: int, key_limited: bool, amount: int,
                      lease_ms: int, limits: Sequence[Limit] = ()
                      ) -> tuple[bool, str, int, int, Versions, str]:
        user = self._live.get(("user", user_id))
        if user is None:
            raise NeedsLoad("user", user_id, user_id)
        key = -1
        if key_limited:
            if ("key", key_id) not in self._live:
                raise NeedsLoad("key", key_id, user_id)
            key = self._live[("key", key_id)]
        if hold_id in self._holds:  # idempotent by hold id, as reserve.lua
            return True, "", user, key, self._versions(), ""
        charged = False
        if limits and hold_id not in self._charged:  # admitted first, in the same step (no await between)
            admitted = self._limits().admit_now(limits)
            if not admitted.allowed:
                raise RateLimited(admitted.retry_after, admitted.refused_by or "", admitted.remaining)
            charged = True
        refused = "user" if amount > 0 and user < amount else (  # a hold of 0 fits any balance (reserve.lua)
            "key" if amount > 0 and key_limited and key < amount else "")
        if refused:
            if charged:  # as reserve.lua: a re-run for this hold id does not charge the limits again
                self._charged[hold_id] = self._now() + CHARGED_TTL_MS
            available = user if refused == "user" else key
            return False, refused, available, available, UNKNOWN, ""
        self._holds[hold_id] = _Hold(user_id, key_id, key_limited, amount, self._now() + lease_ms)
        self._live[("user", user_id)] = user = user - amount
        self._held[("user", user_id)] = self._held.get(("user", user_id), 0) + amount
        if key_limited:
            self._live[("key", key_id)] = key = key - amount
            self._held[("key", key_id)] = self._held.get(("key", key_id), 0) + amount
        return True, "", user, key, self._versions(), ""

    def _drop_hold(self, hold_id: str) -> _Hold | None:
        hold = self._holds.pop(hold_id, None)
        if hold is not None:
            self._held[("user", hold.user_id)] -= hold.amount
            if hold.limited:
                self._held[("key", hold.key_id)] -= hold.amount
        return hold

    async def settle(self, reservation: Reservation, channel_id: int, actual: int, log: dict[str, Any] | None,
                     charges: Sequence[Limit] = ()) -> tuple[bool, int | None, int | None]:
        hold_id, user_id, key_id, key_limited = (reservation.hold_id, reservation.user_id, reservation.key_id,
                                                 reservation.key_limited)
        if hold_id in self._done:
            return False, None, None
        if charges:
            self._limits().charge_now(charges)
        hold = self._drop_hold(hold_id)
        delta = (hold.amount if hold is not None else 0) - actual
        user = self._add("user", user_id, delta)
        key = self._add("key", key_id, delta) if key_limited else None
        self._append(Entry(self._next_id(), "use", user_id, key_id, key_limited, channel_id, actual, hold_id,
                           None), log)
        self._done.add(hold_id, self._now())
        return True, user, key

    def _release(self, hold_id: str, swept: bool) -> bool:
        if hold_id in self._done:
            return False
        hold = self._holds.get(hold_id)
        if hold is None or (swept and hold.expires_ms > self._now()):
            if hold is None and not swept:
                self._done.add(hold_id, self._now())
            return False
        self._drop_hold(hold_id)
        self._add("user", hold.user_id, hold.amount)
        if hold.limited:
            self._add("key", hold.key_id, hold.amount)
        if not swept:
            self._done.add(hold_id, self._now())
        return True

    async def release(self, reservation: Reservation) -> bool:
        return self._release(reservation.hold_id, swept=False)

    async def renew(self, reservation: Reservation, lease_ms: int) -> bool:
        hold = self._holds.get(reservation.hold_id)
        if hold is None:
            return False
        hold.expires_ms = self._now() + lease_ms
        return True

    async def sweep(self, limit: int = 100) -> int:
        now = self._now()
        self._done.expire(now)
        _expire_front(self._charged, now)
        self._adjusted = {r: v for r, v in self._adjusted.items() if v[0] > now}  # few: adjustments only
        expired = [h for h, hold in self._holds.items() if hold.expires_ms <= now][:limit]
        return sum(self._release(h, swept=True) for h in expired)

    async def adjust(self, account: Account, account_id: int, mode: AdjustMode, value: int, ref: str,
                     log: dict[str, Any] | None, allow_negative: bool, *, owner: int = 0
                     ) -> tuple[int, int, int, int]:
        if ref in self._adjusted:
            return (2, *self._adjusted[ref][1])
        live = self._live.get((account, account_id))
        if live is None:
            raise NeedsLoad(account, account_id, owner or account_id)
        held = self._held.get((account, account_id), 0)
        if mode == "add":
            delta = value
        elif mode == "sub":
            if not allow_negative and live < value:
                return 0, live, live, 0
            delta = -value
        else:
            delta = value - held - live
        after = live + delta
        if after + held > MAX_EXACT or after < -MAX_EXACT:  # upward with the holds, as adjust.lua
            return 3, live, live, 0
        self._live[(account, account_id)] = after
        if log is not None:
            log = _copy_json(log)
            for name, text in log.items():
                if isinstance(text, str):
                    log[name] = text.replace("{before}", str(live)).replace("{after}", str(after))
        user_id, key_id = (account_id, 0) if account == "user" else (0, account_id)
        self._append(Entry(self._next_id(), "adj", user_id, key_id, True, 0, delta, ref, None), log)
        self._adjusted[ref] = (self._now() + IDEMPOTENCY_TTL_MS, (live, after, delta))
        return 1, live, after, delta

    async def load(self, account: Account, account_id: int, durable: int, cursor: str, epoch: str, *,
                   owner: int = 0) -> int:
        current = self._live.get((account, account_id))
        if current is not None:
            return current
        if epoch != self._epoch:
            raise EpochChanged()
        if self._cursor is not None and self._cursor != cursor:
            raise CursorMoved()
        return self._set_from(account, account_id, durable, cursor)

    async def load_locked(self, account: Account, account_id: int, durable: int, cursor: str, *,
                          owner: int = 0) -> tuple[int, str]:
        current = self._live.get((account, account_id))
        if current is not None:
            return current, self._epoch
        return self._set_from(account, account_id, durable, cursor), self._epoch

    def _set_from(self, account: Account, account_id: int, durable: int, cursor: str) -> int:
        after = stream_id(cursor)
        pending = 0
        for entry in self._stream:
            if stream_id(entry.id) <= after:
                continue
            mine = entry.user_id == account_id if account == "user" else (
                entry.key_id == account_id and entry.key_limited)
            if mine:
                pending += entry.amount if entry.kind == "adj" else -entry.amount
        value = durable + pending - self._held.get((account, account_id), 0)
        self._live[(account, account_id)] = value
        return value

    async def live(self, account: Account, ids: list[int], owners: Sequence[int] = ()) -> dict[int, int]:
        return {i: self._live[(account, i)] for i in ids if (account, i) in self._live}

    async def ceilings(self, account: Account, ids: list[int], owners: Sequence[int] = ()) -> dict[int, int]:
        return {i: self._live[(account, i)] + self._held.get((account, i), 0) for i in ids
                if (account, i) in self._live}

    async def read(self, partition: int, after: str, count: int) -> tuple[str, list[Entry]]:
        start = bisect.bisect_right(self._ids, stream_id(after))
        epoch, entries, logs = self._epoch, self._stream[start:start + count], self._logs[start:start + count]
        out: list[Entry] = []
        # A whole batch decoded in one go held the serving loop long enough to show in the p99 at
        # concurrency 1 (docs/PERFORMANCE.md#figures-behind-the-code). In slices of READ_SLICE the calls in
        # flight run in between. The slices were taken above: entries appended meanwhile are not in this
        # batch, and `synced` trims only what a sync committed, which this one has not yet.
        for at in range(0, len(entries), READ_SLICE):
            if at:
                await asyncio.sleep(0)
            part = zip(entries[at:at + READ_SLICE], logs[at:at + READ_SLICE], strict=True)
            out.extend(entry if raw is None else replace(entry, log=ujson.loads(raw)) for entry, raw in part)
        return epoch, out

    async def epoch(self, partition: int) -> str | None:
        return self._epoch

    async def synced(self, partition: int, cursor: str) -> None:
        if self._cursor is not None and stream_id(cursor) <= stream_id(self._cursor):
            return
        self._cursor = cursor
        cut = bisect.bisect_left(self._ids, stream_id(cursor))  # keeps the entries at or above it
        del self._stream[:cut]
        del self._logs[:cut]
        del self._ids[:cut]

    async def pending(self, partition: int | None = None) -> int:
        return len(self._stream)

    async def open_holds(self) -> int:
        return len(self._holds)


def _copy_json(value: Any) -> Any:
    """A copy of a JSON-shaped value (dicts, lists, tuples of scalars), as detached from the caller's as
    the Redis store's JSON text is; a fraction of what `copy.deepcopy` costs
    (docs/PERFORMANCE.md#figures-behind-the-code)."""
    kind = type(value)
    if kind is dict:
        return {k: _copy_json(v) for k, v in value.items()}
    if kind is list:
        return [_copy_json(v) for v in value]
    if kind is tuple:
        return tuple(_copy_json(v) for v in value)
    return value


def _expire_front(marks: dict[str, int], now: int) -> None:
    """Drop the markers that expired. Each is written once with the same lifetime, so the dict's
    insertion order is their expiry order and only its front is looked at. (The whole dict was rebuilt on
    every sweep, every 5 s, and it holds the calls of the last hour: a long stall of the event loop per
    sweep once it held a million, docs/PERFORMANCE.md#figures-behind-the-code.) A clock that stepped back
    only keeps a marker longer, never drops one early."""
    gone = []
    for hold_id, expires in marks.items():
        if expires > now:
            break
        gone.append(hold_id)
    for hold_id in gone:
        del marks[hold_id]


__all__ = ["ZERO_ID", "MemoryQuotaStore"]
