"""The server worker processes of a running `tollway serve` (Linux: read from /proc).

A Sanic worker is a child of the main process whose environment names it (`SANIC_WORKER_NAME` =
`Sanic-Server-<n>-<m>`); the main process's other child (multiprocessing's manager) has no such name.
`worker_holding` tells which of them accepted a given TCP connection (so a test can pin a client to a worker).
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


def _server_side_inode(server_port: int, client_port: int) -> str | None:
    """The socket inode of the accepted end of the loopback connection `client_port` → `server_port`."""
    with contextlib.suppress(OSError):
        for line in (PROC / "net" / "tcp").read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = (int(a.rsplit(":", 1)[1], 16) for a in fields[1:3])
            if (local, remote) == (server_port, client_port):
                return fields[9]
    return None


def worker_holding(main_pid: int, server_port: int, client_port: int) -> int | None:
    """The pid of the server worker under `main_pid` that holds the connection from `client_port`."""
    inode = _server_side_inode(server_port, client_port)
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    for pid in server_workers(main_pid).values():
        with contextlib.suppress(OSError):
            for fd in (PROC / str(pid) / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if fd.readlink().as_posix() == target:
                        return pid
    return None
