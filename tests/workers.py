"""The server worker processes of a running `tollway serve` (Linux: read from /proc).

A Sanic worker is a child of the main process whose environment names it (`SANIC_WORKER_NAME` =
`Sanic-Server-<n>-<m>`); the main process's other child (multiprocessing's manager) has no such name.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

PROC = Path("/proc")


def _parent(pid: str) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        stat = (PROC / pid / "stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state
    return None


def _alive(pid: str) -> bool:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return (PROC / pid / "stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    return False


def server_workers(main_pid: int) -> dict[str, int]:
    """{worker name: pid} of the live server workers under `main_pid`."""
    found: dict[str, int] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or _parent(entry.name) != main_pid or not _alive(entry.name):
            continue
        with contextlib.suppress(OSError):
            for item in (entry / "environ").read_bytes().split(b"\0"):
                if item.startswith(b"SANIC_WORKER_NAME=Sanic-Server-"):
                    found[item.split(b"=", 1)[1].decode()] = int(entry.name)
    return found


def wait_for(predicate: Callable[[], bool], deadline: float, what: str) -> None:
    """Poll `predicate` until it holds; the deadline only bounds a hang."""
    end = time.monotonic() + deadline
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
