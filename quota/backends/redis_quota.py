"""The quota primitives on Redis: each one a Lua script from `quota/lua/`, loaded once, called by SHA.

Key layout under the backend's prefix (`{id}` = user or key id, `{h}` = hold id):

    q:u:{id}  q:t:{id}     live balance of a user / a limited key (never expire)
    q:uh:{id} q:th:{id}    sum of open holds on it
    q:h:{h}                open hold (hash: user, key, limited, amount, lease end)
    q:holds                open holds by lease end (zset), for the sweeper
    q:d:{h}                settled / released marker (1 h, ≥ 2 leases) — makes settle and release idempotent
    q:rl:{h}               rate limits charged by a reserve the balance refused (60 s): a re-run charges none
    q:i:{ref}              result of an adjustment with idempotency key `ref` (7 days)
    q:stream               settled usage and adjustments waiting for the SQL sync
    q:cursor               last stream id the sync committed to SQL
    q:epoch                this Redis incarnation (random; a flushed Redis gets a new one)
    ver                    version counters of the cached shared state (read by reserve; quota/versions.py)

Use a Redis with `maxmemory-policy noeviction`: a live balance must never be evicted.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Sequence
from typing import Any, cast

import ujson

from quota import lua
from quota.backends.base import MAX_AHEAD_NS, Limit
from quota.backends.redis import LuaScript, RedisBackend, idempotent
from quota.store import CursorMoved, EpochChanged, NeedsLoad
from quota.types import Account, AdjustMode, Entry, RateLimited
from quota.versions import UNKNOWN, Versions

MARKER_TTL = 3_600  # default; must outlive the hold lease plus the longest call
IDEMPOTENCY_TTL = 7 * 86_400
PARSE_SLICE = 64  # stream entries parsed between two turns of the event loop (about 2 ms)


def _encode(log: dict[str, Any]) -> str:
    """A consume log as compact JSON: ujson (a third of `json.dumps`' CPU; the same document once read
    back, which is all the sync does with it)."""
    return ujson.dumps(log, ensure_ascii=True, escape_forward_slashes=False)


def _field(account: Account) -> str:
    return "u" if account == "user" else "t"


class RedisQuotaStore:
    def __init__(self, backend: RedisBackend, *, marker_ttl: int = MARKER_TTL) -> None:
        self.marker_ttl = marker_ttl
        self.r = backend.client
        self.k = backend.key
        self.timeout = backend.timeout
        self.on_error = backend.on_error
        def register(source: str) -> LuaScript:
            return backend.script(source)

        self._reserve = register(lua.load("reserve", "gcra"))
        self._settle = register(lua.load("settle", "gcra"))
        self._release = register(lua.load("release"))
        self._renew = register(lua.load("renew"))
        self._adjust = register(lua.load("adjust"))
        self._load = register(lua.load("load"))
        self._synced = register(lua.load("synced"))
        self._read = register(lua.load("read"))
        self.stream = self.k("q:stream")
        self.holds = self.k("q:holds")
        self.cursor = self.k("q:cursor")
        self.epoch_key = self.k("q:epoch")
        self.versions_key = backend.versions_key

    def _live(self, account: Account, account_id: int) -> str:
        return self.k(f"q:{_field(account)}:{account_id}")

    def _held(self, account: Account, account_id: int) -> str:
        return self.k(f"q:{_field(account)}h:{account_id}")

    def _hold_keys(self, hold_id: str, user_id: int, key_id: int) -> list[str]:
        return [self.k(f"q:h:{hold_id}"), self.holds, self.k(f"q:d:{hold_id}"),
                self._live("user", user_id), self._live("key", key_id),
                self._held("user", user_id), self._held("key", key_id)]

    @idempotent
    async def reserve(self, hold_id: str, user_id: int, key_id: int, key_limited: bool, amount: int,
                      lease_ms: int, limits: Sequence[Limit] = ()) -> tuple[bool, str, int, int, Versions]:
        keys = [self._live("user", user_id), self._live("key", key_id), self.k(f"q:h:{hold_id}"),
                self.holds, self._held("user", user_id), self._held("key", key_id), self.versions_key]
        args: list[Any] = [amount, hold_id, lease_ms, user_id, key_id, 1 if key_limited else 0]
        if limits:
            keys += [self.k(f"q:rl:{hold_id}"), *(self.k(limit.key) for limit in limits)]
            args += _gcra_args(limits)
        res = await self._reserve(keys=keys, args=args)
        status = int(res[0])
        if status == 2:
            raise RateLimited(int(res[1]) / 1e9, limits[int(res[2]) - 1].key, int(res[3]))
        if status == -1:
            account: Account = "user" if res[1] == "user" else "key"
            raise NeedsLoad(account, user_id if account == "user" else key_id)
        if status == 0:
            available = int(res[2])
            return False, str(res[1]), available, available, UNKNOWN
        return True, "", int(res[1]), int(res[2]), (int(res[3]), int(res[4]), int(res[5]))

    @idempotent
    async def settle(self, hold_id: str, user_id: int, key_id: int, key_limited: bool, channel_id: int,
                     actual: int, log: dict[str, Any] | None, charges: Sequence[Limit] = ()
                     ) -> tuple[bool, int | None, int | None]:
        keys = [*self._hold_keys(hold_id, user_id, key_id), self.stream]
        args: list[Any] = [hold_id, actual, user_id, key_id, 1 if key_limited else 0, channel_id,
                           _encode(log) if log is not None else "", self.marker_ttl]
        if charges:
            keys += [self.k(limit.key) for limit in charges]
            args += [MAX_AHEAD_NS, *_gcra_args(charges)]
        res = await self._settle(keys=keys, args=args)
        if int(res[0]) != 1:
            return False, None, None
        return True, int(res[2]) if res[1] else None, int(res[4]) if res[3] else None

    @idempotent
    async def release(self, hold_id: str) -> bool:
        hold = await self.r.hmget(self.k(f"q:h:{hold_id}"), "u", "t")
        user_id, key_id = int(hold[0] or 0), int(hold[1] or 0)
        return await self._release_hold(hold_id, user_id, key_id, "released") == 1

    async def _release_hold(self, hold_id: str, user_id: int, key_id: int, how: str) -> int:
        return int(await self._release(keys=self._hold_keys(hold_id, user_id, key_id),
                                       args=[hold_id, how, self.marker_ttl]))

    @idempotent
    async def renew(self, hold_id: str, lease_ms: int) -> bool:
        return int(await self._renew(keys=[self.k(f"q:h:{hold_id}"), self.holds],
                                     args=[hold_id, lease_ms])) == 1

    @idempotent
    async def sweep(self, limit: int = 100) -> int:
        now_s, now_us = await self.r.time()
        now_ms = int(now_s) * 1000 + int(now_us) // 1000
        expired = cast(list[str], await self.r.zrangebyscore(self.holds, "-inf", now_ms, start=0, num=limit))
        released = 0
        for hold_id in expired:
            hold = await self.r.hmget(self.k(f"q:h:{hold_id}"), "u", "t")
            if hold[0] is None:
                await self.r.zrem(self.holds, hold_id)
                continue
            released += await self._release_hold(hold_id, int(hold[0]), int(hold[1] or 0), "swept")
        return released

    @idempotent
    async def adjust(self, account: Account, account_id: int, mode: AdjustMode, value: int, ref: str,
                     log: dict[str, Any] | None, allow_negative: bool) -> tuple[int, int, int, int]:
        keys = [self.k(f"q:i:{ref}"), self._live(account, account_id), self._held(account, account_id),
                self.stream]
        res = await self._adjust(keys=keys, args=[
            mode, value, _field(account), account_id, ref,
            json.dumps(log, separators=(",", ":"), ensure_ascii=False) if log is not None else "",
            IDEMPOTENCY_TTL, 1 if allow_negative else 0,
        ])
        status = int(res[0])
        if status == -1:
            raise NeedsLoad(account, account_id)
        if status in (0, 3):
            live = int(res[1])
            return status, live, live, 0
        return status, int(res[1]), int(res[2]), int(res[3])

    async def _run_load(self, account: Account, account_id: int, durable: int, cursor: str, locked: bool,
                        epoch: str) -> list[Any]:
        res: list[Any] = await self._load(
            keys=[self._live(account, account_id), self._held(account, account_id), self.stream,
                  self.cursor, self.epoch_key],
            args=[durable, cursor, _field(account), account_id, 1 if locked else 0, epoch],
        )
        return res

    @idempotent
    async def load(self, account: Account, account_id: int, durable: int, cursor: str, epoch: str) -> int:
        res = await self._run_load(account, account_id, durable, cursor, False, epoch)
        if int(res[0]) == -2:
            raise EpochChanged()
        if int(res[0]) != 1:
            raise CursorMoved()
        return int(res[1])

    @idempotent
    async def load_locked(self, account: Account, account_id: int, durable: int, cursor: str
                          ) -> tuple[int, str]:
        res = await self._run_load(account, account_id, durable, cursor, True, secrets.token_hex(8))
        return int(res[1]), str(res[2])

    @idempotent
    async def live(self, account: Account, ids: list[int]) -> dict[int, int]:
        if not ids:
            return {}
        values = await self.r.mget([self._live(account, i) for i in ids])
        return {i: int(v) for i, v in zip(ids, values, strict=True) if v is not None}

    @idempotent
    async def read(self, after: str, count: int) -> tuple[str, list[Entry]]:
        start = "-" if after == "0-0" else f"({after}"
        epoch, rows = await self._read(keys=[self.epoch_key, self.stream],
                                       args=[start, count, secrets.token_hex(8)])
        entries: list[Entry] = []
        for n in range(0, len(rows), PARSE_SLICE):  # parsing 2,000 logs at once held the loop 20 ms
            if n:
                await asyncio.sleep(0)
            entries += [_entry(row[0], dict(zip(row[1][::2], row[1][1::2], strict=True)))
                        for row in rows[n:n + PARSE_SLICE]]
        return str(epoch), entries

    @idempotent
    async def epoch(self) -> str | None:
        value = await self.r.get(self.epoch_key)
        return str(value) if value is not None else None

    @idempotent
    async def synced(self, cursor: str) -> None:
        await self._synced(keys=[self.cursor, self.stream], args=[cursor])

    @idempotent
    async def pending(self) -> int:
        return int(await self.r.xlen(self.stream))

    @idempotent
    async def open_holds(self) -> int:
        return int(await self.r.zcard(self.holds))


def _gcra_args(limits: Sequence[Limit]) -> list[int]:
    """Per limit: emission interval ns, count, cost (the ARGV layout of gcra_multi.lua)."""
    return [n for limit in limits for n in (limit.interval_ns, limit.count, limit.cost)]


def _entry(entry_id: str, f: dict[str, str]) -> Entry:
    return Entry(
        id=entry_id, kind="adj" if f["k"] == "adj" else "use", user_id=int(f["u"]), key_id=int(f["t"]),
        key_limited=f["l"] == "1", channel_id=int(f["c"]), amount=int(f["q"]), ref=f["r"],
        log=json.loads(f["g"]) if f.get("g") else None,
    )
