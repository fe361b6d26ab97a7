"""The `passkey_credentials` table: the passkeys (WebAuthn credentials) users log in and verify with.

A row holds what verifying an assertion needs — the credential's id (base64url, unique across users), its
COSE public key (base64url), the last signature counter — and what the user is shown (attachment, when
made and last used). Nothing here is secret: a public key proves nothing without the authenticator.

`record_use` is the counter check and the update in ONE conditional statement: it succeeds only when the
received counter is greater than the stored one (or both are 0, for authenticators that do not count), so
two assertions racing with one counter value cannot both pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import BigInteger, Boolean, String, Text, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base, Id, KeyString, never_reuse_ids

CREDENTIAL_ID_MAX = 512  # base64url characters (384 bytes; authenticators use 16–128)


class PasskeyCredential(Base):
    __tablename__ = "passkey_credentials"
    __table_args__ = never_reuse_ids()

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(BigInteger, index=True)
    credential_id: Mapped[str] = mapped_column(KeyString(CREDENTIAL_ID_MAX), unique=True)
    public_key: Mapped[str] = mapped_column(Text)  # the COSE key, base64url
    sign_count: Mapped[int] = mapped_column(BigInteger, default=0)
    aaguid: Mapped[str] = mapped_column(String(36), default="")
    transports: Mapped[str] = mapped_column(String(255), default="")  # comma-separated
    attachment: Mapped[str] = mapped_column(String(32), default="")  # "" | platform | cross-platform
    backup_eligible: Mapped[bool] = mapped_column(Boolean, default=False)
    backup_state: Mapped[bool] = mapped_column(Boolean, default=False)
    clone_warning: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[int] = mapped_column(BigInteger, default=0)
    last_used_at: Mapped[int] = mapped_column(BigInteger, default=0)


class PasskeyRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def count(self, user_id: int) -> int:
        return int(await self.s.scalar(
            select(func.count()).select_from(PasskeyCredential).where(PasskeyCredential.user_id == user_id))
            or 0)

    async def counts(self, user_ids: Iterable[int]) -> dict[int, int]:
        """User id → how many passkeys, for those of `user_ids` that have any (one query, for a page)."""
        ids = sorted(set(user_ids))
        if not ids:
            return {}
        rows = await self.s.execute(select(PasskeyCredential.user_id, func.count())
                                    .where(PasskeyCredential.user_id.in_(ids))
                                    .group_by(PasskeyCredential.user_id))
        return {int(i): int(n) for i, n in rows.all()}

    async def of_user(self, user_id: int) -> Sequence[PasskeyCredential]:
        """The user's passkeys, oldest first."""
        return (await self.s.scalars(select(PasskeyCredential).where(PasskeyCredential.user_id == user_id)
                                     .order_by(PasskeyCredential.id))).all()

    async def by_credential_id(self, credential_id: str) -> PasskeyCredential | None:
        return await self.s.scalar(select(PasskeyCredential)
                                   .where(PasskeyCredential.credential_id == credential_id))

    async def add(self, row: PasskeyCredential) -> None:
        self.s.add(row)
        await self.s.flush()

    async def delete(self, user_id: int, credential_id: str | None = None) -> int:
        """Delete the user's passkey with this id, or all of them; the number deleted."""
        stmt = delete(PasskeyCredential).where(PasskeyCredential.user_id == user_id)
        if credential_id is not None:
            stmt = stmt.where(PasskeyCredential.credential_id == credential_id)
        return int((await self.s.execute(stmt)).rowcount)  # type: ignore[attr-defined]

    async def record_use(self, row_id: int, sign_count: int, now: int) -> bool:
        """Store the counter and the time of a verified assertion, if the counter moved forward."""
        c = PasskeyCredential
        # an authenticator that does not count sends 0 every time: accepted while the stored count is 0 too
        moved = c.sign_count == 0 if sign_count == 0 else c.sign_count < sign_count
        result = await self.s.execute(update(c).where(c.id == row_id, moved)
                                      .values(sign_count=sign_count, last_used_at=now))
        return int(result.rowcount) == 1  # type: ignore[attr-defined]

    async def flag_clone(self, row_id: int) -> None:
        await self.s.execute(update(PasskeyCredential).where(PasskeyCredential.id == row_id)
                             .values(clone_warning=True))
