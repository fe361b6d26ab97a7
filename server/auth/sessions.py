"""Server-side login sessions behind the `session` cookie: in Redis when configured, else in SQL.

The cookie holds 32 random bytes (base64url); stores only ever see sha256(cookie). A record is a JSON
object (`id`, `role`, `auth_method`, `pending_*`, …; docs/API.md#sessions) plus `pushed_at`, the last time its
expiry slid forward. Each user's session hashes are indexed so that all of them can be revoked at once.
"""

from __future__ import annotations

import json
import secrets
from typing import Any, Protocol

from models.db import Database
from models.sessions import SessionRepository
from quota.backends.redis import RedisBackend, idempotent
from server.clock import Clock
from server.crypto import sha256_hex

SESSION_TTL = 30 * 24 * 3600
COOKIE = "session"


def new_session_id() -> str:
    return secrets.token_urlsafe(32)


class SessionStore(Protocol):
    async def get(self, raw_id: str) -> dict[str, Any] | None: ...
    async def save(self, raw_id: str, data: dict[str, Any], ttl: int = SESSION_TTL) -> None: ...
    async def delete(self, raw_id: str) -> None: ...
    async def revoke_user(self, user_id: int, keep_raw_id: str | None = None) -> None: ...


def _owner(data: dict[str, Any]) -> int | None:
    uid = data.get("id") or data.get("pending_user_id")
    return int(uid) if uid else None


class RedisSessionStore:
    def __init__(self, backend: RedisBackend) -> None:
        self.r = backend.client
        self.key = backend.key
        self.timeout = backend.timeout

    @idempotent
    async def get(self, raw_id: str) -> dict[str, Any] | None:
        value = await self.r.get(self.key(f"session:{sha256_hex(raw_id)}"))
        return json.loads(value) if value else None

    @idempotent
    async def save(self, raw_id: str, data: dict[str, Any], ttl: int = SESSION_TTL) -> None:
        sid = sha256_hex(raw_id)
        async with self.r.pipeline(transaction=True) as pipe:
            pipe.set(self.key(f"session:{sid}"), json.dumps(data), ex=ttl)
            owner = _owner(data)
            if owner is not None:
                index = self.key(f"session:user:{owner}")
                pipe.sadd(index, sid)
                pipe.expire(index, SESSION_TTL)
            await pipe.execute()

    @idempotent
    async def delete(self, raw_id: str) -> None:
        await self.r.delete(self.key(f"session:{sha256_hex(raw_id)}"))

    @idempotent
    async def revoke_user(self, user_id: int, keep_raw_id: str | None = None) -> None:
        index = self.key(f"session:user:{user_id}")
        keep = sha256_hex(keep_raw_id) if keep_raw_id else None
        members = await self.r.smembers(index)
        doomed = [str(m) for m in members if m != keep]
        if doomed:
            async with self.r.pipeline(transaction=True) as pipe:
                pipe.delete(*(self.key(f"session:{m}") for m in doomed))
                pipe.srem(index, *doomed)
                await pipe.execute()


class SqlSessionStore:
    def __init__(self, db: Database, clock: Clock) -> None:
        self.db = db
        self.clock = clock

    async def get(self, raw_id: str) -> dict[str, Any] | None:
        async with self.db.transaction() as tx:
            row = await SessionRepository(tx).get(sha256_hex(raw_id), self.clock.now_s())
            return json.loads(row.data) if row is not None else None

    async def save(self, raw_id: str, data: dict[str, Any], ttl: int = SESSION_TTL) -> None:
        async with self.db.transaction() as tx:
            await SessionRepository(tx).upsert(
                sha256_hex(raw_id), _owner(data), json.dumps(data), self.clock.now_s() + ttl
            )

    async def delete(self, raw_id: str) -> None:
        async with self.db.transaction() as tx:
            await SessionRepository(tx).delete(sha256_hex(raw_id))

    async def revoke_user(self, user_id: int, keep_raw_id: str | None = None) -> None:
        keep = sha256_hex(keep_raw_id) if keep_raw_id else None
        async with self.db.transaction() as tx:
            await SessionRepository(tx).delete_for_user(user_id, keep)
