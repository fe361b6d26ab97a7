"""A user's current role, status, token digest and gateway settings, as every request needs them,
without SQL on the hot path: a `RecordCache` (≤ USER_CACHE_SECONDS in process, a shared copy in Redis,
SQL on a miss), dropped on every worker and node the moment a user changes (`invalidate`)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from backend.broadcasts import Broadcasts
from backend.records import RecordCache, RecordStore
from core.identity import UserState
from models.db import Database
from models.users import UserRepository
from server.components.user_settings import flag, settings_of


def _decode(data: dict[str, Any]) -> UserState:
    return UserState(**data)


class UserDirectory:
    def __init__(self, db: Database, backend: RecordStore, ttl: float) -> None:
        self.db = db
        self.states: RecordCache[UserState] = RecordCache(backend, "user", encode=asdict, decode=_decode,
                                                          memo_ttl=ttl)
        self.tokens: RecordCache[int] = RecordCache(backend, "atok", encode=lambda i: {"id": i},
                                                    decode=lambda d: int(d["id"]), memo_ttl=ttl)

    async def state(self, user_id: int) -> UserState | None:
        async def load() -> UserState | None:
            async with self.db.transaction() as tx:
                user = await UserRepository(tx).get(user_id, include_deleted=True)
            if user is None:
                return None
            settings = settings_of(user)
            return UserState(id=user.id, username=user.username, display_name=user.display_name,
                             role=user.role, status=user.status, group=user.group,
                             token_digest=user.access_token, deleted=user.deleted_at is not None,
                             record_ip_log=flag(settings, "record_ip_log"),
                             accept_unset_model_ratio_model=flag(settings, "accept_unset_model_ratio_model"))

        return await self.states.get(user_id, load)

    async def id_for_token(self, digest: str) -> int | None:
        async def load() -> int | None:
            async with self.db.transaction() as tx:
                return await UserRepository(tx).id_by_token_digest(digest)

        return await self.tokens.get(digest, load)

    async def invalidate(self, user_id: int, *token_digests: str | None) -> None:
        """Call after the change is committed: every worker and node sees it from the next request."""
        await self.states.invalidate(user_id)
        for digest in token_digests:
            if digest:
                await self.tokens.invalidate(digest)

    def forget_all(self) -> None:
        self.states.forget_all()
        self.tokens.forget_all()

    def listen(self, broadcasts: Broadcasts) -> None:
        self.states.listen(broadcasts)
        self.tokens.listen(broadcasts)
