"""Start and read load-worker processes (tests/quota/load_worker.py) for the invariant tests."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


class Worker:
    """A load worker; its output is read unbuffered (bytes, `bufsize=0`): a line read by `read_until` takes
    no more from the pipe than that line, so `finish`'s `communicate` gets every line after it (a buffered
    reader's read-ahead would be lost to `communicate`, which reads the pipe itself)."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.quota.load_worker", json.dumps(cfg)], cwd=ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
        )
        self.lines: list[dict[str, Any]] = []

    def wait_ready(self) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"worker died: {self.proc.stderr.read().decode() if self.proc.stderr else ''}"
        assert json.loads(line) == {"ready": True}

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        """End a worker started with `iterations` 0 after the calls in progress."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"stop\n")
        self.proc.stdin.flush()

    def read_until(self, wanted: str) -> None:
        """Read the worker's lines until one has the field `wanted` (kept for `finish`), or it ends."""
        assert self.proc.stdout is not None
        while line := self.proc.stdout.readline():
            self.lines.append(json.loads(line))
            if wanted in self.lines[-1]:
                return

    def finish(self, timeout: float = 120) -> list[dict[str, Any]]:
        out, err = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode in (0, -signal.SIGKILL), err.decode()
        self.lines += [json.loads(x) for x in out.splitlines() if x.strip()]
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
