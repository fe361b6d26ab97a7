"""Queries on `options` and `setups`."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from models.tables import Option, Setup


class OptionRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def all(self) -> dict[str, str]:
        rows = await self.s.execute(select(Option.key, Option.value))
        return {str(k): str(v) for k, v in rows.all()}

    async def locked(self, keys: list[str]) -> dict[str, str]:
        """The stored texts of `keys`, their rows locked until the transaction ends (an absent key is not
        in the result: it has no row to lock)."""
        rows = await self.s.execute(select(Option.key, Option.value).where(Option.key.in_(keys))
                                    .order_by(Option.key).with_for_update())
        return {str(k): str(v) for k, v in rows.all()}

    async def insert(self, key: str, value: str) -> None:
        """A first row for `key`: IntegrityError when another transaction wrote one meanwhile."""
        self.s.add(Option(key=key, value=value))
        await self.s.flush()

    async def put(self, key: str, value: str) -> None:
        result = await self.s.execute(update(Option).where(Option.key == key).values(value=value))
        if result.rowcount == 0:  # type: ignore[attr-defined]
            self.s.add(Option(key=key, value=value))
            await self.s.flush()


class SetupRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def done(self) -> bool:
        return await self.s.scalar(select(Setup.id).where(Setup.id == 1)) is not None

    async def insert(self, version: str, now: int) -> None:
        """Insert the single setups row; a concurrent setup fails here on the primary key."""
        self.s.add(Setup(id=1, version=version, initialized_at=now))
        await self.s.flush()
