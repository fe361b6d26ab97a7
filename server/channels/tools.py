"""`ChannelTools`, the channel tools that call no upstream (docs/api/channels.md#channel-tools): delete
every disabled channel, delete or tag many channels at once, copy a channel, and rebuild every ability.
A service of its own because these act on many channels (or copy one whole) and need only the database,
the routing table, the cluster-wide locks and the clock.

- Batch deletes and tags run in one transaction and answer how many channels they really changed.
- A copy keeps the keys and every setting (so it needs no destination check: the key goes nowhere new),
  takes a new name (`name` + `suffix`) and creation time, and starts with no test result; with
  `reset_balance` its balance and used quota start at zero.
- The rebuild holds a lock shared by every worker and node (`backend.locks.exclusive`): a second rebuild
  anywhere while one runs is a 409. Each channel is rebuilt in its own short transaction on its locked
  row, so a channel whose abilities cannot be written (a collision on MariaDB) is counted in `fails`
  and the others go on.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.exc import IntegrityError

from backend.base import KeyValue
from backend.locks import Busy, exclusive
from core.enums import ChannelStatus
from models.channels import Channel, ChannelRepository
from models.db import Database
from server.channels.rules import COLLIDING, NAME_MAX, clean_fields
from server.channels.tool_schemas import CreatedChannel, FixResult
from server.clock import Clock
from server.components.channel_table import ChannelTable
from server.errors import BadRequest, Conflict, NotFound

log = logging.getLogger("tollway.channels")

FIX_LOCK = "lock:channel-fix"
FIX_LOCK_TTL = 600.0  # a rebuild that dies holding the lock blocks the next one this long at most
NOT_COPIED = ("id", "created_time", "test_time", "response_time")
BALANCE_FIELDS = ("balance", "balance_updated_time", "used_quota")


class ChannelTools:
    """Batch deletes and tags, copies and the abilities rebuild."""

    def __init__(self, *, db: Database, channels: ChannelTable, backend: KeyValue, clock: Clock) -> None:
        self.db = db
        self.channels = channels
        self.backend = backend  # the cluster-wide lock of the abilities rebuild
        self.clock = clock

    async def delete_disabled(self) -> int:
        """`DELETE /api/channel/disabled`: every channel with status 2 or 3, and its abilities → how many."""
        async with self.db.transaction() as tx:
            repo = ChannelRepository(tx)
            ids = await repo.ids_with_status((ChannelStatus.MANUALLY_DISABLED, ChannelStatus.AUTO_DISABLED))
            deleted = await repo.delete_many(ids)
        if deleted:
            await self.channels.changed()
        return deleted

    async def delete_many(self, ids: list[int]) -> int:
        """`POST /api/channel/batch`: the channels `ids` (unknown ids are skipped) → how many were deleted."""
        async with self.db.transaction() as tx:
            deleted = await ChannelRepository(tx).delete_many(sorted(set(ids)))
        if deleted:
            await self.channels.changed()
        return deleted

    async def tag_many(self, ids: list[int], tag: str | None) -> int:
        """`POST /api/channel/batch/tag`: the tag (None or "" clears it) of the channels `ids` and of their
        abilities → how many channels there were."""
        value: str = clean_fields({"tag": tag}, creating=False)["tag"]
        async with self.db.transaction() as tx:
            repo = ChannelRepository(tx)
            found = await repo.existing_ids(sorted(set(ids)))
            await repo.set_tag(found, value)
        if found:
            await self.channels.changed()
        return len(found)

    async def copy_channel(self, channel_id: int, *, suffix: str, reset_balance: bool) -> CreatedChannel:
        """`POST /api/channel/copy/:id` → `{id}` of the copy (see the module docstring)."""
        now = self.clock.now_s()
        try:
            async with self.db.transaction() as tx:
                repo = ChannelRepository(tx)
                source = await repo.get(channel_id)
                if source is None:
                    raise NotFound("channel not found")
                name = (source.name + suffix).strip()
                if not 1 <= len(name) <= NAME_MAX:
                    raise BadRequest(f"suffix: the name with the suffix must be 1–{NAME_MAX} characters")
                values: dict[str, Any] = {column.key: getattr(source, column.key)
                                          for column in Channel.__table__.columns
                                          if column.key not in NOT_COPIED}
                values.update(name=name, created_time=now, test_time=0, response_time=0)
                if reset_balance:
                    values.update({field: 0 for field in BALANCE_FIELDS}, balance=0.0)
                new_id = await repo.add(Channel(**values))
        except IntegrityError:
            raise BadRequest(COLLIDING) from None
        await self.channels.changed()
        return CreatedChannel.of(new_id)

    async def fix_abilities(self) -> FixResult:
        """`POST /api/channel/fix`: every channel's abilities rebuilt from the channel, strays of deleted
        channels removed → `{success, fails}` (channels); 409 while a rebuild runs anywhere."""
        success = fails = 0
        try:
            async with exclusive(self.backend, FIX_LOCK, ttl=FIX_LOCK_TTL):
                async with self.db.transaction() as tx:
                    repo = ChannelRepository(tx)
                    await repo.delete_stray_abilities()
                    ids = await repo.all_ids()
                for channel_id in ids:
                    try:
                        async with self.db.transaction() as tx:
                            repo = ChannelRepository(tx)
                            channel = await repo.get_for_update(channel_id)
                            if channel is None:  # deleted meanwhile
                                continue
                            await repo.replace_abilities(channel)
                        success += 1
                    except IntegrityError:
                        fails += 1
                        log.warning("channel %d: its abilities could not be rebuilt (%s)", channel_id,
                                    COLLIDING)
        except Busy:
            raise Conflict("a rebuild of the abilities is already running") from None
        await self.channels.changed()
        return FixResult.of(success=success, fails=fails)
