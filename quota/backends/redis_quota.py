"""The quota primitives on Redis: each one a Lua script from `quota/lua/`, loaded once, called by SHA.

Key layout under the backend's prefix, in partitions (quota/partitions.py; `{p}` = the hash tag `{p<n>}`
of the account owner's partition, `{id}` = user or key id, `{h}` = hold id):

    q:{p}:u:{id}  q:{p}:t:{id}   live balance of a user / a limited key (never expire)
    q:{p}:uh:{id} q:{p}:th:{id}  sum of open holds on it
    q:{p}:holds                  the partition's open holds by lease end (zset): each hold is its member,
                                 "<hold id> <user> <key> <limited 1|0> <amount>" — every field is known
                                 to the caller that settles, releases or renews it, so a hold needs no
                                 key of its own (a hash created by reserve and deleted by settle cost
                                 Redis about a sixth of the pair's CPU)
    q:{p}:d:{h}                  released / swept marker, and settled for a hold settled after it was swept
                                 or lost (1 h, ≥ 2 leases). A settle that finds its hold writes none: the
                                 hold's removal makes a repeat a no-op, and a repeat that finds no marker
                                 compares the epoch the hold was made in (settle.lua)
    q:{p}:rl:{h}                 limits charged by a reserve the balance refused (60 s): a re-run charges none
    q:{p}:i:{ref}                result of an adjustment with idempotency key `ref` (7 days)
    q:{p}:stream                 the partition's settled usage and adjustments waiting for the SQL sync:
                                 per entry a field `use` or `adj` (its kind) whose value is
                                 "<user> <key> <limited 1|0> <channel> <amount> <ref>", and `g` the log
                                 (JSON) if it has one; written by settle.lua and adjust.lua, read by
                                 `_entry` and load.lua
    q:{p}:cursor                 last stream id of the partition the sync committed to SQL
    q:{p}:epoch                  the partition's incarnation (random; a flushed Redis gets a new one)
    rl:{p}:…                     the rate limits of the owner and its keys (quota/ratelimit.py)
    q:partitions                 the number of partitions, recorded by the first process (`setup`)
    q:deployment                 the id of the deployment (its SQL database) the state belongs to, recorded
                                 by the first process; another is refused (quota/backends/redis_setup.py)
    ver                          version counters of the cached shared state (backend/versions.py)
    ver:{p}                      the partition's copy of them, read by its reservations (RedisBackend.bump)

So every script touches the keys of one partition only. Use a Redis with `maxmemory-policy noeviction`: a
live balance must never be evicted.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Sequence
from typing import Any, cast

import ujson

from backend.base import MAX_AHEAD_NS, Limit
from backend.redis import LuaScript, RedisBackend, idempotent
from backend.versions import UNKNOWN, Versions
from quota import lua
from quota.backends.redis_setup import DEPLOYMENT, PARTITIONS, OtherDeployment, check_kind, claim
from quota.partitions import PartitionCountChanged, owner_of, partition_of, tag
from quota.store import CursorMoved, EpochChanged, NeedsLoad, SetupRefused
from quota.types import Account, AdjustMode, Entry, RateLimited, Reservation

OLDEST_REDIS = (6, 2)  # XTRIM … MINID (synced.lua)
MARKER_TTL = 3_600  # default; must outlive the hold lease plus the longest call
IDEMPOTENCY_TTL = 7 * 86_400
PARSE_SLICE = 64  # stream entries parsed between two turns of the event loop (a short stretch of the loop)


def _encode(log: dict[str, Any]) -> str:
    """A consume log as compact JSON: ujson (a third of `json.dumps`' CPU; the same document once read
    back, which is all the sync does with it)."""
    return ujson.dumps(log, ensure_ascii=True, escape_forward_slashes=False)


def _field(account: Account) -> str:
    return "u" if account == "user" else "t"


class RedisQuotaStore:
    def __init__(self, backend: RedisBackend, *, marker_ttl: int = MARKER_TTL) -> None:
        self.marker_ttl = marker_ttl
        self.partitions = partitions = backend.partitions
        self.r = backend.client
        self.k = backend.key
        self.backend = backend  # its deadline, error observer and retries bound `@idempotent` calls
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
        self.version_copies = backend.version_copies
        self._q = [self.k(f"q:{tag(p)}:") for p in range(partitions)]  # each partition's key prefix
        self.streams = [q + "stream" for q in self._q]
        self.holds = [q + "holds" for q in self._q]
        self.cursors = [q + "cursor" for q in self._q]
        self.epochs = [q + "epoch" for q in self._q]

    def partition(self, user_id: int) -> int:
        return partition_of(user_id, self.partitions)

    async def setup(self, deployment: str) -> None:
        """Refuse a server of the other kind than its setting says (WrongRedisKind), one too old
        (UnsupportedRedis), the store of another deployment than `deployment`, the id the caller read
        from SQL (OtherDeployment), or another number of partitions (PartitionCountChanged); the first
        process records the id and the number (quota/backends/redis_setup.py)."""
        await check_kind(self.backend)
        await self._check_version()
        stored = await claim(self.backend, DEPLOYMENT, deployment)
        if stored != deployment:
            raise OtherDeployment(self.backend.prefix, stored, deployment)
        partitions = int(await claim(self.backend, PARTITIONS, str(self.partitions)))
        if partitions != self.partitions:
            raise PartitionCountChanged(partitions, self.partitions)

    @idempotent
    async def _check_version(self) -> None:
        info: dict[str, Any] = await self.r.info("server")
        # one server's fields, or (a cluster) each node's
        found = [info] if "redis_version" in info else [v for v in info.values() if isinstance(v, dict)]
        for node in found:
            version = str(node.get("redis_version", "0"))
            if redis_version(version) < OLDEST_REDIS:
                raise UnsupportedRedis(version)

    def _live(self, q: str, account: Account, account_id: int) -> str:
        return f"{q}{_field(account)}:{account_id}"

    def _held(self, q: str, account: Account, account_id: int) -> str:
        return f"{q}{_field(account)}h:{account_id}"

    def _hold_keys(self, p: int, hold: Reservation) -> list[str]:
        q = self._q[p]
        return [self.holds[p], f"{q}d:{hold.hold_id}", self._live(q, "user", hold.user_id),
                self._live(q, "key", hold.key_id), self._held(q, "user", hold.user_id),
                self._held(q, "key", hold.key_id)]

    @idempotent
    async def reserve(self, hold_id: str, user_id: int, key_id: int, key_limited: bool, amount: int,
                      lease_ms: int, limits: Sequence[Limit] = ()
                      ) -> tuple[bool, str, int, int, Versions, str]:
        p = self.partition(user_id)
        q = self._q[p]
        keys = [self._live(q, "user", user_id), self._live(q, "key", key_id), self.holds[p],
                self._held(q, "user", user_id), self._held(q, "key", key_id), self.version_copies[p],
                self.epochs[p]]
        args: list[Any] = [amount, _hold(hold_id, user_id, key_id, key_limited, amount), lease_ms,
                           1 if key_limited else 0]
        if limits:
            keys += [f"{q}rl:{hold_id}", *(self.k(limit.key) for limit in limits)]
            args += _gcra_args(limits)
        res = await self._reserve(keys=keys, args=args)
        status = int(res[0])
        if status == 2:
            raise RateLimited(int(res[1]) / 1e9, limits[int(res[2]) - 1].key, int(res[3]))
        if status == -1:
            account: Account = "user" if res[1] == "user" else "key"
            raise NeedsLoad(account, user_id if account == "user" else key_id, user_id)
        if status == 0:
            available = int(res[2])
            return False, str(res[1]), available, available, UNKNOWN, ""
        return True, "", int(res[1]), int(res[2]), (int(res[3]), int(res[4]), int(res[5])), str(res[6])

    @idempotent
    async def settle(self, hold: Reservation, channel_id: int, actual: int, log: dict[str, Any] | None,
                     charges: Sequence[Limit] = ()) -> tuple[bool, int | None, int | None]:
        p = self.partition(hold.user_id)
        keys = [*self._hold_keys(p, hold), self.streams[p], self.epochs[p]]
        entry = _usage(hold.user_id, hold.key_id, hold.key_limited, channel_id, actual, hold.hold_id)
        args: list[Any] = [_member(hold), actual, 1 if hold.key_limited else 0, self.marker_ttl, entry,
                           _encode(log) if log is not None else "", hold.amount, hold.incarnation]
        if charges:
            keys += [self.k(limit.key) for limit in charges]
            args += [MAX_AHEAD_NS, *_gcra_args(charges)]
        res = await self._settle(keys=keys, args=args)
        if int(res[0]) != 1:
            return False, None, None
        return True, int(res[2]) if res[1] else None, int(res[4]) if res[3] else None

    @idempotent
    async def release(self, hold: Reservation) -> bool:
        return await self._release_hold(self.partition(hold.user_id), hold, _member(hold), "released") == 1

    async def _release_hold(self, p: int, hold: Reservation, member: str, how: str) -> int:
        return int(await self._release(keys=self._hold_keys(p, hold),
                                       args=[member, how, self.marker_ttl, hold.amount,
                                             1 if hold.key_limited else 0]))

    @idempotent
    async def renew(self, hold: Reservation, lease_ms: int) -> bool:
        return int(await self._renew(keys=[self.holds[self.partition(hold.user_id)]],
                                     args=[_member(hold), lease_ms])) == 1

    @idempotent
    async def sweep(self, limit: int = 100) -> int:
        now_s, now_us = await self.r.time()
        now_ms = int(now_s) * 1000 + int(now_us) // 1000
        async with self.r.pipeline(transaction=False) as pipe:
            for holds in self.holds:
                pipe.zrangebyscore(holds, "-inf", now_ms, start=0, num=limit)
            due = cast(list[list[str]], await pipe.execute())
        released = 0
        for p, expired in enumerate(due):
            for member in expired:
                released += await self._release_hold(p, _parsed(member), member, "swept")
        return released

    @idempotent
    async def adjust(self, account: Account, account_id: int, mode: AdjustMode, value: int, ref: str,
                     log: dict[str, Any] | None, allow_negative: bool, *, owner: int = 0
                     ) -> tuple[int, int, int, int]:
        owner = owner_of(account, account_id, owner)
        p = self.partition(owner)
        q = self._q[p]
        keys = [f"{q}i:{ref}", self._live(q, account, account_id), self._held(q, account, account_id),
                self.streams[p]]
        res = await self._adjust(keys=keys, args=[
            mode, value, _field(account), account_id, ref,
            json.dumps(log, separators=(",", ":"), ensure_ascii=False) if log is not None else "",
            IDEMPOTENCY_TTL, 1 if allow_negative else 0,
        ])
        status = int(res[0])
        if status == -1:
            raise NeedsLoad(account, account_id, owner)
        if status in (0, 3):
            live = int(res[1])
            return status, live, live, 0
        return status, int(res[1]), int(res[2]), int(res[3])

    async def _run_load(self, account: Account, account_id: int, owner: int, durable: int, cursor: str,
                        locked: bool, epoch: str) -> list[Any]:
        p = self.partition(owner_of(account, account_id, owner))
        q = self._q[p]
        res: list[Any] = await self._load(
            keys=[self._live(q, account, account_id), self._held(q, account, account_id), self.streams[p],
                  self.cursors[p], self.epochs[p]],
            args=[durable, cursor, _field(account), account_id, 1 if locked else 0, epoch],
        )
        return res

    @idempotent
    async def load(self, account: Account, account_id: int, durable: int, cursor: str, epoch: str, *,
                   owner: int = 0) -> int:
        res = await self._run_load(account, account_id, owner, durable, cursor, False, epoch)
        if int(res[0]) == -2:
            raise EpochChanged()
        if int(res[0]) != 1:
            raise CursorMoved()
        return int(res[1])

    @idempotent
    async def load_locked(self, account: Account, account_id: int, durable: int, cursor: str, *,
                          owner: int = 0) -> tuple[int, str]:
        res = await self._run_load(account, account_id, owner, durable, cursor, True, secrets.token_hex(8))
        return int(res[1]), str(res[2])

    @idempotent
    async def live(self, account: Account, ids: list[int], owners: Sequence[int] = ()) -> dict[int, int]:
        if not ids:
            return {}
        if account == "key" and len(owners) != len(ids):
            raise ValueError("the live balances of keys need their owners' user ids")
        names = [self._live(self._q[self.partition(owner if account == "key" else i)], account, i)
                 for i, owner in zip(ids, owners if account == "key" else ids, strict=True)]
        async with self.r.pipeline(transaction=False) as pipe:  # one GET each: the keys span slots
            for name in names:
                pipe.get(name)
            values = await pipe.execute()
        return {i: int(v) for i, v in zip(ids, values, strict=True) if v is not None}

    @idempotent
    async def ceilings(self, account: Account, ids: list[int], owners: Sequence[int] = ()) -> dict[int, int]:
        if not ids:
            return {}
        if account == "key" and len(owners) != len(ids):
            raise ValueError("the ceilings of keys need their owners' user ids")
        pairs = [(self._live(q, account, i), self._held(q, account, i))
                 for i, owner in zip(ids, owners if account == "key" else ids, strict=True)
                 for q in (self._q[self.partition(owner if account == "key" else i)],)]
        async with self.r.pipeline(transaction=False) as pipe:  # two GETs each: the keys span slots
            for live, held in pairs:
                pipe.get(live)
                pipe.get(held)
            values = await pipe.execute()
        return {i: int(live) + int(held or 0)
                for i, live, held in zip(ids, values[0::2], values[1::2], strict=True) if live is not None}

    @idempotent
    async def read(self, partition: int, after: str, count: int) -> tuple[str, list[Entry]]:
        """A batch of the partition's stream after `after`, and the epoch it was read under.

        A plain XRANGE between two reads of the epoch (one pipeline, one slot): when both reads name the
        same epoch, the entries between them are that epoch's data — had Redis lost the partition's data
        meanwhile, the epoch would be gone or a fresh one. Otherwise (no epoch yet, or it changed during
        the read) `read.lua` reads both in one step and creates the epoch. Through Lua each entry's strings
        were copied into the script and back: several times the Redis CPU per entry of the XRANGE
        (docs/PERFORMANCE.md#figures-behind-the-code)."""
        start = "-" if after == "0-0" else f"({after}"
        epoch_key, stream = self.epochs[partition], self.streams[partition]
        async with self.r.pipeline(transaction=False) as pipe:
            pipe.get(epoch_key)
            pipe.xrange(stream, start, "+", count)
            pipe.get(epoch_key)
            epoch, rows, epoch_after = await pipe.execute()
        if epoch is None or epoch != epoch_after:
            epoch, raw = await self._read(keys=[epoch_key, stream], args=[start, count, secrets.token_hex(8)])
            rows = [(row[0], dict(zip(row[1][::2], row[1][1::2], strict=True))) for row in raw]
        entries: list[Entry] = []
        for n in range(0, len(rows), PARSE_SLICE):  # a whole batch at once held the loop too long
            if n:
                await asyncio.sleep(0)
            entries += [_entry(entry_id, fields) for entry_id, fields in rows[n:n + PARSE_SLICE]]
        return str(epoch), entries

    @idempotent
    async def epoch(self, partition: int) -> str | None:
        value = await self.r.get(self.epochs[partition])
        return str(value) if value is not None else None

    @idempotent
    async def synced(self, partition: int, cursor: str) -> None:
        await self._synced(keys=[self.cursors[partition], self.streams[partition]], args=[cursor])

    @idempotent
    async def pending(self, partition: int | None = None) -> int:
        if partition is not None:
            return int(await self.r.xlen(self.streams[partition]))
        async with self.r.pipeline(transaction=False) as pipe:
            for stream in self.streams:
                pipe.xlen(stream)
            return sum(int(n) for n in await pipe.execute())

    @idempotent
    async def open_holds(self) -> int:
        async with self.r.pipeline(transaction=False) as pipe:  # one round trip: every partition's index
            for holds in self.holds:
                pipe.zcard(holds)
            return sum(int(n) for n in await pipe.execute())


def _gcra_args(limits: Sequence[Limit]) -> list[int]:
    """Per limit: emission interval ns, count, cost (the ARGV layout of gcra_multi.lua)."""
    return [n for limit in limits for n in (limit.interval_ns, limit.count, limit.cost)]


class UnsupportedRedis(SetupRefused):
    """The Redis server is older than the quota scripts need (`OLDEST_REDIS`)."""

    def __init__(self, found: str) -> None:
        oldest = ".".join(str(n) for n in OLDEST_REDIS)
        super().__init__(f"Redis {found} is too old: Tollway needs Redis {oldest} or later "
                         "(docs/PRODUCTION.md#production-several-nodes-behind-a-load-balancer)")


def redis_version(text: str) -> tuple[int, ...]:
    """'7.0.15' → (7, 0, 15); what does not parse counts as 0."""
    return tuple(int(part) if part.isdigit() else 0 for part in text.split(".")[:3])


def _hold(hold_id: str, user_id: int, key_id: int, key_limited: bool, amount: int) -> str:
    """A hold as its member of the holds zset (the module docstring)."""
    return f"{hold_id} {user_id} {key_id} {1 if key_limited else 0} {amount}"


def _member(hold: Reservation) -> str:
    return _hold(hold.hold_id, hold.user_id, hold.key_id, hold.key_limited, hold.amount)


def _parsed(member: str) -> Reservation:
    """The hold a member of the holds zset names (`_hold`); its balances are not part of it."""
    hold_id, user, key, limited, amount = member.split(" ")
    return Reservation(hold_id, int(user), int(key), limited == "1", int(amount), 0, -1)


def _usage(user_id: int, key_id: int, key_limited: bool, channel_id: int, amount: int, ref: str) -> str:
    """The value of a stream entry (the module docstring): the ref last, as an adjustment's may hold
    spaces."""
    return f"{user_id} {key_id} {1 if key_limited else 0} {channel_id} {amount} {ref}"


def _entry(entry_id: str, f: dict[str, str]) -> Entry:
    """A stream entry as the sync reads it: the field named by its kind holds `_usage`'s value, `g` the
    log."""
    kind = "use" if "use" in f else "adj"
    user, key, limited, channel, amount, ref = f[kind].split(" ", 5)
    return Entry(
        id=entry_id, kind="adj" if kind == "adj" else "use", user_id=int(user), key_id=int(key),
        key_limited=limited == "1", channel_id=int(channel), amount=int(amount), ref=ref,
        log=json.loads(f["g"]) if f.get("g") else None,
    )
