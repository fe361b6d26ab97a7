"""What channel selection reads from SQL (off the hot path: at start and after a broadcast change), and
the two writes the gateway itself makes to channels: an automatic status change of a channel or of one
key of a multi-key channel.

Channel JSON columns written here follow new-api: `other_info` = `{status_reason, status_time}`;
`channel_info` is read and written only through `core.multikey.MultiKeyState`.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from core.enums import ChannelStatus
from core.multikey import MultiKeyState
from models.abilities import Ability
from models.channels import Channel, load_json

__all__ = ["auto_disable_channel", "auto_disable_key", "dump_json", "load_json", "load_routing"]


def dump_json(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


async def load_routing(tx: AsyncSession) -> tuple[list[Channel], list[Ability]]:
    channels = list((await tx.scalars(select(Channel).order_by(Channel.id))).all())
    abilities = list((await tx.scalars(select(Ability))).all())
    return channels, abilities


async def auto_disable_channel(tx: AsyncSession, channel_id: int, reason: str, now: int) -> bool:
    """Status 1 → 3 with its reason; False when the channel was not enabled (nothing changed)."""
    enabled = Channel.status == ChannelStatus.ENABLED
    other = await tx.scalar(select(Channel.other_info).where(Channel.id == channel_id, enabled)
                            .with_for_update())
    if other is None:
        return False
    info = load_json(other)
    info.update(status_reason=reason[:255], status_time=now)
    result = await tx.execute(update(Channel).where(Channel.id == channel_id, enabled)
                              .values(status=ChannelStatus.AUTO_DISABLED, other_info=dump_json(info)))
    await tx.execute(update(Ability).where(Ability.channel_id == channel_id).values(enabled=False))
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def auto_disable_key(tx: AsyncSession, channel_id: int, index: int, reason: str, now: int
                           ) -> tuple[bool, bool]:
    """Key `index` of a multi-key channel → 3. Returns (changed, channel now has no enabled key); with
    none left the channel itself gets status 3 "all keys are disabled"."""
    row = (await tx.execute(select(Channel.channel_info, Channel.status, Channel.other_info)
                            .where(Channel.id == channel_id).with_for_update())).first()
    if row is None:
        return False, False
    keys = MultiKeyState.parse(row[0])
    if not keys.disable(index, reason, now):
        return False, False
    none_left = not keys.enabled_indices()
    values: dict[str, Any] = {"channel_info": keys.dump()}
    if none_left and row[1] == ChannelStatus.ENABLED:
        other = load_json(row[2])
        other.update(status_reason="all keys are disabled", status_time=now)
        values.update(status=ChannelStatus.AUTO_DISABLED, other_info=dump_json(other))
        await tx.execute(update(Ability).where(Ability.channel_id == channel_id).values(enabled=False))
    await tx.execute(update(Channel).where(Channel.id == channel_id).values(**values))
    return True, none_left
