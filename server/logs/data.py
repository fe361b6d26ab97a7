"""The usage-data routes (docs/API.md#usage-data): hourly buckets of consume logs per user and model, and
their sums per model or per user.

The buckets (`quota_data`) are written by the quota sync only; these routes only read them. A window is
`start_timestamp`..`end_timestamp` (inclusive, on the bucket's hour start); either bound may be left out:
the end defaults to now, the start to seven days before the end.
"""

from __future__ import annotations

from core.identity import Principal
from models.db import Database
from models.quota_data import QuotaDataRepository
from server.clock import Clock
from server.errors import BadRequest
from server.logs.schemas import UsageBucket

DEFAULT_SPAN = 7 * 86400
SELF_SPAN_MAX = 30 * 86400  # 2592000 s


class UsageDataService:
    def __init__(self, *, db: Database, clock: Clock) -> None:
        self.db = db
        self.clock = clock

    def _window(self, start: int, end: int) -> tuple[int, int]:
        end = end or self.clock.now_s()
        start = start or max(0, end - DEFAULT_SPAN)
        if start > end:
            raise BadRequest("start_timestamp: must not be after end_timestamp")
        return start, end

    async def all_data(self, start: int, end: int, username: str) -> list[UsageBucket]:
        """With `username`, that user's buckets; without, every user's summed per (model, hour)."""
        start, end = self._window(start, end)
        async with self.db.transaction() as tx:
            data = QuotaDataRepository(tx)
            if username:
                return [UsageBucket.of(r) for r in await data.rows(start, end, username=username)]
            summed = await data.summed(start, end)
        return [UsageBucket.summed(row) for row in summed]

    async def by_user(self, start: int, end: int) -> list[UsageBucket]:
        """Every user's buckets summed per (user, hour), with `id`, `user_id` 0 and `model_name` ""."""
        start, end = self._window(start, end)
        async with self.db.transaction() as tx:
            summed = await QuotaDataRepository(tx).summed_by_user(start, end)
        return [UsageBucket.summed(row) for row in summed]

    async def own_data(self, principal: Principal, start: int, end: int) -> list[UsageBucket]:
        start, end = self._window(start, end)
        if end - start > SELF_SPAN_MAX:
            raise BadRequest(f"end_timestamp: the window must be at most 30 days ({SELF_SPAN_MAX} s)")
        async with self.db.transaction() as tx:
            rows = await QuotaDataRepository(tx).rows(start, end, user_id=principal.id)
        return [UsageBucket.of(r) for r in rows]
