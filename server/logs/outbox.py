"""The `log-outbox` task: moves service logs from the main database's `log_outbox` into a separate log
database (`LOG_DATABASE_URL`), at least every `interval` seconds, each exactly once.

A service writes its log (manage, system, …) into the outbox in the transaction of the change it records
(`models.logs.LogRepository`), so a log is never lost and never written for a change that rolled back.
Copying is an insert that skips a `ref` already there, then the rows leave the outbox; a process that dies
in between leaves them for the next pass, which copies nothing twice (models/log_outbox.py). Every worker
runs the task; two passes at once copy the same rows, once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from models.db import Database
from models.log_outbox import move_outbox

log = logging.getLogger("tollway.logs")

OUTBOX_INTERVAL = 1.0
OUTBOX_BATCH = 500


class LogOutboxMover:
    def __init__(self, main: Database, logs: Database, *, interval: float = OUTBOX_INTERVAL,
                 batch: int = OUTBOX_BATCH) -> None:
        self.main = main
        self.logs = logs
        self.interval = interval
        self.batch = batch

    async def drain(self) -> int:
        """Move everything the outbox holds now; returns how many rows moved."""
        moved = 0
        while True:
            n = await move_outbox(self.main, self.logs, self.batch)
            moved += n
            if n < self.batch:
                return moved

    async def run_forever(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.drain()
            except Exception:
                log.exception("moving service logs to the log database failed; retrying later")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)
