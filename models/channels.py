"""The `channels` table: upstream model sources (docs/api/channels.md#channel-fields).

Keys are stored encrypted (`key_encrypted`, one per line for multi-key channels) with an HMAC digest of
the whole key text for exact search. `used_quota` is advanced by the quota sync.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Float,
    Integer,
    String,
    Text,
    delete,
    distinct,
    false,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from core.enums import ChannelStatus
from core.multikey import MultiKeyState
from models import query
from models.abilities import Ability
from models.base import Base, Id, never_reuse_ids


class Channel(Base):
    __tablename__ = "channels"
    __table_args__ = never_reuse_ids()

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    type: Mapped[int] = mapped_column(Integer, default=0)
    name: Mapped[str] = mapped_column(String(100), default="")
    key_encrypted: Mapped[str] = mapped_column(Text, default="")
    key_digest: Mapped[str] = mapped_column(String(64), default="", index=True)
    status: Mapped[int] = mapped_column(Integer, default=1)
    models: Mapped[str] = mapped_column(Text, default="")
    group: Mapped[str] = mapped_column(Text, default="")
    priority: Mapped[int] = mapped_column(BigInteger, default=0)
    weight: Mapped[int] = mapped_column(Integer, default=0)
    base_url: Mapped[str] = mapped_column(String(255), default="")
    test_model: Mapped[str] = mapped_column(String(255), default="")
    openai_organization: Mapped[str] = mapped_column(String(255), default="")
    other: Mapped[str] = mapped_column(Text, default="")
    tag: Mapped[str] = mapped_column(String(64), default="", index=True)
    remark: Mapped[str] = mapped_column(String(255), default="")
    model_mapping: Mapped[str] = mapped_column(Text, default="")
    status_code_mapping: Mapped[str] = mapped_column(Text, default="")
    setting: Mapped[str] = mapped_column(Text, default="")
    param_override: Mapped[str] = mapped_column(Text, default="")
    header_override: Mapped[str] = mapped_column(Text, default="")
    settings: Mapped[str] = mapped_column(Text, default="")
    auto_ban: Mapped[int] = mapped_column(Integer, default=1)
    balance: Mapped[float] = mapped_column(Float, default=0.0)
    balance_updated_time: Mapped[int] = mapped_column(BigInteger, default=0)
    used_quota: Mapped[int] = mapped_column(BigInteger, default=0)
    created_time: Mapped[int] = mapped_column(BigInteger, default=0)
    test_time: Mapped[int] = mapped_column(BigInteger, default=0)
    response_time: Mapped[int] = mapped_column(Integer, default=0)
    other_info: Mapped[str] = mapped_column(Text, default="")
    channel_info: Mapped[str] = mapped_column(Text, default="")


# ---- lists and abilities ------------------------------------------------------------------------------

def split_list(text: str | None) -> list[str]:
    """A comma list as stored in `models` and `group`: items trimmed, empties dropped, first occurrence
    kept."""
    out: list[str] = []
    for item in (text or "").split(","):
        item = item.strip()
        if item and item not in out:
            out.append(item)
    return out


def load_json(text: str | None) -> dict[str, Any]:
    """A JSON-object column; empty or damaged text reads as {}."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def ability_rows(channel: Channel) -> list[dict[str, Any]]:
    """One row per (group × model) of the channel (docs/api/channels.md#abilities-and-groups); no group means
    `default`."""
    enabled = (channel.status == ChannelStatus.ENABLED
               and MultiKeyState.parse(channel.channel_info).has_enabled_key())
    return [{"group": group, "model": model, "channel_id": channel.id, "enabled": enabled,
             "priority": channel.priority or 0, "weight": channel.weight or 0, "tag": channel.tag or ""}
            for group in (split_list(channel.group) or ["default"]) for model in split_list(channel.models)]


@dataclass(frozen=True, slots=True)
class ChannelFilter:
    """What the list and search routes narrow by; every condition is ANDed.

    `keyword` matches the id (when it is a number), a case-insensitive substring of `name` or `base_url`,
    or — through `key_digest` — the whole key text. `group` is one item of the group list and `model` a
    substring of one item of the model list (both case-insensitive). `tag` is the whole tag, case-sensitive
    (empty = any tag). `statuses` empty = any status."""

    keyword: str = ""
    key_digest: str = ""
    group: str = ""
    model: str = ""
    tag: str = ""
    statuses: tuple[int, ...] = ()
    type: int | None = None


CHUNK = 500  # ids per IN (…) list


class ChannelRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def get(self, channel_id: int) -> Channel | None:
        return await self.s.get(Channel, channel_id)

    async def get_for_update(self, channel_id: int) -> Channel | None:
        return await self.s.scalar(select(Channel).where(Channel.id == channel_id).with_for_update())

    async def add(self, channel: Channel) -> int:
        """Insert the channel and its abilities."""
        self.s.add(channel)
        await self.s.flush()
        await self.replace_abilities(channel)
        return channel.id

    async def save(self, channel: Channel) -> None:
        """Write the changed attributes of a loaded channel and rebuild its abilities."""
        await self.s.flush()
        await self.replace_abilities(channel)

    async def replace_abilities(self, channel: Channel) -> None:
        await self.s.execute(delete(Ability).where(Ability.channel_id == channel.id))
        rows = ability_rows(channel)
        if rows:
            await self.s.execute(insert(Ability), rows)

    async def delete(self, channel_id: int) -> bool:
        """The channel and its abilities; False when there was no such channel."""
        return await self.delete_many([channel_id]) == 1

    async def delete_many(self, ids: Sequence[int]) -> int:
        """The channels `ids` and their abilities → how many channels there were to delete."""
        deleted = 0
        for start in range(0, len(ids), CHUNK):
            chunk = list(ids[start:start + CHUNK])
            await self.s.execute(delete(Ability).where(Ability.channel_id.in_(chunk)))
            result = await self.s.execute(delete(Channel).where(Channel.id.in_(chunk)))
            deleted += int(result.rowcount)  # type: ignore[attr-defined]
        return deleted

    async def existing_ids(self, ids: Sequence[int]) -> list[int]:
        """The ids among `ids` that are channels, locked (`SELECT … FOR UPDATE`), by id."""
        out: list[int] = []
        for start in range(0, len(ids), CHUNK):
            chunk = list(ids[start:start + CHUNK])
            out += (await self.s.scalars(select(Channel.id).where(Channel.id.in_(chunk)).order_by(Channel.id)
                                         .with_for_update())).all()
        return sorted(out)

    async def set_tag(self, ids: Sequence[int], tag: str) -> None:
        """The tag of the channels `ids` and of their abilities."""
        for start in range(0, len(ids), CHUNK):
            chunk = list(ids[start:start + CHUNK])
            await self.s.execute(update(Channel).where(Channel.id.in_(chunk)).values(tag=tag)
                                 .execution_options(synchronize_session=False))
            await self.s.execute(update(Ability).where(Ability.channel_id.in_(chunk)).values(tag=tag)
                                 .execution_options(synchronize_session=False))

    async def ids_with_status(self, statuses: Sequence[int]) -> list[int]:
        """The ids of the channels whose status is one of `statuses`, locked, by id."""
        return list((await self.s.scalars(select(Channel.id).where(Channel.status.in_(statuses))
                                          .order_by(Channel.id).with_for_update())).all())

    async def with_tag(self, tag: str, *, lock: bool = False) -> list[Channel]:
        """The channels whose tag is exactly `tag`, by id (locked with `lock`)."""
        stmt = select(Channel).where(query.exact(self.s, Channel.tag, tag)).order_by(Channel.id)
        return list((await self.s.scalars(stmt.with_for_update() if lock else stmt)).all())

    async def with_statuses(self, statuses: Sequence[int], types: Sequence[int] | None = None
                            ) -> list[Channel]:
        """The channels whose status is one of `statuses` (and, given `types`, whose type is one of
        them), by id, unlocked: what a channel test or balance run goes through."""
        query = select(Channel).where(Channel.status.in_(statuses))
        if types is not None:
            query = query.where(Channel.type.in_(types))
        return list((await self.s.scalars(query.order_by(Channel.id))).all())

    async def record_test(self, channel_id: int, when: int, response_ms: int) -> None:
        """The time and latency (ms) of the channel's last successful test; nothing else changes."""
        await self.s.execute(update(Channel).where(Channel.id == channel_id)
                             .values(test_time=when, response_time=response_ms)
                             .execution_options(synchronize_session=False))

    async def record_balance(self, channel_id: int, balance: float, when: int) -> None:
        """The channel's balance (USD) and when it was read; nothing else changes."""
        await self.s.execute(update(Channel).where(Channel.id == channel_id)
                             .values(balance=balance, balance_updated_time=when)
                             .execution_options(synchronize_session=False))

    async def all_ids(self) -> list[int]:
        return list((await self.s.scalars(select(Channel.id).order_by(Channel.id))).all())

    async def delete_stray_abilities(self) -> int:
        """Abilities whose channel no longer exists → how many were deleted."""
        result = await self.s.execute(delete(Ability).where(Ability.channel_id.not_in(select(Channel.id))))
        return int(result.rowcount)  # type: ignore[attr-defined]

    # ---- lists --------------------------------------------------------------------------------------

    def _conditions(self, f: ChannelFilter, *, with_type: bool = True) -> list[ColumnElement[bool]]:
        conds: list[ColumnElement[bool]] = []
        if f.statuses:
            conds.append(Channel.status.in_(f.statuses))
        if with_type and f.type is not None:
            conds.append(Channel.type == f.type)
        if f.keyword:
            any_of: list[ColumnElement[bool]] = [query.contains(Channel.name, f.keyword),
                                                 query.contains(Channel.base_url, f.keyword)]
            if query.is_id(f.keyword):
                any_of.append(Channel.id == int(f.keyword))
            if f.key_digest:
                any_of.append(Channel.key_digest == f.key_digest)
            conds.append(or_(*any_of))
        if f.group:
            if "," in f.group:
                conds.append(false())
            conds.append(query.contains(literal(",") + Channel.group + literal(","), f",{f.group},"))
        if f.model:
            if "," in f.model:  # no single item can contain it
                conds.append(false())
            else:
                conds.append(query.contains(Channel.models, f.model))
        if f.tag:
            conds.append(query.exact(self.s, Channel.tag, f.tag))
        return conds

    @staticmethod
    def _order(id_sort: bool) -> list[Any]:
        return [Channel.id.desc()] if id_sort else [Channel.priority.desc(), Channel.id.desc()]

    async def page(self, f: ChannelFilter, *, offset: int, limit: int, id_sort: bool
                   ) -> tuple[Sequence[Channel], int]:
        return await query.page(self.s, Channel, self._conditions(f), order_by=self._order(id_sort),
                                offset=offset, limit=limit)

    async def tag_page(self, f: ChannelFilter, *, offset: int, limit: int, id_sort: bool
                       ) -> tuple[Sequence[Channel], int]:
        """Pages over the distinct non-empty tags (in tag order) of the matching channels: the channels of
        the page's tags, and the number of tags."""
        conds = [*self._conditions(f), Channel.tag != ""]
        total = int(await self.s.scalar(select(func.count(distinct(Channel.tag))).where(*conds)) or 0)
        tags = list((await self.s.scalars(select(Channel.tag).where(*conds).group_by(Channel.tag)
                                          .order_by(Channel.tag).offset(offset).limit(limit))).all())
        if not tags:
            return [], total
        rows = (await self.s.scalars(select(Channel).where(*conds, Channel.tag.in_(tags))
                                     .order_by(Channel.tag, *self._order(id_sort)))).all()
        return rows, total

    async def type_counts(self, f: ChannelFilter) -> dict[int, int]:
        """Matching channels per type, the `type` filter aside."""
        conds = self._conditions(f, with_type=False)
        rows = await self.s.execute(select(Channel.type, func.count()).where(*conds).group_by(Channel.type))
        return {int(t): int(n) for t, n in rows.all()}
