"""The SQL side of the quota engine: the sync cursor, the sink the sync writes to, and the durable
balances the engine loads accounts from.

`SqlQuotaSink.apply` is the exactly-once step, per partition of the store (quota/partitions.py): one
transaction locks the partition's cursor row (`quota_cursors`), drops entries at or below it, inserts the
log rows (and, with `DataExportEnabled`, adds the consume logs among them to the hourly usage buckets of
`quota_data`), applies the summed deltas (`x = x + :d`, rows in id order) and moves the cursor.
`SqlBalanceSource.durable` reads a balance and its partition's cursor in ONE statement, so the pair is a
consistent snapshot on every database.

The sync runs on the event loop of a serving worker, so a batch must not hold the loop for long: rows
are built and inserted `CHUNK` at a time, with a short pause between chunks (`CHUNK_PAUSE`) in which the
model calls in flight make progress. A batch written in one go held the loop for several milliseconds,
and a call arriving meanwhile waited that long once per await; in chunks the longest stretch is a few
times shorter (`scripts/bench_sync.py`, docs/PERFORMANCE.md#figures-behind-the-code).

Under a load that saturates the worker, though, every await of a chunk waits for a whole turn of a busy
loop: a batch took seconds and the sync fell behind the calls (an embedded worker's in-process stream
grew nearly as fast as the calls arrived, held in memory until drained). A full batch
(`QUOTA_SYNC_BATCH` entries: more are waiting) means the sync is behind: `QuotaSync` then tells `apply`,
which works in chunks `CATCH_UP` times larger without the pause (longer stretches, but several times
as fast under that load). (In a process of its own, `alone`, every batch is written so: no call
shares its loop.) A batch of one normal interval is not "behind", however many
calls it holds: judging by size alone made every batch under a moderate load a catch-up batch, and the
longer stretches showed in the p99 at concurrency 1 (docs/PERFORMANCE.md#figures-behind-the-code).

With a separate log database (`logs`), the batch's log rows go there instead, in a transaction of their
own committed while the main transaction holds the cursor lock, before it commits the charges and the
cursor: an insert that skips a `ref` present already, so a batch replayed after a crash between the two
commits leaves its logs once and applies its charges once (the cursor). Details and the recovery rule:
docs/MONEY.md#logs-in-a-separate-database.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Integer,
    Select,
    String,
    Table,
    delete,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from core.enums import LogType
from models.base import Base
from models.channels import Channel
from models.credits import PendingCredit
from models.db import Database
from models.keys import ApiKey
from models.quota_data import Bucket, BucketKey, QuotaDataRepository, add_to_buckets
from models.sync_sql import add_by_id, insert_log_rows, log_values, logged
from models.tables import Option, User
from quota.types import ZERO_ID, Account, Entry, stream_id

log = logging.getLogger("tollway.quota.sink")


class QuotaCursor(Base):
    """One row (id 1), created by migration 0002 and read by nothing: the sync cursor of a Redis layout from
    before the first release (docs/QUOTA.md#redis-keys). Declared because the migrated schema must match
    the models (tests/test_migrations.py)."""

    __tablename__ = "quota_cursor"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    last_id: Mapped[str] = mapped_column(String(40))
    epoch: Mapped[str] = mapped_column(String(40), default="")
    updated_at: Mapped[int] = mapped_column(BigInteger, default=0)


class PartitionCursor(Base):
    """One row per partition (0 .. MAX_PARTITIONS − 1, all present from the migration on): the id of the
    last entry of the partition's stream applied to SQL, and the store epoch it was read under."""

    __tablename__ = "quota_cursors"

    partition: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    last_id: Mapped[str] = mapped_column(String(40))
    epoch: Mapped[str] = mapped_column(String(40), default="")
    updated_at: Mapped[int] = mapped_column(BigInteger, default=0)


EXPORT_OPTION = "DataExportEnabled"
CHUNK = 64  # log rows per INSERT (twice as many refs per look-up): a short stretch of the event loop
CHUNK_PAUSE = 0.001  # seconds between two chunks: the calls in flight run meanwhile
CATCH_UP = 4  # then chunks are this many times larger, without the pause


def chunks(items: list[Any], size: int = CHUNK) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


async def pause() -> None:
    """Let the event loop run what else is ready (the model calls) between two chunks of sync work."""
    await asyncio.sleep(CHUNK_PAUSE)


def add_sums(entries: list[Entry], users: dict[int, list[int]], keys: dict[int, list[int]],
             channels: dict[int, int]) -> None:
    """Add the entries' deltas: per user [quota, used, requests], per key [remain, used], per channel
    used."""
    for e in entries:
        if e.kind == "use":
            u = users.get(e.user_id)
            if u is None:
                u = users[e.user_id] = [0, 0, 0]
            u[0] -= e.amount
            u[1] += e.amount
            u[2] += 1
            if e.key_id:
                k = keys.get(e.key_id)
                if k is None:
                    k = keys[e.key_id] = [0, 0]
                k[1] += e.amount
                if e.key_limited:
                    k[0] -= e.amount
            if e.channel_id:
                channels[e.channel_id] = channels.get(e.channel_id, 0) + e.amount
        else:
            if e.user_id:
                users.setdefault(e.user_id, [0, 0, 0])[0] += e.amount
            if e.key_id:
                keys.setdefault(e.key_id, [0, 0])[0] += e.amount


users_t, keys_t, channels_t = (cast(Table, m.__table__) for m in (User, ApiKey, Channel))


class SqlQuotaSink:
    def __init__(self, db: Database, clock: Any = None, *, export: Callable[[], bool] | None = None,
                 logs: Database | None = None, on_logs_committed: Callable[[], None] | None = None,
                 alone: bool = False) -> None:
        self.db = db
        # the sync has its event loop to itself (`tollway quota-sync`): no call waits on a chunk, so every
        # batch is written as a full one is (`CATCH_UP`-sized chunks, no pause)
        self.alone = alone
        self._now = clock or (lambda: 0)
        # DataExportEnabled (consume logs also feed the hourly usage buckets): a worker passes its options
        # snapshot; without one (the separate sync process) the option row is read once per batch
        self._export = export
        self.logs = logs  # a separate log database; None: the log rows go in the main transaction
        # fault injection for the crash test (TEST_KILL_AFTER_LOG_COMMIT): runs between the two commits
        self._on_logs_committed = on_logs_committed

    async def cursors(self, partitions: Sequence[int]) -> dict[int, str]:
        async with self.db.transaction() as tx:
            rows = (await tx.execute(select(PartitionCursor.partition, PartitionCursor.last_id)
                                     .where(PartitionCursor.partition.in_(list(partitions))))).all()
            found = {int(p): str(last) for p, last in rows}
        return {p: found.get(p, ZERO_ID) for p in partitions}

    async def apply(self, partition: int, entries: list[Entry], epoch: str,
                    epoch_is_current: Callable[[], Awaitable[bool]], *, behind: bool = False) -> str | None:
        mine = PartitionCursor.partition == partition
        behind = behind or self.alone
        async with self.db.transaction() as tx:
            current = await tx.scalar(select(PartitionCursor.last_id).where(mine).with_for_update())
            if current is None:
                raise ValueError(f"no SQL cursor row for quota partition {partition} (migrations not run?)")
            if not await epoch_is_current():
                return None
            floor = stream_id(current)
            start = 0  # entries come oldest first: the ones at or below the cursor are a prefix
            while start < len(entries) and stream_id(entries[start].id) <= floor:
                start += 1
            fresh = entries[start:]
            if not fresh:
                return current
            if self.logs is None:
                fresh = await self._drop_applied(tx, fresh, behind=behind)
            else:
                fresh = await self._drop_logged(fresh, floor)
            now = int(self._now())
            users: dict[int, list[int]] = {}
            keys: dict[int, list[int]] = {}
            channels: dict[int, int] = {}
            buckets: dict[BucketKey, Bucket] | None = {} if await self._exporting(tx) else None
            elsewhere: list[list[list[Any]]] = []  # chunks of log rows for the log database
            for n, part in enumerate(chunks(fresh, CHUNK * CATCH_UP if behind else CHUNK)):
                if n and not behind:
                    await pause()
                add_sums(part, users, keys, channels)
                rows = [log_values(e, now) for e in part if e.log is not None]
                if rows:
                    if self.logs is None:
                        await insert_log_rows(tx, rows)
                    else:
                        elsewhere.append(rows)
                    if buckets is not None:
                        add_to_buckets(buckets, rows, LogType.CONSUME)
            if elsewhere:
                await self._write_logs(elsewhere, behind)
            if buckets:
                await QuotaDataRepository(tx).add(buckets)
            await add_by_id(tx, users_t, ("quota", "used_quota", "request_count"),
                            [(i, *d) for i, d in sorted(users.items())])
            await add_by_id(tx, keys_t, ("remain_quota", "used_quota"),
                            [(i, *d) for i, d in sorted(keys.items())])
            await add_by_id(tx, channels_t, ("used_quota",), sorted(channels.items()))
            credited = [e.ref for e in fresh if e.kind == "adj" and e.ref] if self.logs is not None else []
            if credited:  # with the logs elsewhere, a credit's outbox row goes with its charge (no log here)
                await tx.execute(delete(PendingCredit).where(PendingCredit.ref.in_(credited)))
            last = entries[-1].id if not fresh else fresh[-1].id
            await tx.execute(update(PartitionCursor).where(mine)
                             .values(last_id=last, epoch=epoch, updated_at=now))
        return last

    async def _exporting(self, tx: AsyncSession) -> bool:
        if self._export is not None:
            return self._export()
        value = await tx.scalar(select(Option.value).where(Option.key == EXPORT_OPTION))
        return value is None or value.strip().lower() == "true"  # the option's default is on

    @staticmethod
    async def _drop_applied(tx: AsyncSession, entries: list[Entry], *, behind: bool = False) -> list[Entry]:
        """The second net under the cursor: an entry whose reference already has its log row was applied
        before (a hold settled twice across a Redis loss, say) and must not be applied again — nor stall
        the sync on the unique index."""
        refs = [e.ref for e in entries if e.log is not None]
        applied: set[str | None] = set()
        for n, part in enumerate(chunks(refs, 2 * CHUNK * (CATCH_UP if behind else 1))):
            if n and not behind:
                await pause()
            applied.update(ref for ref, _ in await logged(tx, part))
        if not applied:
            return entries
        log.warning("skipping %d quota entries whose references were applied already", len(applied))
        return [e for e in entries if e.log is None or e.ref not in applied]


    async def _write_logs(self, parts: list[list[list[Any]]], behind: bool) -> None:
        """Commit the batch's log rows in the log database (a `ref` present already is skipped), while
        the caller's main transaction still holds the cursor lock and has committed nothing."""
        assert self.logs is not None
        async with self.logs.transaction() as ltx:
            for n, rows in enumerate(parts):
                if n and not behind:
                    await pause()
                await insert_log_rows(ltx, rows, skip_duplicates=True)
        if self._on_logs_committed is not None:
            self._on_logs_committed()

    async def _drop_logged(self, entries: list[Entry], floor: tuple[int, int]) -> list[Entry]:
        """The second net with a separate log database. An entry is dropped when its `ref` has a log row
        there that another entry, at or below the cursor, wrote: that entry was applied (a hold settled
        twice, say). A row written by this very entry, or by one above the cursor, comes from a batch
        whose main commit never happened (a crash between the two commits): the entry is applied, and its
        log row, present already, is not written again. A `ref` twice in one batch: the first counts."""
        seen: set[str] = set()
        twice: set[int] = set()
        by_ref: dict[str, Entry] = {}
        for n, e in enumerate(entries):
            if e.log is None:
                continue
            if e.ref in seen:
                twice.add(n)
            seen.add(e.ref)
            by_ref.setdefault(e.ref, e)
        applied: set[str] = set()
        if not by_ref:
            return entries
        assert self.logs is not None
        async with self.logs.transaction() as ltx:
            for part in chunks(list(by_ref), 2 * CHUNK * CATCH_UP):
                for ref, entry_id in await logged(ltx, part):
                    if ref is not None and (entry_id is None or (
                            entry_id != by_ref[ref].id and stream_id(entry_id) <= floor)):
                        applied.add(ref)
        if not applied and not twice:
            return entries
        log.warning("skipping %d quota entries whose references were applied already",
                    len(applied) + len(twice))
        return [e for n, e in enumerate(entries)
                if e.log is None or (n not in twice and e.ref not in applied)]


class SqlBalanceSource:
    def __init__(self, db: Database) -> None:
        self.db = db

    @staticmethod
    def _balance(account: Account, account_id: int) -> Select[Any]:
        column = User.quota if account == "user" else ApiKey.remain_quota
        id_column = User.id if account == "user" else ApiKey.id
        return select(column).where(id_column == account_id)

    async def durable(self, account: Account, account_id: int, partition: int) -> tuple[int, str, str] | None:
        balance = self._balance(account, account_id).scalar_subquery()
        stmt = select(balance, PartitionCursor.last_id, PartitionCursor.epoch).where(
            PartitionCursor.partition == partition)
        async with self.db.transaction() as tx:
            row = (await tx.execute(stmt)).first()
        if row is None or row[0] is None:
            return None
        return int(row[0]), str(row[1]), str(row[2])

    async def locked(self, account: Account, account_id: int, partition: int,
                     load: Callable[[int, str], Awaitable[tuple[int, str]]]) -> int | None:
        mine = PartitionCursor.partition == partition
        async with self.db.transaction() as tx:
            cursor = await tx.scalar(select(PartitionCursor.last_id).where(mine).with_for_update())
            if cursor is None:
                raise ValueError(f"no SQL cursor row for quota partition {partition} (migrations not run?)")
            balance = await tx.scalar(self._balance(account, account_id))
            if balance is None:
                return None
            live, epoch = await load(int(balance), cursor)
            await tx.execute(update(PartitionCursor).where(mine).values(epoch=epoch))
            return live
