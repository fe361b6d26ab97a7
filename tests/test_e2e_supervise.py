"""End to end: a worker of `tollway serve --workers 2` killed by the OS is replaced.

The real server on MariaDB + Redis; one of its two workers gets SIGKILL; within a bounded wait two
server workers run again under the main process (one of them new), requests succeed, and the death was
logged with the worker's pid and the signal. Then SIGINT still stops everything cleanly.
"""

from __future__ import annotations

import os
import secrets
import signal
from pathlib import Path

import httpx
import pytest

from server.supervise import FIRST_DELAY, MAX_DELAY, STABLE_AFTER, describe_exit, next_delay
from tests.services import (
    REDIS_URL,
    create_database,
    drop_database,
    redis_ping,
    redis_purge,
    run_blocking,
    unavailable,
)
from tests.test_e2e_serve import clean_env, free_port, serving
from tests.workers import server_workers, wait_for

RESTART_DEADLINE = 90.0  # seconds; bounds a hang only (a worker needs a few seconds to start)


def test_the_restart_back_off() -> None:
    assert next_delay(0.0, 0.0) == FIRST_DELAY
    delays = [FIRST_DELAY]
    for _ in range(10):
        delays.append(next_delay(delays[-1], 1.0))  # dies again right after each restart
    assert delays[:4] == [0.5, 1.0, 2.0, 4.0] and delays[-1] == MAX_DELAY
    assert next_delay(MAX_DELAY, STABLE_AFTER) == FIRST_DELAY  # stayed up a while: back to the start
    assert describe_exit(-signal.SIGKILL) == "was killed by SIGKILL"
    assert describe_exit(3) == "exited with status 3"


@pytest.mark.slow
def test_a_killed_worker_is_replaced(tmp_path: Path) -> None:
    try:
        run_blocking(redis_ping())
        db_url = create_database("mariadb")
    except Exception as exc:
        unavailable("mariadb+redis", exc)
        raise
    prefix = f"twtest:e2e:{secrets.token_hex(4)}:"
    env = clean_env(DATABASE_URL=db_url, REDIS_URL=REDIS_URL, REDIS_KEY_PREFIX=prefix,
                    SECRET_KEY=secrets.token_hex(32), DATA_DIR=str(tmp_path / "data"), HOST="127.0.0.1",
                    PORT=str(free_port()), GLOBAL_API_RATE_LIMIT="0")
    try:
        with serving(tmp_path, env, "--workers", "2") as (proc, base_url):
            main_pid = proc.popen.pid
            def ready(workers: dict[str, int]) -> bool:  # Sanic prints this once a worker serves
                return len(workers) == 2 and all(f"Worker ready [{pid}]" in proc.stdout
                                                 for pid in workers.values())

            wait_for(lambda: ready(server_workers(main_pid)), RESTART_DEADLINE, "two ready workers")
            before = server_workers(main_pid)
            victim_name, victim = sorted(before.items())[0]

            os.kill(victim, signal.SIGKILL)

            def replaced() -> bool:
                now = server_workers(main_pid)
                return ready(now) and victim not in now.values() and victim_name in now

            wait_for(replaced, RESTART_DEADLINE, f"a new {victim_name}\n{proc.output()}")
            after = server_workers(main_pid)
            assert {n: p for n, p in after.items() if n != victim_name} == \
                {n: p for n, p in before.items() if n != victim_name}  # the other worker was left alone
            with httpx.Client(base_url=base_url, timeout=20) as client:
                assert all(client.get("/api/status").status_code == 200 for _ in range(20))
            wait_for(lambda: f"worker {victim_name} restarted" in proc.stderr, RESTART_DEADLINE,
                     "the restart in the log")
            assert f"worker {victim_name} (pid {victim}) was killed by SIGKILL" in proc.stderr, proc.output()
    finally:
        run_blocking(redis_purge(prefix))
        drop_database("mariadb", db_url)
