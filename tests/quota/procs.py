"""Start and read load-worker processes (tests/quota/load_worker.py) for the invariant tests."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


class Worker:
    """A load worker. Once started (`go`), a thread reads its output as it comes, line by line, into
    `lines`: a worker must never stop on a full pipe while its parent waits for something else."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.quota.load_worker", json.dumps(cfg)], cwd=ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
        )
        self.lines: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        self._ended = False
        self._reader = threading.Thread(target=self._read, daemon=True)

    def wait_ready(self) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"worker died: {self.proc.stderr.read().decode() if self.proc.stderr else ''}"
        assert json.loads(line) == {"ready": True}

    def _write(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def go(self) -> None:
        self._write(b"go\n")
        self._reader.start()

    def stop(self) -> None:
        """End a worker started with `iterations` 0 after the calls in progress."""
        self._write(b"stop\n")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in iter(self.proc.stdout.readline, b""):
            with self._changed:
                self.lines.append(json.loads(line))
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def read_until(self, wanted: str) -> None:
        """Wait until a line has the field `wanted`, or the worker's output ended."""
        with self._changed:
            self._changed.wait_for(lambda: self._ended or any(wanted in x for x in self.lines))

    def finish(self, timeout: float = 120) -> list[dict[str, Any]]:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        err = self.proc.stderr.read()  # until it exits (its stderr drained meanwhile)
        self.proc.wait(timeout=timeout)
        self._reader.join(timeout=timeout)
        assert self.proc.returncode in (0, -signal.SIGKILL), err.decode()
        return self.lines

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)


def start_all(cfgs: list[dict[str, Any]]) -> list[Worker]:
    workers = [Worker(c) for c in cfgs]
    for w in workers:
        w.wait_ready()
    for w in workers:
        w.go()
    return workers


async def run_all(cfgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run the workers to completion; all their output lines."""
    def _run() -> list[dict[str, Any]]:
        lines: list[dict[str, Any]] = []
        for w in start_all(cfgs):
            lines += w.finish()
        return lines

    return await asyncio.to_thread(_run)


def sync_process(env: dict[str, str]) -> subprocess.Popen[str]:
    """`python -m scripts.quota_sync` with the given environment."""
    return subprocess.Popen([sys.executable, "-m", "scripts.quota_sync"], cwd=ROOT, env={**os.environ, **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
