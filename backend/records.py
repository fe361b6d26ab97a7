"""Records every request needs (users, API keys), shared by all workers without asking SQL each time.

Three layers: an in-process memo (≤ `memo_ttl`, 1 s by default) → a copy in the backend (Redis; its
lifetime bounds a lost invalidation) → the loader (SQL), called only on a miss. A change calls
`invalidate`, which deletes the shared copy, drops the memo here and broadcasts `rec:<namespace>:<id>`
so that every other worker drops its memo at once. Absent records are cached too (briefly), so that a
flood of unknown API keys does not reach SQL; creating a record must invalidate its id.

A read that raced with an invalidation never puts its (possibly stale) result back: every invalidation
bumps a generation here, and the `records` version counter in the backend (backend/versions.py); a result
is memoized only if the generation did not move while it was loaded, and its shared copy is stored only if
the counter did not move since the reader looked for the copy — so a worker that read SQL just before a
change committed elsewhere cannot plant the old record in Redis after the writer dropped it.

An invalidation drops the shared copy, then bumps the counter, then broadcasts; the writer answers after
that. A worker shown the new counter (the reservation returns it) forgets its memos before it trusts them.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

from backend.base import KeyValue, PubSub, VersionCounters
from backend.broadcasts import CHANNEL, Broadcasts
from backend.cache import LocalMemo
from backend.versions import RECORDS

T = TypeVar("T")
_ABSENT = "null"


class RecordStore(KeyValue, VersionCounters, PubSub, Protocol):
    """What a record cache uses of the store: the shared copies (keys, written only while the `records`
    counter stands still), the counter, and the broadcast of an invalidation."""


class RecordCache(Generic[T]):
    def __init__(self, backend: RecordStore, namespace: str, *, encode: Callable[[T], dict[str, Any]],
                 decode: Callable[[dict[str, Any]], T], memo_ttl: float = 1.0, shared_ttl: float = 300.0,
                 absent_ttl: float = 30.0) -> None:
        self.backend = backend
        self.namespace = namespace
        self.encode = encode
        self.decode = decode
        self.shared_ttl = shared_ttl
        self.absent_ttl = absent_ttl
        self._memo: LocalMemo[str, T | None] = LocalMemo(memo_ttl)
        self._generation = 0

    def _key(self, record_id: str) -> str:
        return f"rec:{self.namespace}:{record_id}"

    async def get(self, record_id: str | int, loader: Callable[[], Awaitable[T | None]]) -> T | None:
        rid = str(record_id)
        hit, value = self._memo.get(rid)
        if hit:
            return value
        generation = self._generation
        shared, version = await self.backend.get_text_versioned(self._key(rid), RECORDS)
        if shared is not None:
            value = None if shared == _ABSENT else self.decode(json.loads(shared))
        else:
            value = await loader()
            text = _ABSENT if value is None else json.dumps(self.encode(value), separators=(",", ":"))
            if generation == self._generation:
                await self.backend.set_text_if_version(
                    self._key(rid), text, self.absent_ttl if value is None else self.shared_ttl, RECORDS,
                    version)
        if generation == self._generation:
            self._memo.put(rid, value)
        return value

    async def invalidate(self, record_id: str | int) -> None:
        """After a committed change: no worker or node serves the old record from the next request on."""
        rid = str(record_id)
        self.forget(rid)
        await self.backend.delete(self._key(rid))
        await self.backend.bump(RECORDS)
        await self.backend.publish(CHANNEL, f"{self._key(rid)}")

    def forget(self, record_id: str) -> None:
        self._generation += 1
        self._memo.drop(record_id)

    def forget_all(self) -> None:
        self._generation += 1
        self._memo.clear()

    def listen(self, broadcasts: Broadcasts) -> None:
        """Drop the memo of a record another worker changed (`rec:<namespace>:<id>`)."""
        prefix = f"rec:{self.namespace}:"

        async def changed(message: str) -> None:
            self.forget(message[len(prefix):])

        broadcasts.register(prefix, changed)
