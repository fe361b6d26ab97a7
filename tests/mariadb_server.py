"""A MariaDB server of the test's own, in a fresh data directory on a free port, that the test may stop,
kill and start again.

The shared MariaDB on 3306 is never stopped or restarted by a test; a test about what survives a restart
of the database server starts its own with `own_mariadb(...)`. `restart(kill=True)` ends the server with
SIGKILL (a crash: InnoDB recovers from its redo log), `restart()` with SIGTERM (a normal shutdown). The
server is always stopped.
"""

from __future__ import annotations

import getpass
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.redis_server import _free_port, reap, wait_ready
from tests.services import unavailable


def _greets(port: int) -> bool:
    """The server accepts a connection and sends its handshake."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            return len(sock.recv(64)) > 0
    except OSError:
        return False


class OwnMariaDB:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        """The server's URL without a database (what `tests.services` names its servers by)."""
        return f"mysql+aiomysql://root@127.0.0.1:{self.port}"

    def url(self, database: str) -> str:
        return f"{self.base}/{database}"

    def install(self) -> None:
        subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={self.directory / 'data'}",
                        f"--user={getpass.getuser()}", "--auth-root-authentication-method=normal",
                        "--skip-test-db"], stdin=subprocess.DEVNULL, capture_output=True, check=True,
                       timeout=120)

    def start(self) -> None:
        d = self.directory
        self.proc = subprocess.Popen(
            ["mariadbd", "--no-defaults", f"--datadir={d / 'data'}", f"--user={getpass.getuser()}",
             f"--port={self.port}", "--bind-address=127.0.0.1", f"--socket={d / 'mariadb.sock'}",
             f"--pid-file={d / 'mariadb.pid'}", f"--log-error={d / 'error.log'}", "--skip-log-bin",
             "--innodb-buffer-pool-size=16M", "--character-set-server=utf8mb4"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ready(self.proc, lambda: _greets(self.port), f"mariadbd on port {self.port}")

    def stop(self, *, kill: bool = False) -> None:
        if self.proc is None:
            return
        if kill:
            self.proc.kill()
        else:
            self.proc.terminate()
        reap(self.proc)
        self.proc = None

    def restart(self, *, kill: bool = False) -> None:
        self.stop(kill=kill)
        self.start()


@contextmanager
def own_mariadb(directory: Path) -> Iterator[OwnMariaDB]:
    if shutil.which("mariadbd") is None or shutil.which("mariadb-install-db") is None:
        unavailable("mariadbd", "the MariaDB server binaries are not installed")
    directory.mkdir(parents=True, exist_ok=True)
    server = OwnMariaDB(directory)
    try:
        server.install()
        server.start()
    except (RuntimeError, subprocess.SubprocessError) as exc:
        server.stop()
        unavailable("mariadbd", exc)
    try:
        yield server
    finally:
        server.stop()
