"""Which quota sync moves which partition's stream: leases in Redis, shared fairly by the live syncs.

Each partition's stream (quota/partitions.py) is consumed by one sync at a time: a sync holds a lease per
partition (`q:{p<n>}:lease`, SET NX PX with its owner token), renews the ones it holds on every pass and
gives them back when it stops; a sync that dies loses its leases when they time out, and the others take
the partitions over. The live syncs are known by a heartbeat set (`q:syncs`, a sorted set of owner tokens
by expiry): each pass a sync counts them and holds at most ceil(partitions / live syncs), giving back
the excess and claiming free partitions up to that share. So several `tollway quota-sync` processes and
the in-process syncs of `tollway serve`, on any nodes, share the partitions.

A lease only spreads the work. What makes each entry reach SQL exactly once is still the partition's SQL
cursor row lock (models/quota.py): two syncs that ever overlap on a partition (a lease that timed out
during a long batch, a clock jump) take turns on it and skip what the other applied.
"""

from __future__ import annotations

import asyncio
import math
import os
import secrets
import socket
from typing import cast

from backend.redis import RedisBackend, guarded, idempotent
from quota import lua
from quota.partitions import tag

DEFAULT_LEASE_SECONDS = 10.0


class PartitionLeases:
    """This sync's leases. `refresh()` once per pass: the partitions this sync should move now."""

    def __init__(self, backend: RedisBackend, *, lease_seconds: float = DEFAULT_LEASE_SECONDS) -> None:
        self.backend = backend
        self.r = backend.client
        self.partitions = backend.partitions
        self.lease_ms = max(1, int(lease_seconds * 1000))
        # who holds a lease: readable by an operator (host and pid), unique per process start
        self.token = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.keys = [backend.key(f"q:{tag(p)}:lease") for p in range(self.partitions)]
        self.syncs = backend.key("q:syncs")
        self.held: set[int] = set()
        self._first = secrets.randbelow(self.partitions)  # where this sync starts claiming
        self._renew = backend.script(lua.load("renew_if_equal"))
        self._beat = backend.script(lua.load("heartbeat"))
        self._delete = backend.script(lua.load("delete_if_equal"))

    async def refresh(self) -> list[int]:
        """Beat, renew what is held, give back the excess over the fair share, claim free partitions up to
        it; the partitions held now, in order."""
        live = await self._heartbeat()
        share = math.ceil(self.partitions / max(1, live))
        mine = sorted(self.held)
        renewed = await asyncio.gather(*(self._renew_one(p) for p in mine))
        self.held = {p for p, ok in zip(mine, renewed, strict=True) if ok}
        excess = sorted(self.held)[share:]
        for p in excess:
            await self._give_back(p)
        if len(self.held) < share:
            for n in range(self.partitions):
                p = (self._first + n) % self.partitions
                if p not in self.held and await self._claim(p):
                    self.held.add(p)
                    if len(self.held) >= share:
                        break
        return sorted(self.held)

    async def release(self) -> None:
        """On stop: give every lease back and leave the heartbeat set (the others take over at once)."""
        for p in sorted(self.held):
            await self._give_back(p)
        await self._leave()

    @idempotent
    async def _heartbeat(self) -> int:
        # a beat is valid for one lease: a sync that stopped beating is no longer counted after it
        return int(await self._beat(keys=[self.syncs], args=[self.token, self.lease_ms]))

    @idempotent
    async def _leave(self) -> None:
        await self.r.zrem(self.syncs, self.token)

    @idempotent
    async def _renew_one(self, p: int) -> bool:
        return int(await self._renew(keys=[self.keys[p]], args=[self.token, self.lease_ms])) == 1

    @guarded
    async def _claim(self, p: int) -> bool:
        # not retried: after an ambiguous failure a second SET NX would find this sync's own token
        return bool(await self.r.set(self.keys[p], self.token, px=self.lease_ms, nx=True))

    async def _give_back(self, p: int) -> None:
        self.held.discard(p)
        await self._delete_own(p)

    @idempotent
    async def _delete_own(self, p: int) -> None:
        await self._delete(keys=[self.keys[p]], args=[self.token])

    async def holders(self) -> dict[int, str]:
        """Who holds each leased partition (for tests and operators)."""
        async with self.r.pipeline(transaction=False) as pipe:  # one GET each: the keys span slots
            for key in self.keys:
                pipe.get(key)
            values = cast(list[str | None], await pipe.execute())
        return {p: v for p, v in enumerate(values) if v is not None}
