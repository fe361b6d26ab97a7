"""The rules of the log routes (docs/api/logs.md#logs): admin and self lists, keyword search, statistics and
the cleanup of old rows.

User-facing replies are sanitized by `OwnLogView.of` (server/logs/schemas.py); admin replies name the
channel from the worker's routing table (no join: logs may live in a database of their own). The delete
runs in batches of `DELETE_BATCH` rows, one short transaction each, and records a system log with the
cutoff and the count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from sqlalchemy import ColumnElement

from backend.base import RateLimits
from core.enums import LogType
from core.identity import Principal
from models.db import Database
from models.logs import Log, LogFilter, LogQuery, LogRepository
from server.clock import Clock
from server.components.keys import KeyDirectory
from server.components.users import UserDirectory
from server.errors import Forbidden, TooManyRequests, Unauthenticated
from server.logs.schemas import LogStat, LogView, OwnLogView
from server.web.pagination import Page

DELETE_BATCH = 1000
SELF_SEARCH_LIMIT = (10, 60.0)  # per user: requests, seconds
RECENT_SECONDS = 60  # the "last 60 s" of rpm and tpm
TOKEN_LOG_LIMIT = 1000  # rows of `GET /api/log/token` (unpaged)


Conditions = Callable[[LogQuery], list[ColumnElement[bool]]]


class LogService:
    """The log rules, with exactly the components they use."""

    def __init__(self, *, db: Database, backend: RateLimits, keys: KeyDirectory, users: UserDirectory,
                 channel_name: Callable[[int], str], clock: Clock) -> None:
        self.db = db
        self.backend = backend
        self.keys = keys
        self.users = users
        self.channel_name = channel_name  # the routing table's name of a channel id ("" if unknown)
        self.clock = clock

    async def _page(self, page: Page, where: Conditions, *, own: bool) -> dict[str, Any]:
        async with self.db.transaction() as tx:
            query = LogQuery(tx)
            rows, total = await query.page(where(query), offset=page.offset, limit=page.size)
        items: list[OwnLogView] | list[LogView]
        if own:
            items = [OwnLogView.of(row, page.offset + i + 1) for i, row in enumerate(rows)]
        else:
            items = [LogView.of(row, self.channel_name(row.channel) if row.channel else "") for row in rows]
        return page.payload(items, total)

    async def list_logs(self, page: Page, filters: LogFilter) -> dict[str, Any]:
        return await self._page(page, lambda q: q.conditions(filters), own=False)

    async def list_own_logs(self, principal: Principal, page: Page, filters: LogFilter
                            ) -> dict[str, Any]:
        own = replace(filters, user_id=principal.id, username="", channel=0)
        return await self._page(page, lambda q: q.conditions(own), own=True)

    async def search_logs(self, page: Page, keyword: str) -> dict[str, Any]:
        return await self._page(page, lambda q: q.keyword(keyword), own=False)

    async def search_own_logs(self, principal: Principal, page: Page, keyword: str) -> dict[str, Any]:
        count, period = SELF_SEARCH_LIMIT
        result = await self.backend.gcra(f"rl:logsearch:{principal.id}", count, period)
        if not result.allowed:
            raise TooManyRequests(retry_after=result.retry_after)
        return await self._page(page, lambda q: q.keyword(keyword, user_id=principal.id,
                                                            names=("token_name", "model_name")), own=True)

    async def token_logs(self, raw: str) -> list[OwnLogView]:
        """`GET /api/log/token`: the caller is the key itself (any status but deleted); its owner must be
        enabled. Its newest `TOKEN_LOG_LIMIT` rows, sanitized as the owner's own logs are."""
        key = await self.keys.lookup(raw) if raw else None
        if key is None or key.deleted:
            raise Unauthenticated("invalid API key")
        owner = await self.users.state(key.user_id)
        if owner is None or not owner.active:
            raise Forbidden("the owner of this API key is disabled")
        async with self.db.transaction() as tx:
            rows, _ = await LogQuery(tx).page([Log.token_id == key.id, Log.user_id == key.user_id],
                                              offset=0, limit=TOKEN_LOG_LIMIT)
        return [OwnLogView.of(row, i + 1) for i, row in enumerate(rows)]

    async def log_stat(self, filters: LogFilter) -> LogStat:
        since = self.clock.now_s() - RECENT_SECONDS
        async with self.db.transaction() as tx:
            return LogStat.of(await LogQuery(tx).stat(filters, since))

    async def own_log_stat(self, principal: Principal, filters: LogFilter) -> LogStat:
        return await self.log_stat(replace(filters, user_id=principal.id, username="", channel=0))

    async def delete_logs(self, actor: Principal, before: int) -> int:
        """Delete every row created before `before` (unix s), batch by batch; returns how many went."""
        deleted = 0
        while True:
            async with self.db.transaction() as tx:
                found, gone = await LogQuery(tx).delete_batch(before, DELETE_BATCH)
            deleted += gone
            if found < DELETE_BATCH:
                break
        name = actor.user.username
        async with self.db.transaction() as tx:
            await LogRepository(tx).add(
                type=LogType.SYSTEM, user_id=actor.id, username=name, created_at=self.clock.now_s(),
                content=f"admin {name} deleted {deleted} logs created before {before}",
                other={"target_timestamp": before, "deleted": deleted},
            )
        return deleted
