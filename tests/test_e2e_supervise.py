"""End to end: a worker of `tollway serve --workers 2` killed by the OS is replaced.

The real server on MariaDB + Redis; one of its two workers gets SIGKILL; within a bounded wait two
server workers run again under the main process (one of them new), requests succeed, and the death was
logged with the worker's pid and the signal. Then SIGINT still stops everything cleanly.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import pytest

from server.supervise import FIRST_DELAY, MAX_DELAY, STABLE_AFTER, describe_exit, next_delay
from tests.test_e2e_serve import login, mariadb_redis_env, serving, setup_root
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
    with (mariadb_redis_env(tmp_path, "e2e") as (env, _, _),
          serving(tmp_path, env, "--workers", "2") as (proc, base_url)):
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


def _sync_processes(main_pid: int) -> list[int]:
    """The live `tollway quota-sync` children of `main_pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if int(stat[1]) == main_pid and stat[0] not in ("Z", "X") and b"quota-sync" in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_the_quota_sync_is_its_own_supervised_process(tmp_path: Path) -> None:
    """With Redis, `tollway serve` runs the quota sync as its own process (not in a serving worker), moves
    balance changes into SQL with it, restarts it when it is killed, and stops it on shutdown."""

    def synced_grants(client: httpx.Client) -> int:  # manage logs in SQL: written only by the sync
        page = client.get("/api/log/", params={"type": 3, "page_size": 100}).json()["data"]
        return int(page["total"])

    with mariadb_redis_env(tmp_path, "e2e") as (env, _, _):
        with serving(tmp_path, env, "--workers", "1") as (proc, base_url):
            main_pid = proc.popen.pid
            wait_for(lambda: len(_sync_processes(main_pid)) == 1, RESTART_DEADLINE, "the sync process")
            first = _sync_processes(main_pid)[0]
            setup_root(base_url, "mysql")
            with httpx.Client(base_url=base_url, timeout=20) as client:
                user_id = login(client)
                client.headers["New-Api-User"] = str(user_id)
                initial = client.get("/api/user/self").json()["data"]["quota"]
                grant = {"id": user_id, "action": "add_quota", "mode": "add", "value": 1000}
                assert client.post("/api/user/manage", json=grant).status_code == 200
                wait_for(lambda: synced_grants(client) == 1, RESTART_DEADLINE, "the first change in SQL")

                os.kill(first, signal.SIGKILL)
                wait_for(lambda: _sync_processes(main_pid) not in ([], [first]), RESTART_DEADLINE,
                         f"a new sync process\n{proc.output()}")
                assert client.post("/api/user/manage", json=grant).status_code == 200
                wait_for(lambda: synced_grants(client) == 2, RESTART_DEADLINE, "the second change in SQL")
                assert client.get("/api/user/self").json()["data"]["quota"] == initial + 2000
            assert f"quota sync (pid {first}) was killed by SIGKILL" in proc.stderr, proc.output()
            last = _sync_processes(main_pid)
        assert last and not _sync_processes(main_pid)  # stopped with the server
