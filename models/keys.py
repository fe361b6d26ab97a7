"""The `tokens` table: API keys callers use on the model-call routes (gateway.md §7).

The key itself is stored encrypted (`key_encrypted`) and as an HMAC digest (`key_digest`) for lookup.
`remain_quota` is the durable remaining quota; the live one is in the quota store.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base, Id


class ApiKey(Base):
    __tablename__ = "tokens"

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(BigInteger, index=True)
    name: Mapped[str] = mapped_column(String(64), default="")
    key_digest: Mapped[str] = mapped_column(String(64), unique=True)
    key_encrypted: Mapped[str] = mapped_column(Text)
    status: Mapped[int] = mapped_column(Integer, default=1)
    created_time: Mapped[int] = mapped_column(BigInteger, default=0)
    accessed_time: Mapped[int] = mapped_column(BigInteger, default=0)
    expired_time: Mapped[int] = mapped_column(BigInteger, default=-1)
    remain_quota: Mapped[int] = mapped_column(BigInteger, default=0)
    used_quota: Mapped[int] = mapped_column(BigInteger, default=0)
    unlimited_quota: Mapped[bool] = mapped_column(Boolean, default=False)
    model_limits_enabled: Mapped[bool] = mapped_column(Boolean, default=False)
    model_limits: Mapped[str] = mapped_column(Text, default="")
    allow_ips: Mapped[str] = mapped_column(Text, default="")
    group: Mapped[str] = mapped_column(String(64), default="")
    deleted_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True, index=True)
