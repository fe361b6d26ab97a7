"""The tables of the foundation: users, options, setups and the SQL session store.

Later features add their tables in modules of their own and in new migrations; the mapped classes here
mirror `migrations/versions/0001_foundation.py` exactly (a test compares them).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base, Id


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    password: Mapped[str] = mapped_column(String(255))
    display_name: Mapped[str] = mapped_column(String(64), default="")
    email: Mapped[str] = mapped_column(String(128), default="", index=True)
    role: Mapped[int] = mapped_column(Integer, default=1)
    status: Mapped[int] = mapped_column(Integer, default=1)
    group: Mapped[str] = mapped_column(String(64), default="default")
    quota: Mapped[int] = mapped_column(BigInteger, default=0)
    used_quota: Mapped[int] = mapped_column(BigInteger, default=0)
    request_count: Mapped[int] = mapped_column(BigInteger, default=0)
    aff_code: Mapped[str | None] = mapped_column(String(32), unique=True, nullable=True)
    aff_count: Mapped[int] = mapped_column(BigInteger, default=0)
    aff_quota: Mapped[int] = mapped_column(BigInteger, default=0)
    aff_history_quota: Mapped[int] = mapped_column(BigInteger, default=0)
    inviter_id: Mapped[int] = mapped_column(BigInteger, default=0)
    setting: Mapped[str] = mapped_column(Text, default="")
    remark: Mapped[str] = mapped_column(String(255), default="")
    stripe_customer: Mapped[str] = mapped_column(String(128), default="")
    access_token: Mapped[str | None] = mapped_column(String(64), unique=True, nullable=True)
    created_at: Mapped[int] = mapped_column(BigInteger, default=0)
    last_login_at: Mapped[int] = mapped_column(BigInteger, default=0)
    deleted_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True, index=True)


class Option(Base):
    __tablename__ = "options"

    key: Mapped[str] = mapped_column(String(128), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class Setup(Base):
    """One row with the fixed id 1 once the system is set up; concurrent setups collide on it."""

    __tablename__ = "setups"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    version: Mapped[str] = mapped_column(String(32))
    initialized_at: Mapped[int] = mapped_column(BigInteger)


class SessionRow(Base):
    """Server-side login sessions when no Redis is configured; `id` is sha256(cookie value)."""

    __tablename__ = "sessions"
    __table_args__ = (Index("ix_sessions_expires_at", "expires_at"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True, index=True)
    data: Mapped[str] = mapped_column(Text)
    expires_at: Mapped[int] = mapped_column(BigInteger)
