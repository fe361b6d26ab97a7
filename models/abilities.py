"""The `abilities` table (docs/api/channels.md#abilities-and-groups): one row per (group, model, channel),
rebuilt whenever a channel is saved, so that channel selection reads a flat index instead of parsing every
channel's lists.

`enabled` mirrors the channel: status 1 (and, for a multi-key channel, at least one key enabled).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base


class Ability(Base):
    __tablename__ = "abilities"
    __table_args__ = (Index("ix_abilities_channel_id", "channel_id"),)

    group: Mapped[str] = mapped_column(String(64), primary_key=True)
    model: Mapped[str] = mapped_column(String(255), primary_key=True)
    channel_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    priority: Mapped[int] = mapped_column(BigInteger, default=0)
    weight: Mapped[int] = mapped_column(Integer, default=0)
    tag: Mapped[str] = mapped_column(String(64), default="")
