"""Short-lived keys in SQL (`kv`) for a deployment without Redis: what account security keeps between
two requests — passkey login challenges, e-mail codes and their try counters, password reset tokens,
login-failure counters, the 2FA failure count and lock — so that a restart forgets none of them.

`SqlKeyValue` is the `KeyValue` of `backend/base.py` (the subset of the backend those services
use) with Redis's semantics: a key is gone once its time to live has passed (every read checks
`expires_at`), a single-use value is taken by one caller only (the row locked in one transaction: one of
any number of concurrent takers gets it), a counter counts every increment. Times to live run on wall
time, as Redis's do, not on the service clock: services that judge an expiry themselves (a code's
10 minutes) store it in the value. Expired rows are deleted every `SWEEP_EVERY` writes and by the hourly
purge, so the rows an anonymous caller can make us write (login-failure counters, login challenges)
cost space only while they live, as in Redis.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import BigInteger, Index, Text, delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base, KeyString
from models.db import Database

KEY_MAX = 191  # an indexable utf8mb4 width on every MySQL/MariaDB
SWEEP_EVERY = 256  # writes between two deletions of the expired rows
INSERT_ATTEMPTS = 3  # a concurrent first write of the same key makes an insert fail: then it updates


class KvRow(Base):
    __tablename__ = "kv"
    __table_args__ = (Index("ix_kv_expires_at", "expires_at"),)

    key: Mapped[str] = mapped_column(KeyString(KEY_MAX), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
    expires_at: Mapped[int] = mapped_column(BigInteger)  # unix time in milliseconds


class SqlKeyValue:
    def __init__(self, db: Database, now: Callable[[], float] = time.time) -> None:
        self.db = db
        self._now = now
        self._writes = 0

    def _ms(self, after: float = 0.0) -> int:
        return int((self._now() + after) * 1000)

    async def _wrote(self) -> None:
        self._writes += 1
        if self._writes >= SWEEP_EVERY:
            self._writes = 0
            await self.purge_expired()

    async def purge_expired(self) -> int:
        async with self.db.transaction() as tx:
            result = await tx.execute(delete(KvRow).where(KvRow.expires_at <= self._ms()))
            return int(result.rowcount)  # type: ignore[attr-defined]

    async def get_text(self, key: str) -> str | None:
        async with self.db.transaction() as tx:
            value: str | None = await tx.scalar(
                select(KvRow.value).where(KvRow.key == key, KvRow.expires_at > self._ms()))
            return value

    async def set_text(self, key: str, value: str, ttl: float) -> None:
        for attempt in range(INSERT_ATTEMPTS):
            try:
                async with self.db.transaction() as tx:
                    changed = await tx.execute(update(KvRow).where(KvRow.key == key).values(
                        value=value, expires_at=self._ms(ttl)))
                    if changed.rowcount == 0:  # type: ignore[attr-defined]
                        tx.add(KvRow(key=key, value=value, expires_at=self._ms(ttl)))
                break
            except IntegrityError:  # inserted meanwhile by another writer: update it
                if attempt == INSERT_ATTEMPTS - 1:
                    raise
        await self._wrote()

    async def set_text_if_absent(self, key: str, value: str, ttl: float) -> bool:
        try:
            async with self.db.transaction() as tx:
                await tx.execute(delete(KvRow).where(KvRow.key == key, KvRow.expires_at <= self._ms()))
                tx.add(KvRow(key=key, value=value, expires_at=self._ms(ttl)))
        except IntegrityError:  # a live value is there
            return False
        await self._wrote()
        return True

    async def take_text(self, key: str) -> str | None:
        async with self.db.transaction() as tx:
            row = (await tx.execute(select(KvRow.value, KvRow.expires_at).where(KvRow.key == key)
                                    .with_for_update())).first()
            if row is None:
                return None
            await tx.execute(delete(KvRow).where(KvRow.key == key))
            return str(row[0]) if int(row[1]) > self._ms() else None

    async def delete_if_equal(self, key: str, value: str) -> bool:
        async with self.db.transaction() as tx:
            result = await tx.execute(delete(KvRow).where(
                KvRow.key == key, KvRow.value == value, KvRow.expires_at > self._ms()))
            return int(result.rowcount) == 1  # type: ignore[attr-defined]

    async def delete(self, *keys: str) -> None:
        if keys:
            async with self.db.transaction() as tx:
                await tx.execute(delete(KvRow).where(KvRow.key.in_(keys)))

    async def incr(self, key: str, ttl: float) -> int:
        for attempt in range(INSERT_ATTEMPTS):
            try:
                async with self.db.transaction() as tx:
                    row = (await tx.execute(select(KvRow.value, KvRow.expires_at).where(KvRow.key == key)
                                            .with_for_update())).first()
                    now = self._ms()
                    if row is None:
                        tx.add(KvRow(key=key, value="1", expires_at=self._ms(ttl)))
                        count = 1
                    elif int(row[1]) <= now:  # expired: counts again from one, with a new time to live
                        await tx.execute(update(KvRow).where(KvRow.key == key).values(
                            value="1", expires_at=self._ms(ttl)))
                        count = 1
                    else:
                        count = int(row[0]) + 1
                        await tx.execute(update(KvRow).where(KvRow.key == key).values(value=str(count)))
                break
            except IntegrityError:  # the first increment of another caller won the insert: count on it
                if attempt == INSERT_ATTEMPTS - 1:
                    raise
        await self._wrote()
        return count

    async def ttl(self, key: str) -> float:
        async with self.db.transaction() as tx:
            expires: int | None = await tx.scalar(select(KvRow.expires_at).where(KvRow.key == key))
        left = (expires - self._ms()) / 1000 if expires is not None else 0.0
        return max(0.0, left)
