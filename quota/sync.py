"""Moving settled usage and adjustments from the store's streams into SQL, exactly once.

The store keeps one stream per partition (quota/partitions.py), and SQL one cursor row per partition; each
partition is synced on its own, exactly as one stream was. For each partition, a `UsageSink`
(models/quota.py) applies a batch in ONE SQL transaction: it locks the partition's cursor row, checks
that the store's epoch is still the one the batch was read under (else the store lost its data meanwhile
and the batch is dropped — see quota/store.py), skips entries at or below the cursor (another sync worker
got there first, or this one crashed after committing), inserts the log rows, applies the summed counter
and balance deltas, and stores the new cursor and epoch. After the commit the store learns the cursor and
trims the stream up to it. A crash before the commit replays the same entries; a crash after it finds them
below the cursor. Any number of sync workers (one per node, or `tollway quota-sync`) may run at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from quota.store import QuotaStore
from quota.types import Entry

log = logging.getLogger("tollway.quota.sync")


class UsageSink(Protocol):
    async def cursors(self, partitions: Sequence[int]) -> dict[int, str]:
        """The id of the last stream entry applied to SQL, for each of the partitions (one read)."""
        ...

    async def apply(self, partition: int, entries: list[Entry], epoch: str,
                    epoch_is_current: Callable[[], Awaitable[bool]], *, behind: bool = False) -> str | None:
        """Apply the partition's entries above its cursor in one transaction; returns the committed
        cursor, or None when `epoch_is_current()` (asked under the cursor lock) says the batch is stale.
        `behind`: the batch was full, more is waiting — the sink may trade the loop's latency for speed."""
        ...


class Leases(Protocol):
    """Which partitions this sync moves, shared with the other syncs (quota/leases.py)."""

    async def refresh(self) -> list[int]:
        """Once per pass: renew, give back, claim; the partitions this sync holds now."""
        ...

    async def release(self) -> None:
        """On stop: give them all back."""
        ...


Progress = Callable[[int, "int | None", "float | None"], None]
"""Told after each pass of `run_forever`: the entries still waiting (in every partition), the stream time
(ms) of the oldest entry the pass committed (over the partitions; None: nothing waited) and the pass's
duration in seconds (None: no batch)."""


def entry_ms(entry_id: str) -> int:
    """The stream time of an entry: the milliseconds of its id "ms-seq"."""
    return int(entry_id.partition("-")[0])


class QuotaSync:
    def __init__(self, store: QuotaStore, sink: UsageSink, *, interval: float = 1.0, batch: int = 2000,
                 progress: Progress | None = None, leases: Leases | None = None) -> None:
        self.store = store
        self.leases = leases  # None: this sync moves every partition (embedded mode, tests, --once)
        self.sink = sink
        self.interval = interval
        self.batch = batch
        self.progress = progress
        self._stop = asyncio.Event()
        self._oldest_ms: int | None = None  # of the oldest entry the last `run_once` committed
        self._full = False  # the last `run_once` read a full batch of some partition: more is waiting

    def every_partition(self) -> list[int]:
        return list(range(self.store.partitions))

    async def run_once(self, partitions: Sequence[int] | None = None) -> int:
        """One batch of each of `partitions` (default: all); returns how many entries it read (0 when
        their streams are drained)."""
        mine = list(partitions) if partitions is not None else self.every_partition()
        cursors = await self.sink.cursors(mine) if mine else {}
        read, oldest, full = 0, None, False
        for partition in mine:
            count, first = await self._run_partition(partition, cursors[partition])
            read += count
            full = full or count >= self.batch
            if first is not None and (oldest is None or first < oldest):
                oldest = first
        self._oldest_ms, self._full = oldest, full
        return read

    async def _run_partition(self, partition: int, cursor: str) -> tuple[int, int | None]:
        """One batch of one partition: (entries read, stream time of the first one)."""
        epoch, entries = await self.store.read(partition, cursor, self.batch)
        if entries:

            async def current() -> bool:
                return await self.store.epoch(partition) == epoch

            # A full batch means more entries are waiting than one batch holds: the sync is behind the
            # calls. Only then does the sink work in larger stretches (a batch of a normal interval,
            # however many calls it holds, is written in small chunks that leave the loop to the calls).
            applied = await self.sink.apply(partition, entries, epoch, current,
                                            behind=len(entries) >= self.batch)
            if applied is None:
                log.warning("the quota store lost partition %d's data since this batch was read; batch "
                            "dropped", partition)
                return 0, None
            cursor = applied
        await self.store.synced(partition, cursor)
        return len(entries), entry_ms(entries[0].id) if entries else None

    async def oldest_waiting(self) -> int | None:
        """The stream time (ms) of the oldest entry not yet applied to SQL; None when nothing waits."""
        mine = self.every_partition()
        cursors = await self.sink.cursors(mine) if mine else {}
        oldest: int | None = None
        for partition in mine:
            _, entries = await self.store.read(partition, cursors[partition], 1)
            if entries and (oldest is None or entry_ms(entries[0].id) < oldest):
                oldest = entry_ms(entries[0].id)
        return oldest

    async def drain(self, max_batches: int = 1000) -> None:
        """Sync every partition until its stream is empty (shutdown, tests)."""
        for _ in range(max_batches):
            await self.run_once()
            if not self._full:
                return

    def stop(self) -> None:
        """Ask `run_forever` to return after the batch in progress (never cancel it mid-transaction:
        a database driver interrupted mid-query may never answer the rollback)."""
        self._stop.set()

    async def run_forever(self) -> None:
        self._stop.clear()
        delay = self.interval
        while not self._stop.is_set():
            try:
                started = time.perf_counter()
                mine = await self.leases.refresh() if self.leases is not None else None
                read = await self.run_once(mine)
                delay = self.interval
                if self.progress is not None:
                    took = time.perf_counter() - started if read else None
                    self.progress(await self.store.pending(), self._oldest_ms if read else None, took)
            except Exception:  # keep syncing after a database or Redis hiccup; nothing was applied
                log.exception("quota sync failed; retrying")
                self._full, delay = False, min(max(delay * 2, self.interval), 30.0)
            if not self._full:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), delay)
        if self.leases is not None:
            try:
                await self.leases.release()  # the other syncs take the partitions over at once
            except Exception:  # they expire on their own
                log.exception("could not give the quota sync's leases back")


async def sweep_forever(sweep: Callable[[], Awaitable[int]], interval: float, stop: asyncio.Event) -> None:
    """Release the holds of workers that died between reserve and settle, until `stop` is set; `sweep`
    is `QuotaEngine.sweep` (which tells the engine's observer how many it released)."""
    while not stop.is_set():
        try:
            released = await sweep()
            if released:
                log.warning("released %d expired quota holds", released)
        except Exception:
            log.exception("quota sweep failed; retrying")
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)
