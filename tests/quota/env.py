"""A quota engine wired to a real store (Redis, a Redis Cluster or in process) and a real SQL database, for
tests."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import func, select

from backend.base import Backend
from backend.memory import MemoryBackend
from backend.redis import RedisBackend
from models.db import Database
from models.keys import ApiKey
from models.logs import Log
from models.quota import SqlBalanceSource, SqlQuotaSink
from models.tables import User
from quota.backends.memory_quota import MemoryQuotaStore
from quota.backends.redis_quota import RedisQuotaStore
from quota.engine import QuotaEngine
from quota.store import QuotaStore
from quota.sync import QuotaSync
from tests.services import IN_LOOP_REDIS_TIMEOUT


@dataclass
class QuotaEnv:
    db: Database
    store: QuotaStore
    engine: QuotaEngine
    sync: QuotaSync
    redis: RedisBackend | None
    limiter: Backend  # the rate limiter whose state `reserve(limits=…)` and `settle(charges=…)` use

    async def add_user(self, quota: int, name: str | None = None) -> int:
        async with self.db.transaction() as tx:
            user = User(username=name or f"u{secrets.token_hex(4)}", password="x", display_name="",
                        email="", role=1, status=1, group="default", quota=quota, used_quota=0,
                        request_count=0, aff_count=0, aff_quota=0, aff_history_quota=0, inviter_id=0,
                        setting="", remark="", stripe_customer="", created_at=0, last_login_at=0)
            tx.add(user)
            await tx.flush()
            return user.id

    async def add_key(self, user_id: int, remain: int, unlimited: bool = False) -> int:
        async with self.db.transaction() as tx:
            key = ApiKey(user_id=user_id, name="k", key_digest=secrets.token_hex(32), key_encrypted="x",
                         status=1, created_time=0, accessed_time=0, expired_time=-1, remain_quota=remain,
                         used_quota=0, unlimited_quota=unlimited, model_limits_enabled=False,
                         model_limits="", allow_ips="", group="")
            tx.add(key)
            await tx.flush()
            return key.id

    async def user_row(self, user_id: int) -> User:
        async with self.db.transaction() as tx:
            user = await tx.scalar(select(User).where(User.id == user_id))
            assert user is not None
            return user

    async def key_row(self, key_id: int) -> ApiKey:
        async with self.db.transaction() as tx:
            key = await tx.scalar(select(ApiKey).where(ApiKey.id == key_id))
            assert key is not None
            return key

    async def logs(self, **where: Any) -> list[Log]:
        async with self.db.transaction() as tx:
            stmt = select(Log).order_by(Log.id)
            for name, value in where.items():
                stmt = stmt.where(getattr(Log, name) == value)
            return list((await tx.scalars(stmt)).all())

    async def consumed(self, user_id: int) -> tuple[int, int]:
        """(sum of quota, count) of the user's consume logs."""
        async with self.db.transaction() as tx:
            row = (await tx.execute(select(func.coalesce(func.sum(Log.quota), 0), func.count())
                                    .where(Log.user_id == user_id, Log.type == 2))).one()
            return int(row[0]), int(row[1])

    async def forget_live_state(self) -> None:
        """What FLUSHALL or a Redis restart without persistence does to the store."""
        if self.redis is not None:
            keys = [k async for k in self.redis.client.scan_iter(match=f"{self.redis.prefix}*")]
            if keys:
                await self.redis.client.delete(*keys)
        else:
            assert isinstance(self.limiter, MemoryBackend)
            self.store = MemoryQuotaStore(limiter=self.limiter)
            self.engine.store = self.store
            self.sync.store = self.store

    async def close(self) -> None:
        if self.redis is not None:
            await self.redis.close()
        await self.db.dispose()


def build(db_url: str, redis_url: str | None, prefix: str, *, lease_seconds: float = 600.0,
          nodes: Sequence[tuple[str, int]] = ()) -> QuotaEnv:
    """The engine over SQL at `db_url` and Redis at `redis_url`, or the Redis Cluster of the seeds `nodes`,
    or (neither) the in-process store."""
    db = Database(db_url)
    redis: RedisBackend | None = None
    if nodes:
        redis = RedisBackend(prefix=prefix, nodes=nodes, timeout=IN_LOOP_REDIS_TIMEOUT)
    elif redis_url:
        redis = RedisBackend(redis_url, prefix, timeout=IN_LOOP_REDIS_TIMEOUT)
    limiter: Backend = redis if redis is not None else MemoryBackend()
    store: QuotaStore = (RedisQuotaStore(redis) if redis is not None
                         else MemoryQuotaStore(limiter=cast(MemoryBackend, limiter)))
    engine = QuotaEngine(store, SqlBalanceSource(db), lease_seconds=lease_seconds)
    sync = QuotaSync(store, SqlQuotaSink(db), interval=0.05, batch=500)
    return QuotaEnv(db, store, engine, sync, redis, limiter)


def consume_log(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"type": 2, "model_name": "m", "prompt_tokens": 1, "completion_tokens": 2}
    base.update(fields)
    return base
