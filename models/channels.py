"""The `channels` table: upstream model sources (management.md C.1, gateway.md §8).

Keys are stored encrypted (`key_encrypted`, one per line for multi-key channels) with an HMAC digest of
the whole key text for exact search. `used_quota` is advanced by the quota sync.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Float, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base, Id


class Channel(Base):
    __tablename__ = "channels"

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
