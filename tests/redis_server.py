"""A `redis-server` of the test's own, on a free port, that the test may restart.

The shared Redis on 6379 is never stopped or restarted by a test; a test about a Redis restart starts
its own with `own_redis(...)` and restarts that one (`SHUTDOWN NOSAVE`, then a new server on the same
port and directory). With `appendonly=True` it keeps an append-only file fsynced on every write, so a
restart brings its data back; without it a restart starts empty. The server is always stopped.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.services import unavailable

START_DEADLINE = 30.0  # seconds for the server to accept connections (a bound on a hang)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_ready(proc: subprocess.Popen[bytes], ready: Callable[[], bool], what: str) -> None:
    """Poll `ready` until it holds; the process exiting, or START_DEADLINE passing, is a RuntimeError."""
    deadline = time.monotonic() + START_DEADLINE
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.05)


def reap(proc: subprocess.Popen[bytes]) -> None:
    """Wait for a server told to stop; one that does not stop within START_DEADLINE is killed."""
    try:
        proc.wait(timeout=START_DEADLINE)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class OwnRedis:
    def __init__(self, directory: Path, *, appendonly: bool) -> None:
        self.directory = directory
        self.port = _free_port()
        self.appendonly = appendonly
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
                "--save", "", "--maxmemory-policy", "noeviction", "--loglevel", "warning"]
        if self.appendonly:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_ready(self.proc, lambda: _accepts(self.port), f"redis-server on port {self.port}")

    def stop(self) -> None:
        """SHUTDOWN NOSAVE (clients see their connections closed), then wait for the process."""
        if self.proc is None:
            return
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            s.sendall(b"SHUTDOWN NOSAVE\r\n")
            with contextlib.suppress(OSError):
                s.recv(64)
        reap(self.proc)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


@contextmanager
def own_redis(directory: Path, *, appendonly: bool = False) -> Iterator[OwnRedis]:
    if shutil.which("redis-server") is None:
        unavailable("redis-server", "the redis-server binary is not installed")
    directory.mkdir(parents=True, exist_ok=True)
    server = OwnRedis(directory, appendonly=appendonly)
    try:
        server.start()
    except RuntimeError as exc:
        unavailable("redis-server", exc)
    try:
        yield server
    finally:
        server.stop()
