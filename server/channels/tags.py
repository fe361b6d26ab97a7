"""`ChannelTags`, the tag routes (docs/api/channels.md#tags): enable or disable every channel of a tag, edit
them together, and the union of their models. A service of its own because a tag acts on many channels
at once and needs nothing but the database, the routing table and the clock.

A tag names a set of channels (the `tag` field; `""` is no tag). Each route acts on every channel whose
tag is exactly the one given; a tag no channel has is a 404, an empty one a 400. The edit changes only
the fields that carry a value (absent, `null` and `""` all mean "unchanged", as new-api's form sends `""`
for untouched fields); values obey the same rules as on `PUT /api/channel/` (`server.channels.rules`),
and a `header_override` that would send a keyed channel's key elsewhere needs root
(`require_key_holder`, as on `PUT`). All channels change in one transaction with their abilities.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import IntegrityError

from core.enums import ChannelStatus
from models.channels import ChannelRepository, split_list
from models.db import Database
from server.channels.destination import require_key_holder
from server.channels.key_rules import STATUS_REASONS, set_status
from server.channels.rules import COLLIDING, clean_fields
from server.clock import Clock
from server.components.channel_table import ChannelTable
from server.errors import BadRequest, NotFound

# the edit's fields → the channel's (a 400 names the field as the request did)
EDIT_FIELDS = {"new_tag": "tag", "priority": "priority", "weight": "weight", "model_mapping": "model_mapping",
               "models": "models", "groups": "group", "param_override": "param_override",
               "header_override": "header_override"}
TAG_NOT_FOUND = "tag not found"


def _required(tag: str) -> str:
    if not tag:
        raise BadRequest("tag: is required")
    return tag


def _cleaned(changes: dict[str, Any]) -> dict[str, Any]:
    """Column values for the edit's fields; a refusal names the field as the request spelled it."""
    column_of = {wire: EDIT_FIELDS[wire] for wire in changes}
    try:
        return clean_fields({column_of[wire]: value for wire, value in changes.items()}, creating=False)
    except BadRequest as exc:
        for wire, column in column_of.items():
            if wire != column and exc.message.startswith(f"{column}:"):
                raise BadRequest(wire + exc.message[len(column):]) from None
        raise


class ChannelTags:
    """The routes that act on every channel of a tag."""

    def __init__(self, *, db: Database, channels: ChannelTable, clock: Clock) -> None:
        self.db = db
        self.channels = channels
        self.clock = clock

    async def set_tag_status(self, tag: str, *, enabled: bool) -> int:
        """`POST /api/channel/tag/enabled` (→ 1) and `/tag/disabled` (→ 2) → how many channels changed."""
        status = ChannelStatus.ENABLED if enabled else ChannelStatus.MANUALLY_DISABLED
        _required(tag)
        now = self.clock.now_s()
        changed = 0
        async with self.db.transaction() as tx:
            repo = ChannelRepository(tx)
            channels = await repo.with_tag(tag, lock=True)
            if not channels:
                raise NotFound(TAG_NOT_FOUND)
            for channel in channels:
                if set_status(channel, status, STATUS_REASONS[status], now):
                    await repo.save(channel)
                    changed += 1
        if changed:
            await self.channels.changed()
        return changed

    async def edit_tag(self, tag: str, changes: dict[str, Any], *, actor_role: int) -> int:
        """`PUT /api/channel/tag`: `changes` (wire names, only those carrying a value) applied to every
        channel of `tag` → how many channels the tag has."""
        _required(tag)
        values = _cleaned(changes)
        try:
            async with self.db.transaction() as tx:
                repo = ChannelRepository(tx)
                channels = await repo.with_tag(tag, lock=True)
                if not channels:
                    raise NotFound(TAG_NOT_FOUND)
                for channel in channels:
                    require_key_holder(actor_role, channel, values, key_reentered=False)
                    for name, value in values.items():
                        setattr(channel, name, value)
                    await repo.save(channel)
        except IntegrityError:
            raise BadRequest(COLLIDING) from None
        if values:
            await self.channels.changed()
        return len(channels)

    async def tag_models(self, tag: str) -> str:
        """`GET /api/channel/tag/models`: the models of the tag's channels, each once, in the order they
        first appear (channels by id) → a comma list."""
        _required(tag)
        async with self.db.transaction() as tx:
            channels = await ChannelRepository(tx).with_tag(tag)
        if not channels:
            raise NotFound(TAG_NOT_FOUND)
        models: dict[str, None] = {}
        for channel in channels:
            models.update(dict.fromkeys(split_list(channel.models)))
        return ",".join(models)
