"""The error logs of failed model calls (type 5, docs/api/logs.md#logs): a bounded buffer per worker, and the
`error-logs` task that writes it into the log database about every second.

Why a buffer: a refused call must cost no more than it did before it was logged — the model-call path runs
no SQL (with Redis), and a flood of refusals must not become a flood of inserts. So the relay only hands
the row to `ErrorLogs.add` (memory, no await), and the task writes what waits in batches, each batch one
INSERT in the log database: the separate one when `LOG_DATABASE_URL` names one, else the main one.

Why bounded (docs/SECURITY.md): every call of a known key that fails can produce a row, so

- an API key gets at most `PER_KEY_PER_MINUTE` rows in any 60 seconds on one worker (a sliding window on
  the injected clock); the calls past it are refused as before, unlogged;
- at most `CAPACITY` rows wait for the next write; past it a row is not kept;
- the message is cut to `MESSAGE_MAX` characters and every text to its column's length, made storable
  (a lone surrogate becomes `?`, NUL goes), so no row can make its batch fail;
- a batch the database refuses `MAX_ATTEMPTS` times in a row is given up, so a broken log database
  cannot keep rows in memory for ever.

Every row not written is counted by reason (`tollway_error_logs_dropped_total{reason}`) and in `dropped`.
Each row has a fresh `ref`, so a batch written again after a commit whose answer was lost is stored once.
Rows still waiting when the worker stops are written by `State.close()` (one last `flush`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections import Counter, deque
from collections.abc import Mapping
from itertools import islice
from typing import Any, cast

from sqlalchemy import String, Table

from core.enums import LogType
from core.log_entry import LogEntry
from models.db import Database
from models.log_outbox import insert_logs
from models.logs import Log
from server import metrics
from server.clock import Clock
from server.metrics import ErrorLogDrop

log = logging.getLogger("tollway.logs")

PER_KEY_PER_MINUTE = 20
"""Error logs one API key may produce in any 60 s, on one worker."""
WINDOW = 60.0
CAPACITY = 1000
"""Rows that may wait for the next write, on one worker."""
BATCH = 200
MESSAGE_MAX = 500
"""Characters of the message (`content`) kept."""
FLUSH_INTERVAL = 1.0
MAX_ATTEMPTS = 3
KEYS_TRACKED = 10_000
"""API keys whose recent error logs one worker remembers; a key beyond them gets none until some age out."""

DEFAULTS: dict[str, Any] = LogEntry(LogType.UNKNOWN, 0).row()
"""Every column of a `logs` row but `id`, `ref` and `entry_id`, at its declared default (core/log_entry.py;
`insert_logs` wants the same keys in every row)."""


def storable(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, with what no database stores replaced (a lone surrogate by `?`)
    or removed (NUL)."""
    text = text[:limit]
    if not text.isascii():
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text.replace("\x00", "")


def text_limits() -> dict[str, int]:
    """The length of each text column of `logs` that has one; `content` gets `MESSAGE_MAX`."""
    table = cast(Table, Log.__table__)
    limits = {c.name: int(c.type.length) for c in table.columns
              if isinstance(c.type, String) and c.type.length and c.name in DEFAULTS}
    return limits | {"content": MESSAGE_MAX}


class KeyWindow:
    """At most `limit` admissions per key in any `window` seconds: the times of a key's last admissions,
    oldest first; a time `window` or more before now no longer counts."""

    def __init__(self, limit: int = PER_KEY_PER_MINUTE, window: float = WINDOW,
                 keys: int = KEYS_TRACKED) -> None:
        self.limit, self.window, self.keys = limit, window, keys
        self._seen: dict[int, deque[float]] = {}

    def allow(self, key_id: int, now: float) -> bool:
        times = self._seen.get(key_id)
        if times is None:
            if len(self._seen) >= self.keys and not self._forget(now):
                return False
            times = self._seen[key_id] = deque()
        while times and now - times[0] >= self.window:
            times.popleft()
        if len(times) >= self.limit:
            return False
        times.append(now)
        return True

    def _forget(self, now: float) -> bool:
        """Drop the keys with no admission in the window; whether room was made."""
        for key_id in [k for k, times in self._seen.items() if not times or now - times[-1] >= self.window]:
            del self._seen[key_id]
        return len(self._seen) < self.keys


class ErrorLogs:
    """The worker's error-log buffer: `add` from the relay, `flush` from the task (and from tests)."""

    def __init__(self, db: Database, clock: Clock, *, capacity: int = CAPACITY, batch: int = BATCH,
                 per_key: int = PER_KEY_PER_MINUTE) -> None:
        self.db, self.clock, self.capacity, self.batch = db, clock, capacity, batch
        self.keys = KeyWindow(per_key)
        self.dropped: Counter[ErrorLogDrop] = Counter()
        self._pending: deque[dict[str, Any]] = deque()
        self._limits = text_limits()
        self._failures = 0
        self._writing = asyncio.Lock()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def add(self, row: Mapping[str, Any]) -> bool:
        """Keep `row` (the fields of a `logs` row, `other` a dict: `LogEntry.row()`; `token_id` names its
        key) for the next write, unless a bound says no; whether it was kept."""
        if len(self._pending) >= self.capacity:
            self._drop(ErrorLogDrop.BUFFER_FULL)
            return False
        if not self.keys.allow(int(row.get("token_id", 0)), self.clock.now()):
            self._drop(ErrorLogDrop.KEY_LIMIT)
            return False
        self._pending.append(self._stored(row))
        return True

    def _stored(self, row: Mapping[str, Any]) -> dict[str, Any]:
        stored = DEFAULTS | {name: value for name, value in row.items() if name in DEFAULTS}
        other = stored["other"]
        if not isinstance(other, str):
            stored["other"] = json.dumps(other, separators=(",", ":"), ensure_ascii=False) if other else ""
        for name, limit in self._limits.items():
            stored[name] = storable(str(stored[name]), limit)
        stored["other"] = storable(stored["other"], len(stored["other"]))
        stored["ref"], stored["entry_id"] = f"error:{uuid.uuid4().hex}", None
        return stored

    def _drop(self, reason: ErrorLogDrop, count: int = 1) -> None:
        self.dropped[reason] += count
        metrics.error_logs_dropped(reason, count)

    async def flush(self) -> int:
        """Write every row waiting now, batch by batch; returns how many were written. A batch that
        fails stays for the next flush (and the error is raised), up to `MAX_ATTEMPTS` in a row."""
        async with self._writing:
            written, left = 0, len(self._pending)
            while left:
                rows = list(islice(self._pending, min(left, self.batch)))
                try:
                    async with self.db.transaction() as tx:
                        await insert_logs(tx, rows)
                except Exception:
                    self._failures += 1
                    if self._failures >= MAX_ATTEMPTS:
                        self._failures = 0
                        self._take(len(rows))
                        self._drop(ErrorLogDrop.WRITE_FAILED, len(rows))
                    raise
                self._failures = 0
                self._take(len(rows))  # `add` only appends: the first rows are still these
                written += len(rows)
                left -= len(rows)
            return written

    def _take(self, count: int) -> None:
        for _ in range(count):
            self._pending.popleft()

    async def run_forever(self, stop: asyncio.Event, interval: float = FLUSH_INTERVAL) -> None:
        """The `error-logs` task: a flush every `interval` seconds until `stop` (a flush in progress ends
        first; what is left then is `State.close()`'s)."""
        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)
            if stop.is_set():
                return
            try:
                await self.flush()
            except Exception:
                log.exception("writing error logs failed; retrying later")
