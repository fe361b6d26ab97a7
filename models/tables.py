"""The tables of the foundation: users, options, setups and the SQL session store.

Later features add their tables in modules of their own and in new migrations; the mapped classes here
mirror `migrations/versions/0001_foundation.py` exactly (a test compares them).
"""

from __future__ import annotations

import unicodedata
from typing import Any

from sqlalchemy import BigInteger, Index, Integer, String, Text, event
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base, Id, KeyString, never_reuse_ids

USERNAME_KEY_MAX = 64


class User(Base):
    __tablename__ = "users"
    __table_args__ = never_reuse_ids()

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    username: Mapped[str] = mapped_column(String(64))
    # lookup keys, normalized by `models.users.keys_for`; unique on every database alike
    username_key: Mapped[str] = mapped_column(KeyString(USERNAME_KEY_MAX), unique=True)
    email_key: Mapped[str | None] = mapped_column(KeyString(128), unique=True, nullable=True)
    password: Mapped[str] = mapped_column(String(255))
    display_name: Mapped[str] = mapped_column(String(64), default="")
    email: Mapped[str] = mapped_column(String(128), default="")
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


def username_key(username: str) -> str:
    """Usernames are unique regardless of case and of compatibility forms: `Alice`, `alice` and `ａｌｉｃｅ`
    are one account, on every database (NFKC, case-folded, NFKC again: the key is its own key)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", username).casefold())


def email_key(email: str) -> str | None:
    return email.strip().lower() or None


@event.listens_for(User, "before_insert")
def _fill_keys(_mapper: Any, _conn: Any, user: User) -> None:
    user.username_key = username_key(user.username)
    user.email_key = email_key(user.email or "")


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
