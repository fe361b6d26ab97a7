"""Server-side login sessions behind the `session` cookie: in Redis when configured, else in SQL.

The cookie holds 32 random bytes (base64url); stores only ever see sha256(cookie). A record is a JSON
object (`id`, `role`, `auth_method`, `pending_*`, …; docs/api/auth.md#sessions) plus `pushed_at`, the last
time its expiry slid forward. Each user's session hashes are indexed so that all of them can be revoked at
once.

`merge` (add fields) and `take` (remove one field and return it) change one record atomically, keeping its
expiry: of any number of concurrent `take`s of a field, one gets its value (a passkey ceremony's challenge
is used once, however many finishes race). `slide` (add fields and push the expiry to now + 30 days) is
the same step on the live record: nothing written meanwhile is lost, and a session that ended meanwhile
(revoked, logged out) is never re-created. Redis: WATCH/MULTI; SQL: the row locked in one transaction.

`rotate` moves a record to a new id (a role rise, the owner's own password change) in one such step, and
`revoke_user` ends a user's sessions in one (each a step of redis-py's `transaction`, which retries on a
changed watched key): whichever runs first, a revocation never misses the rotated
copy and a rotation never revives a revoked record. Redis: the rotation watches the old record, the
revocation the user's index, and each changes what the other watches; SQL: both lock the user's row
first (the same lock order for both: user, then sessions), and the rotation renames the session's row in
place.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar, cast

from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterPipeline

from backend.redis import RedisBackend, guarded, idempotent
from models.db import Database
from models.sessions import SessionRepository
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
    async def merge(self, raw_id: str, fields: dict[str, Any]) -> bool:
        """Add `fields` to an existing record (its expiry unchanged); False when there is no such record."""
        ...
    async def take(self, raw_id: str, field: str) -> Any:
        """Remove `field` from the record and return its value (None when absent), atomically."""
        ...
    async def slide(self, raw_id: str, fields: dict[str, Any], ttl: int = SESSION_TTL
                    ) -> dict[str, Any] | None:
        """Add `fields` to an existing record and push its expiry to now + `ttl`, atomically; the record as
        now stored, or None when there is no such record (nothing is created)."""
        ...
    async def rotate(self, raw_id: str, new_raw_id: str, fields: dict[str, Any], ttl: int = SESSION_TTL
                     ) -> dict[str, Any] | None:
        """Move an existing record to `new_raw_id`, adding `fields`, with an expiry of now + `ttl`,
        atomically against `revoke_user`; the record as now stored, or None when there is no such record
        (nothing is created)."""
        ...


Change = Callable[[dict[str, Any]], Any]  # edits a record in place, returns the caller's answer
Step = Pipeline | ClusterPipeline  # one server's pipeline, or a cluster's (the keys of one step share a slot)
T = TypeVar("T")


def _merging(fields: dict[str, Any]) -> Change:
    def change(data: dict[str, Any]) -> bool:
        data.update(fields)
        return True
    return change


def _taking(field: str) -> Change:
    return lambda data: data.pop(field, None)


def _sliding(fields: dict[str, Any]) -> Change:
    def change(data: dict[str, Any]) -> dict[str, Any]:
        data.update(fields)
        return dict(data)
    return change


def _owner(data: dict[str, Any]) -> int | None:
    uid = data.get("id") or data.get("pending_user_id")
    return int(uid) if uid else None


class RedisSessionStore:
    def __init__(self, backend: RedisBackend) -> None:
        self.r = backend.client
        self.key = backend.key
        self.backend = backend  # its deadline, error observer and retries bound `@idempotent` calls

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
        """Under WATCH of the user's index: a session added or rotated meanwhile makes EXEC fail, and the
        revocation runs again on the index as it is then."""
        index = self.key(f"session:user:{user_id}")
        keep = sha256_hex(keep_raw_id) if keep_raw_id else None

        async def step(pipe: Step) -> None:
            doomed = [str(m) for m in await pipe.smembers(index) if m != keep]
            if doomed:
                pipe.multi()  # type: ignore[no-untyped-call]
                pipe.delete(*(self.key(f"session:{m}") for m in doomed))
                pipe.srem(index, *doomed)

        await self._transaction(step, index)

    @guarded  # not retried: a rotation done before the connection broke would answer None the second time
    async def rotate(self, raw_id: str, new_raw_id: str, fields: dict[str, Any], ttl: int = SESSION_TTL
                     ) -> dict[str, Any] | None:
        old_sid, new_sid = sha256_hex(raw_id), sha256_hex(new_raw_id)
        old_key = self.key(f"session:{old_sid}")

        async def step(pipe: Step) -> dict[str, Any] | None:
            value = await pipe.get(old_key)
            if value is None:
                return None
            data: dict[str, Any] = {**json.loads(value), **fields}
            pipe.multi()  # type: ignore[no-untyped-call]
            pipe.set(self.key(f"session:{new_sid}"), json.dumps(data), ex=ttl)
            pipe.delete(old_key)
            owner = _owner(data)
            if owner is not None:
                index = self.key(f"session:user:{owner}")
                pipe.srem(index, old_sid)
                pipe.sadd(index, new_sid)
                pipe.expire(index, SESSION_TTL)
            return data

        return await self._transaction(step, old_key)

    async def merge(self, raw_id: str, fields: dict[str, Any]) -> bool:
        return bool(await self._change(raw_id, _merging(fields), absent=False))

    async def take(self, raw_id: str, field: str) -> Any:
        return await self._change(raw_id, _taking(field), absent=None)

    async def slide(self, raw_id: str, fields: dict[str, Any], ttl: int = SESSION_TTL
                    ) -> dict[str, Any] | None:
        slid: dict[str, Any] | None = await self._change(raw_id, _sliding(fields), absent=None, ttl=ttl)
        return slid

    @idempotent
    async def _change(self, raw_id: str, change: Change, absent: Any, ttl: int | None = None) -> Any:
        """Read, change and write one record under WATCH: a concurrent writer makes EXEC fail and the whole
        step runs again on what that writer left. (A retry after a broken connection may find a `take`
        already done and answer None: for a single-use value the safe answer.) With `ttl` the expiry
        becomes now + `ttl` (and the user's index lives at least as long); else it is kept."""
        key = self.key(f"session:{sha256_hex(raw_id)}")

        async def step(pipe: Step) -> Any:
            value = await pipe.get(key)
            if value is None:
                return absent
            data = json.loads(value)
            answer = change(data)
            pipe.multi()  # type: ignore[no-untyped-call]
            if ttl is None:
                pipe.set(key, json.dumps(data), keepttl=True)
            else:
                pipe.set(key, json.dumps(data), ex=ttl)
                owner = _owner(data)
                if owner is not None:
                    pipe.expire(self.key(f"session:user:{owner}"), SESSION_TTL)
            return answer

        return await self._transaction(step, key)

    async def _transaction(self, step: Callable[[Step], Awaitable[T]], *watched: str) -> T:
        """redis-py's `transaction`: WATCH `watched`, run `step`, EXEC, all again when a watched key
        changed; `step`'s answer. On a cluster every key of a step shares the `session:` hash tag
        (backend/redis.py `SLOT_GROUPS`). (The cluster client's stub types `step` as a coroutine;
        it takes the same callable as the single server's.)"""
        run: Any = self.r.transaction
        return cast(T, await run(step, *watched, value_from_callable=True))


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
            sessions = SessionRepository(tx)
            await sessions.lock_owner(user_id)
            await sessions.delete_for_user(user_id, keep)

    async def merge(self, raw_id: str, fields: dict[str, Any]) -> bool:
        return bool(await self._change(raw_id, _merging(fields), absent=False))

    async def take(self, raw_id: str, field: str) -> Any:
        return await self._change(raw_id, _taking(field), absent=None)

    async def slide(self, raw_id: str, fields: dict[str, Any], ttl: int = SESSION_TTL
                    ) -> dict[str, Any] | None:
        slid: dict[str, Any] | None = await self._change(raw_id, _sliding(fields), absent=None, ttl=ttl)
        return slid

    async def rotate(self, raw_id: str, new_raw_id: str, fields: dict[str, Any], ttl: int = SESSION_TTL
                     ) -> dict[str, Any] | None:
        now = self.clock.now_s()
        async with self.db.transaction() as tx:
            sessions = SessionRepository(tx)
            sid = sha256_hex(raw_id)
            row = await sessions.get(sid, now)
            if row is not None and row.user_id is not None:
                await sessions.lock_owner(row.user_id)  # then no revocation of this user runs meanwhile
                row = await sessions.get(sid, now, lock=True)
            if row is None:
                return None
            data: dict[str, Any] = {**json.loads(row.data), **fields}
            await sessions.rename(sid, sha256_hex(new_raw_id), json.dumps(data), now + ttl)
            return data

    async def _change(self, raw_id: str, change: Change, absent: Any, ttl: int | None = None) -> Any:
        async with self.db.transaction() as tx:
            sessions = SessionRepository(tx)
            sid = sha256_hex(raw_id)
            row = await sessions.get(sid, self.clock.now_s(), lock=True)
            if row is None:
                return absent
            data = json.loads(row.data)
            answer = change(data)
            await sessions.set_data(sid, json.dumps(data),
                                    expires_at=None if ttl is None else self.clock.now_s() + ttl)
            return answer
