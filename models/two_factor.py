"""The `two_factor` and `two_factor_backup_codes` tables: each user's TOTP secret (encrypted), whether it is
on or only set up, the last time step a code was accepted for, and the backup codes (keyed digests only)
(docs/api/auth.md#two-factor-authentication).

Every single-use step is one conditional statement whose row count says whether this caller won, so that
concurrent attempts on any worker or node cannot both succeed: a TOTP step is taken by raising
`last_used_step` only if it is below the step (`take_step`), a backup code is spent by deleting its row
(`spend_backup_code`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import BigInteger, Boolean, String, Text, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base, Id, never_reuse_ids
from models.tables import User

DIGEST_LENGTH = 64  # hex HMAC-SHA256


class TwoFactor(Base):
    __tablename__ = "two_factor"

    user_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    secret: Mapped[str] = mapped_column(Text)  # `SecretBox.encrypt` of the base32 secret
    enabled: Mapped[bool] = mapped_column(Boolean, default=False)  # False: set up, waiting for `enable`
    last_used_step: Mapped[int] = mapped_column(BigInteger, default=0)  # the replay guard
    created_at: Mapped[int] = mapped_column(BigInteger, default=0)
    enabled_at: Mapped[int] = mapped_column(BigInteger, default=0)


class BackupCode(Base):
    __tablename__ = "two_factor_backup_codes"
    __table_args__ = never_reuse_ids()

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(BigInteger, index=True)
    digest: Mapped[str] = mapped_column(String(DIGEST_LENGTH))  # `SecretBox.digest` of the normalized code
    created_at: Mapped[int] = mapped_column(BigInteger, default=0)


class TwoFactorRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def get(self, user_id: int, *, lock: bool = False) -> TwoFactor | None:
        stmt = select(TwoFactor).where(TwoFactor.user_id == user_id)
        return await self.s.scalar(stmt.with_for_update() if lock else stmt)

    async def is_enabled(self, user_id: int) -> bool:
        found = await self.s.scalar(select(TwoFactor.enabled).where(TwoFactor.user_id == user_id))
        return bool(found)

    async def enabled_among(self, user_ids: Iterable[int]) -> set[int]:
        """Those of `user_ids` whose 2FA is on (one query, for a page of users)."""
        ids = sorted(set(user_ids))
        if not ids:
            return set()
        rows = await self.s.scalars(select(TwoFactor.user_id).where(TwoFactor.user_id.in_(ids),
                                                                    TwoFactor.enabled.is_(True)))
        return {int(i) for i in rows.all()}

    async def start_setup(self, user_id: int, secret: str, digests: Sequence[str], now: int) -> None:
        """A pending setup (not enabled) with its backup codes, replacing any earlier pending one."""
        await self.delete(user_id)
        self.s.add(TwoFactor(user_id=user_id, secret=secret, enabled=False, last_used_step=0, created_at=now,
                             enabled_at=0))
        await self.s.flush()
        await self.replace_backup_codes(user_id, digests, now)

    async def enable(self, user_id: int, step: int, now: int) -> bool:
        """Turn a pending setup on, taking `step` (the code that proved it); False if it was not pending or
        the step was taken already."""
        changed = await self.s.execute(
            update(TwoFactor)
            .where(TwoFactor.user_id == user_id, TwoFactor.enabled.is_(False),
                   TwoFactor.last_used_step < step)
            .values(enabled=True, last_used_step=step, enabled_at=now)
        )
        return bool(changed.rowcount)  # type: ignore[attr-defined]

    async def take_step(self, user_id: int, step: int) -> bool:
        """Accept a TOTP code of time step `step` once: True only for the one caller that raised
        `last_used_step` to it (an equal or earlier step is a replay)."""
        changed = await self.s.execute(
            update(TwoFactor)
            .where(TwoFactor.user_id == user_id, TwoFactor.enabled.is_(True), TwoFactor.last_used_step < step)
            .values(last_used_step=step)
        )
        return bool(changed.rowcount)  # type: ignore[attr-defined]

    async def backup_codes(self, user_id: int) -> list[tuple[int, str]]:
        """(id, digest) of the user's unspent backup codes."""
        rows = await self.s.execute(
            select(BackupCode.id, BackupCode.digest).where(BackupCode.user_id == user_id)
            .order_by(BackupCode.id)
        )
        return [(int(row[0]), str(row[1])) for row in rows]

    async def count_backup_codes(self, user_id: int) -> int:
        found = await self.s.scalar(select(func.count()).select_from(BackupCode)
                                    .where(BackupCode.user_id == user_id))
        return int(found or 0)

    async def spend_backup_code(self, code_id: int) -> bool:
        """Spend one backup code: True only for the one caller whose DELETE removed it."""
        deleted = await self.s.execute(delete(BackupCode).where(BackupCode.id == code_id))
        return bool(deleted.rowcount)  # type: ignore[attr-defined]

    async def replace_backup_codes(self, user_id: int, digests: Sequence[str], now: int) -> None:
        await self.s.execute(delete(BackupCode).where(BackupCode.user_id == user_id))
        self.s.add_all(BackupCode(user_id=user_id, digest=d, created_at=now) for d in digests)
        await self.s.flush()

    async def delete(self, user_id: int) -> bool:
        """Remove the secret and every backup code; True if there was a secret."""
        await self.s.execute(delete(BackupCode).where(BackupCode.user_id == user_id))
        deleted = await self.s.execute(delete(TwoFactor).where(TwoFactor.user_id == user_id))
        return bool(deleted.rowcount)  # type: ignore[attr-defined]

    async def stats(self) -> tuple[int, int]:
        """(live users, live users with 2FA on)."""
        total = await self.s.scalar(select(func.count()).select_from(User).where(User.deleted_at.is_(None)))
        enabled = await self.s.scalar(
            select(func.count()).select_from(TwoFactor).join(User, User.id == TwoFactor.user_id)
            .where(TwoFactor.enabled.is_(True), User.deleted_at.is_(None))
        )
        return int(total or 0), int(enabled or 0)
