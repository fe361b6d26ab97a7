"""A user's current role, status and token digest, as every request needs them: read fresh from SQL at
most every `USER_CACHE_SECONDS` per worker, and dropped everywhere the moment a user changes
(`invalidate` broadcasts `user:<id>` on the invalidation channel)."""

from __future__ import annotations

from dataclasses import dataclass

from models.db import Database
from models.users import UserRepository
from quota.backends.base import Backend
from quota.cache import LocalMemo

INVALIDATE_CHANNEL = "invalidate"


@dataclass(frozen=True, slots=True)
class UserState:
    id: int
    username: str
    display_name: str
    role: int
    status: int
    group: str
    token_digest: str | None
    deleted: bool

    @property
    def active(self) -> bool:
        return self.status == 1 and not self.deleted


class UserDirectory:
    def __init__(self, db: Database, backend: Backend, ttl: float) -> None:
        self.db = db
        self.backend = backend
        self._states: LocalMemo[int, UserState | None] = LocalMemo(ttl)
        self._tokens: LocalMemo[str, int | None] = LocalMemo(ttl)
        # bumped by every invalidation: a read that raced with one must not repopulate the memo
        self._generation = 0

    async def state(self, user_id: int) -> UserState | None:
        hit, cached = self._states.get(user_id)
        if hit:
            return cached
        generation = self._generation
        async with self.db.transaction() as tx:
            user = await UserRepository(tx).get(user_id, include_deleted=True)
        state = None if user is None else UserState(
            id=user.id, username=user.username, display_name=user.display_name, role=user.role,
            status=user.status, group=user.group, token_digest=user.access_token,
            deleted=user.deleted_at is not None,
        )
        if generation == self._generation:
            self._states.put(user_id, state)
        return state

    async def id_for_token(self, digest: str) -> int | None:
        hit, cached = self._tokens.get(digest)
        if hit:
            return cached
        generation = self._generation
        async with self.db.transaction() as tx:
            user_id = await UserRepository(tx).id_by_token_digest(digest)
        if generation == self._generation:
            self._tokens.put(digest, user_id)
        return user_id

    async def invalidate(self, user_id: int) -> None:
        """Call after the change is committed: drops the record here and on every other worker."""
        self.forget(user_id)
        await self.backend.publish(INVALIDATE_CHANNEL, f"user:{user_id}")

    def forget(self, user_id: int) -> None:
        self._generation += 1
        self._states.drop(user_id)
        self._tokens.clear()
