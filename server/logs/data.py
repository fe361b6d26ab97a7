"""The usage-data routes (docs/api/logs.md#usage-data): hourly buckets of consume logs per user and model,
their sums per model or per user, and the operator's dashboard (`GET /api/data/top`).

The buckets (`quota_data`, in the main database) are written by the quota sync only; these routes only
read them. The dashboard sums the log rows themselves (in the log database, which `LOG_DATABASE_URL` may
make another one): the users, API keys and models that spent most, and each channel's calls and errors;
channels are named from the worker's routing table (no join). A window is
`start_timestamp`..`end_timestamp` (inclusive, on the bucket's hour start; on a log's `created_at` for the
dashboard); either bound may be left out: the end defaults to now, the start to seven days before the end.
"""

from __future__ import annotations

from collections.abc import Callable

from core.identity import Principal
from models.db import Database
from models.logs import LogTotals
from models.quota_data import QuotaDataRepository
from server.clock import Clock
from server.components.channel_table import RoutedChannel
from server.errors import BadRequest
from server.logs.schemas import ChannelUse, Dashboard, UsageBucket

DEFAULT_SPAN = 7 * 86400
SELF_SPAN_MAX = 30 * 86400  # 2592000 s


class UsageDataService:
    def __init__(self, *, db: Database, log_db: Database, channel: Callable[[int], RoutedChannel | None],
                 clock: Clock) -> None:
        self.db = db
        self.log_db = log_db
        self.channel = channel  # the routing table's channel of an id (None if it has none)
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

    async def top(self, start: int, end: int, limit: int) -> Dashboard:
        """The `limit` users, keys and models with the most spend in the window, and every channel's calls
        and errors (a channel named from the routing table)."""
        start, end = self._window(start, end)
        async with self.log_db.transaction() as tx:
            totals = LogTotals(tx)
            users = await totals.top_users(start, end, limit)
            keys = await totals.top_keys(start, end, limit)
            models = await totals.top_models(start, end, limit)
            activity = await totals.channels(start, end)
        channels = []
        for row in activity:
            known = self.channel(row.channel)
            channels.append(ChannelUse.of(row, known.name if known else "", known.type if known else 0))
        return Dashboard.of(start, end, users=users, keys=keys, models=models, channels=channels)
