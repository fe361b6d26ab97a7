"""Queries on the SQL session store (used when no Redis is configured)."""

from __future__ import annotations

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from models.tables import SessionRow, User


class SessionRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def get(self, sid: str, now: int, *, lock: bool = False) -> SessionRow | None:
        stmt = select(SessionRow).where(SessionRow.id == sid)
        row = await self.s.scalar(stmt.with_for_update() if lock else stmt)
        return row if row is not None and row.expires_at > now else None

    async def set_data(self, sid: str, data: str, expires_at: int | None = None) -> None:
        """Replace a record's data (and its expiry when given), its owner unchanged."""
        values: dict[str, object] = {"data": data}
        if expires_at is not None:
            values["expires_at"] = expires_at
        await self.s.execute(update(SessionRow).where(SessionRow.id == sid).values(**values))

    async def lock_owner(self, user_id: int) -> None:
        """Lock the user's row: a rotation and a revocation of the same user's sessions take this lock
        first, so they run one after the other, and always lock in the same order (user, then sessions)."""
        await self.s.execute(select(User.id).where(User.id == user_id).with_for_update())

    async def rename(self, sid: str, new_sid: str, data: str, expires_at: int) -> None:
        """Move a record to a new id in place (the same row: a statement waiting on its lock, such as
        `delete_for_user`, then acts on the renamed row)."""
        await self.s.execute(update(SessionRow).where(SessionRow.id == sid)
                             .values(id=new_sid, data=data, expires_at=expires_at))

    async def upsert(self, sid: str, user_id: int | None, data: str, expires_at: int) -> None:
        changed = await self.s.execute(
            update(SessionRow).where(SessionRow.id == sid)
            .values(user_id=user_id, data=data, expires_at=expires_at)
        )
        if changed.rowcount == 0:  # type: ignore[attr-defined]
            self.s.add(SessionRow(id=sid, user_id=user_id, data=data, expires_at=expires_at))

    async def delete(self, sid: str) -> None:
        await self.s.execute(delete(SessionRow).where(SessionRow.id == sid))

    async def delete_for_user(self, user_id: int, keep: str | None) -> None:
        stmt = delete(SessionRow).where(SessionRow.user_id == user_id)
        if keep is not None:
            stmt = stmt.where(SessionRow.id != keep)
        await self.s.execute(stmt)

    async def purge_expired(self, now: int) -> int:
        result = await self.s.execute(delete(SessionRow).where(SessionRow.expires_at <= now))
        return int(result.rowcount)  # type: ignore[attr-defined]
