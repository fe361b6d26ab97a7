"""An API key as every model call needs it, without SQL on the hot path (docs/api/accounts.md#api-keys).

`KeyDirectory.lookup(raw)` turns what a caller sent into a `KeyState` through a `RecordCache` keyed by the
key's HMAC digest (≤ 1 s in process, a shared copy in Redis, SQL on a miss; unknown keys are cached too,
briefly). Anything that is not exactly 48 `[A-Za-z0-9]` after an optional `sk-` is unknown at once,
without touching the cache or SQL. Every committed change calls `invalidate(digest)`, which drops the copy
on every worker and node at once.

The balance (`remain_quota`) is not part of the state: it lives in the quota engine.

`touch(key_id)` records a use in memory only; `flush_forever` writes `accessed_time` for the touched keys
in one batch per interval (at most once per 60 s), never on the request path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from dataclasses import asdict, dataclass
from typing import Any

from backend.broadcasts import Broadcasts
from backend.records import RecordCache, RecordStore
from core.enums import KeyStatus
from models.db import Database
from models.keys import ApiKey, ApiKeyRepository
from server.clock import Clock
from server.crypto import SecretBox

log = logging.getLogger("tollway.keys")

KEY_LENGTH = 48
KEY_PREFIX = "sk-"
_KEY_RE = re.compile(r"[A-Za-z0-9]{48}")


def bare_key(raw: str) -> str | None:
    """The 48-character key in `raw` (an optional `sk-` stripped), or None when `raw` is not a key."""
    key = raw[len(KEY_PREFIX):] if raw.startswith(KEY_PREFIX) else raw
    return key if _KEY_RE.fullmatch(key) else None


def split_list(text: str, separator: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(separator) if item.strip())


@dataclass(frozen=True, slots=True)
class KeyState:
    id: int
    user_id: int
    name: str
    status: int
    expired_time: int  # -1 = never
    unlimited_quota: bool
    model_limits_enabled: bool
    model_limits: tuple[str, ...]
    allow_ips: str  # newline list of IPs / CIDRs, "" = any
    group: str  # "" = the owner's group
    deleted: bool
    digest: str

    def expired(self, now: int) -> bool:
        """Status 3, or an expiry time (not -1) that has come."""
        return self.status == KeyStatus.EXPIRED or (self.expired_time != -1 and self.expired_time <= now)

    @classmethod
    def of(cls, row: ApiKey) -> KeyState:
        return cls(id=row.id, user_id=row.user_id, name=row.name, status=row.status,
                   expired_time=row.expired_time, unlimited_quota=bool(row.unlimited_quota),
                   model_limits_enabled=bool(row.model_limits_enabled),
                   model_limits=split_list(row.model_limits or "", ","), allow_ips=row.allow_ips or "",
                   group=row.group or "", deleted=row.deleted_at is not None, digest=row.key_digest)


def _encode(state: KeyState) -> dict[str, Any]:
    data = asdict(state)
    data["model_limits"] = list(state.model_limits)
    return data


def _decode(data: dict[str, Any]) -> KeyState:
    return KeyState(**{**data, "model_limits": tuple(data.get("model_limits") or ())})


class KeyDirectory:
    def __init__(self, db: Database, backend: RecordStore, box: SecretBox, clock: Clock, *, ttl: float = 1.0
                 ) -> None:
        self.db = db
        self.box = box
        self.clock = clock
        self.cache: RecordCache[KeyState] = RecordCache(backend, "key", encode=_encode, decode=_decode,
                                                        memo_ttl=ttl)
        self._touched: set[int] = set()

    def digest(self, key: str) -> str:
        """The lookup digest of a bare 48-character key."""
        return self.box.digest(key)

    async def lookup(self, raw: str) -> KeyState | None:
        """The key the caller sent (with or without `sk-`), deleted ones included; None if unknown."""
        key = bare_key(raw)
        if key is None:
            return None
        digest = self.box.digest(key)

        async def load() -> KeyState | None:
            async with self.db.transaction() as tx:
                row = await ApiKeyRepository(tx).by_digest(digest)
            return None if row is None else KeyState.of(row)

        return await self.cache.get(digest, load)

    async def invalidate(self, digest: str) -> None:
        """Call after the change is committed: every worker and node sees it from the next request."""
        await self.cache.invalidate(digest)

    async def mark_status(self, key: KeyState, status: KeyStatus) -> bool:
        """Persist that the gateway found the key expired (3) or exhausted (4); only an enabled key
        changes. True when this call changed it."""
        if status not in (KeyStatus.EXPIRED, KeyStatus.EXHAUSTED):
            raise ValueError("status must be 3 (expired) or 4 (exhausted)")
        async with self.db.transaction() as tx:
            changed = await ApiKeyRepository(tx).mark_status(key.id, status)
        await self.invalidate(key.digest)
        return changed

    # ---- accessed_time ------------------------------------------------------------------------------

    def touch(self, key_id: int) -> None:
        """Record that the key was used (in memory; written by the next flush)."""
        self._touched.add(key_id)

    async def flush(self) -> int:
        """Write `accessed_time = now` for the keys touched since the last flush; how many."""
        if not self._touched:
            return 0
        ids, self._touched = self._touched, set()
        try:
            async with self.db.transaction() as tx:
                await ApiKeyRepository(tx).touch(ids, self.clock.now_s())
        except BaseException:
            self._touched |= ids  # try again with the next flush
            raise
        return len(ids)

    async def flush_forever(self, stop: asyncio.Event, every: float = 60.0) -> None:
        """Flush every `every` seconds until `stop` is set, then once more (a graceful stop never
        interrupts a flush in progress)."""
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), every)
            try:
                await self.flush()
            except Exception:
                log.exception("could not write accessed_time of API keys; retrying later")
            if stop.is_set():
                return

    # ---- invalidation -------------------------------------------------------------------------------

    def forget_all(self) -> None:
        self.cache.forget_all()

    def listen(self, broadcasts: Broadcasts) -> None:
        self.cache.listen(broadcasts)
