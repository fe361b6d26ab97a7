"""Fault injection for the crash and stop tests: the product's only test hooks, in one place, behind one
switch.

The crash tests must kill a process at one exact point (after a credit's SQL commit, before the live
balance is raised; after the quota sync committed a batch's logs, before its charges), and the stop test
must catch workers while they start. The product modules know nothing of this: they take plain callbacks
(`CreditOutbox(on_committed=…)`, `SqlQuotaSink(on_logs_committed=…)`) and the app's start-up steps, and
`Faults` supplies them — or nothing.

Everything is off unless `TOLLWAY_TEST_FAULTS=1`; with the switch on, `TEST_KILL_AFTER_CREDIT_COMMIT`,
`TEST_KILL_AFTER_LOG_COMMIT` and `TEST_WORKER_START_DELAY` choose the faults (declared in
server/config_vars.py, read by server/config.py).
A `TEST_*` variable set without the switch stops start-up, so a stray variable cannot arm a fault in
production and a test cannot pass with its fault silently off.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

SWITCH = "TOLLWAY_TEST_FAULTS"
"""The one environment variable that lets the `TEST_*` variables arm a fault."""


def kill_self() -> None:
    """SIGKILL this process."""
    os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True, slots=True)
class Faults:
    """The faults armed in this process (none by default), and the in-process tests' password cost."""

    kill_after_credit_commit: bool = False
    kill_after_log_commit: bool = False
    worker_start_delay: float = 0.0
    password_cost: tuple[int, int, int] | None = None
    """argon2id's (time cost, memory in KiB, parallelism) for this process's password hashes; None: the
    production baseline (server/crypto.py `Passwords`). Not a fault but a test hook like them: the
    in-process tests set the cheapest cost, so that a sign-in costs them microseconds of CPU instead of a
    deliberately slow hash; they still hash and verify with argon2id, through the same code."""

    def after_credit_commit(self) -> Callable[[], None] | None:
        """The `CreditOutbox`'s callback after a credit's commit: die there, when armed."""
        return kill_self if self.kill_after_credit_commit else None

    def after_log_commit(self) -> Callable[[], None] | None:
        """The quota sink's callback after a batch's logs are committed: die there, when armed."""
        return kill_self if self.kill_after_log_commit else None

    def delay_start(self, app: Any) -> None:
        """Have each server worker of `app` (a Sanic app) wait `worker_start_delay` seconds before and
        after it starts serving, when armed."""
        if not self.worker_start_delay:
            return

        async def start_slowly(_app: Any, step: str) -> None:
            logging.getLogger("tollway.test").warning("worker start delayed (%s)", step)
            await asyncio.sleep(self.worker_start_delay)

        app.before_server_start(partial(start_slowly, step="before"))
        app.after_server_start(partial(start_slowly, step="after"))


NONE = Faults()
