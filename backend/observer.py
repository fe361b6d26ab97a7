"""What the shared-state backends and the version tracker tell an observer.

`backend/` imports neither server/ nor prometheus: whoever builds these parts (server/context.py,
server/quota_sync.py) passes them an observer explicitly; server/metrics/ implements it with Prometheus
counters. The defaults, `ignore_error` / `ignore_reload`, do nothing, so the parts work as before for a
caller that does not measure (scripts, tests of the backends themselves). The database (models/db.py)
tells its failures in the same words (`ErrorKind`). (The quota engine's own observer is quota/observer.py.)

An observer must be cheap and must never raise: it is called on the hot path.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum


class ErrorKind(StrEnum):
    """Why a call to Redis or the database failed."""

    TIMEOUT = "timeout"
    CONNECTION = "connection"  # refused, reset, closed by the server
    OTHER = "other"


ErrorObserver = Callable[[ErrorKind], None]
"""Told once per failed call to a store (Redis) or per failed transaction (the database)."""


def ignore_error(kind: ErrorKind) -> None:
    """The default `ErrorObserver`: nothing is counted."""


ReloadObserver = Callable[[str], None]
"""Told when a worker reloaded a cached kind of shared state (`channels`, `options`, `records`:
backend/versions.py) because its version moved."""


def ignore_reload(kind: str) -> None:
    """The default `ReloadObserver`: nothing is counted."""
