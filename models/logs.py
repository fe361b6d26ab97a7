"""The `logs` table (management.md E.1): consume, top-up, manage, system, error and refund records.

Rows are written by the quota sync (consume, top-up and manage logs arrive with the usage they describe)
and by services for system events. `ref` is internal: the hold id or idempotency key of the entry that
produced the row, unique, so no entry can ever produce two rows.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import BigInteger, Boolean, Index, Integer, String, Text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base, Id

LOG_TOPUP, LOG_CONSUME, LOG_MANAGE, LOG_SYSTEM, LOG_ERROR, LOG_REFUND = 1, 2, 3, 4, 5, 6


class Log(Base):
    __tablename__ = "logs"
    __table_args__ = (
        Index("ix_logs_user_id_created_at", "user_id", "created_at"),
        Index("ix_logs_created_at", "created_at"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[int] = mapped_column(BigInteger, default=0)
    type: Mapped[int] = mapped_column(Integer, default=0, index=True)
    content: Mapped[str] = mapped_column(Text, default="")
    username: Mapped[str] = mapped_column(String(64), default="", index=True)
    token_name: Mapped[str] = mapped_column(String(64), default="", index=True)
    model_name: Mapped[str] = mapped_column(String(255), default="", index=True)
    quota: Mapped[int] = mapped_column(BigInteger, default=0)
    prompt_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    completion_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    use_time: Mapped[int] = mapped_column(Integer, default=0)
    is_stream: Mapped[bool] = mapped_column(Boolean, default=False)
    channel: Mapped[int] = mapped_column(BigInteger, default=0, index=True)
    token_id: Mapped[int] = mapped_column(BigInteger, default=0, index=True)
    group: Mapped[str] = mapped_column(String(64), default="")
    ip: Mapped[str] = mapped_column(String(64), default="")
    request_id: Mapped[str] = mapped_column(String(128), default="", index=True)
    other: Mapped[str] = mapped_column(Text, default="")
    ref: Mapped[str | None] = mapped_column(String(64), nullable=True, unique=True)


class LogRepository:
    """Writes of log rows that are not balance changes (manage and system events).

    Balance-changing logs (consume, top-up, manage add_quota) travel with their change through the quota
    engine and are inserted by the sync, never here."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def add(self, *, type: int, user_id: int, username: str, content: str, created_at: int,
                  other: dict[str, Any] | None = None, quota: int = 0) -> None:
        self.s.add(Log(
            type=type, user_id=user_id, username=username, content=content, created_at=created_at,
            quota=quota, other=json.dumps(other, separators=(",", ":"), ensure_ascii=False) if other else "",
            token_name="", model_name="", prompt_tokens=0, completion_tokens=0, use_time=0, is_stream=False,
            channel=0, token_id=0, group="", ip="", request_id="",
        ))
        await self.s.flush()
