"""End to end: how the real `tollway serve` starts on a taken port, and stops on SIGTERM and SIGINT.

    a port in use         one line on stderr, a non-zero status, nothing printed before it (embedded, and
                          MariaDB + Redis with two workers)
    a stream in flight    one worker (embedded) or two (SQLite or MariaDB, with Redis); the signal sent to the
    at the stop           main process (`docker stop`, systemd's KillMode=mixed) or to the whole process group
                          (a terminal's Ctrl-C, systemd's default): the stream completes within the grace, the
                          server exits 0 with no traceback, and the call is charged exactly once — read in SQL
                          after the stop, next to an identical call made before it
    a stream longer       SHUTDOWN_GRACE=1: the stream is ended with the provider's error event (the chunked
    than the grace        body ends properly), and charged once on what it delivered

The fake Gemini streams slowly (`chunk_delay`), so the call is still running when the signal is sent: it is
sent as soon as the first event has arrived.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from tests.fakes.gemini import FakeGemini
from tests.services import run_blocking
from tests.test_e2e_serve import (
    ROOT_PASSWORD,
    Proc,
    clean_env,
    free_port,
    redis_env,
    run_to_end,
    setup_root,
    start,
    stop,
    wait_until_serving,
)

pytestmark = pytest.mark.slow

TTS = "gemini-2.5-flash-preview-tts"
SPEECH = {"contents": [{"parts": [{"text": "Say hi"}]}],
          "generationConfig": {"responseModalities": ["AUDIO"]}}
FAKES_NETWORK = "127.0.0.1/32"  # the fake listens on loopback, which Tollway refuses unless allowed
EXIT_DEADLINE = 90.0  # seconds for the server to exit after the signal: bounds a hang only


# ---- a port in use --------------------------------------------------------------------------------------

@contextmanager
def stack_env(tmp_path: Path, stack: str, **settings: str) -> Iterator[tuple[dict[str, str], str, list[str]]]:
    """(env, database URL, extra `serve` arguments) of `stack`: "embedded" (SQLite, one process),
    "sqlite+redis" or "mariadb+redis" (two workers each)."""
    if stack == "embedded":
        data_dir = tmp_path / "data"
        env = clean_env(DATA_DIR=str(data_dir), HOST="127.0.0.1", PORT=str(free_port()),
                        GLOBAL_API_RATE_LIMIT="0", CRITICAL_RATE_LIMIT="0", **settings)
        yield env, f"sqlite+aiosqlite:///{(data_dir / 'tollway.db').resolve()}", []
        return
    with redis_env(tmp_path, "stop", database=stack.split("+")[0], **settings) as (env, db_url, _):
        yield env, db_url, ["--workers", "2"]


@pytest.mark.parametrize("stack", ["embedded", "mariadb+redis"])
def test_a_port_in_use_is_one_line_and_a_non_zero_status(tmp_path: Path, stack: str) -> None:
    with stack_env(tmp_path, stack) as (env, _, args), socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_to_end(tmp_path, {**env, "PORT": str(port)}, "serve", *args)
    assert proc.popen.returncode not in (0, None), proc.output()
    refusal = f"tollway: cannot listen on 127.0.0.1:{port}: Address already in use"
    assert proc.stderr.splitlines() == [refusal], proc.output()
    assert proc.stdout == "", proc.output()  # no "listening on" before the refusal


# ---- a stream in flight at the stop ---------------------------------------------------------------------

@dataclass
class Gateway:
    """A served gateway: root's id, an unlimited API key, and root's counters before any call."""

    base_url: str
    user_id: int
    key: str
    quota: int
    used_quota: int
    request_count: int


async def open_gateway(base_url: str, database_type: str, gemini: FakeGemini) -> Gateway:
    await asyncio.to_thread(setup_root, base_url, database_type)
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as admin:
        login = await admin.post("/api/user/login", json={"username": "root", "password": ROOT_PASSWORD})
        assert login.status_code == 200, login.text
        user_id = login.json()["data"]["id"]
        admin.headers["New-Api-User"] = str(user_id)
        channel = {"name": "gemini", "type": 24, "key": "g-key", "base_url": gemini.url, "models": TTS,
                   "group": "default"}
        created = await admin.post("/api/channel/", json={"mode": "single", "channel": channel})
        assert created.status_code == 200, created.text
        topped = await admin.post("/api/user/manage", json={"id": user_id, "action": "add_quota",
                                                            "mode": "add", "value": 10_000_000})
        assert topped.status_code == 200, topped.text
        made = await admin.post("/api/token/", json={"name": "stop", "unlimited_quota": True})
        assert made.status_code == 200, made.text
        me = (await admin.get("/api/user/self")).json()["data"]
    return Gateway(base_url, user_id, made.json()["data"]["key"], me["quota"], me["used_quota"],
                   me["request_count"])


async def stream_speech(gateway: Gateway, on_first: Callable[[], None] | None = None, timeout: float = 60.0
                        ) -> tuple[str, list[dict[str, Any]]]:
    """One streamed call; `on_first` runs once its first event has arrived. Returns (the request id, the
    events). A body that does not end properly raises (httpx.RemoteProtocolError)."""
    events: list[dict[str, Any]] = []
    async with (httpx.AsyncClient(base_url=gateway.base_url, timeout=timeout) as client,
                client.stream("POST", f"/v1beta/models/{TTS}:streamGenerateContent", params={"alt": "sse"},
                              json=SPEECH, headers={"x-goog-api-key": gateway.key}) as response):
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line.removeprefix("data: ")))
                if len(events) == 1 and on_first is not None:
                    on_first()
    return response.headers["x-request-id"], events


def sql_rows(url: str, statement: str) -> list[Any]:
    async def read() -> list[Any]:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as conn:
                return list((await conn.execute(text(statement))).all())
        finally:
            await engine.dispose()

    return run_blocking(read())


def charges(url: str, user_id: int) -> tuple[dict[str, int], tuple[int, int, int]]:
    """({request id: cost} of the consume logs, (quota, used_quota, request_count) of the user), in SQL."""
    logs = {row.request_id: int(row.quota) for row in
            sql_rows(url, "SELECT request_id, quota FROM logs WHERE type = 2")}
    user = sql_rows(url, f"SELECT quota, used_quota, request_count FROM users WHERE id = {user_id}")[0]  # noqa: S608 (an int)
    return logs, (int(user.quota), int(user.used_quota), int(user.request_count))


def send(proc: Proc, signum: signal.Signals, to_group: bool) -> Callable[[], None]:
    def deliver() -> None:
        if to_group:
            os.killpg(proc.popen.pid, signum)  # the server's own session: its processes only
        else:
            os.kill(proc.popen.pid, signum)

    return deliver


async def exit_status(proc: Proc) -> int | None:
    try:
        return await asyncio.to_thread(proc.popen.wait, EXIT_DEADLINE)
    except subprocess.TimeoutExpired:
        return None


def assert_clean_exit(proc: Proc, code: int | None) -> None:
    assert code == 0, f"exit status {code}\n{proc.output()}"
    assert "Traceback" not in proc.stdout and "Traceback" not in proc.stderr, proc.output()
    assert "Event loop is closed" not in proc.stderr, proc.output()


@pytest.mark.parametrize(("stack", "signum", "to_group"), [
    ("embedded", signal.SIGTERM, True),
    ("sqlite+redis", signal.SIGTERM, True),
    ("sqlite+redis", signal.SIGINT, False),
    ("mariadb+redis", signal.SIGINT, True),
    ("mariadb+redis", signal.SIGTERM, False),
    ("mariadb+redis", signal.SIGTERM, True),
], ids=["embedded-TERM-group", "sqlite-TERM-group", "sqlite-INT-main", "mariadb-INT-group",
        "mariadb-TERM-main", "mariadb-TERM-group"])
async def test_a_stream_in_flight_completes_and_is_charged_once(
        tmp_path: Path, stack: str, signum: signal.Signals, to_group: bool) -> None:
    chunks = 8
    database_type = "mysql" if stack == "mariadb+redis" else "sqlite"
    async with FakeGemini(stream_chunks=chunks, chunk_delay=0.4) as gemini:
        with stack_env(tmp_path, stack, UPSTREAM_ALLOW_PRIVATE=FAKES_NETWORK,
                        SHUTDOWN_GRACE="60") as (env, db_url, args):
            proc = start(tmp_path, env, "serve", *args)
            try:
                base_url = f"http://127.0.0.1:{env['PORT']}"
                # every worker serves before the stop (a stop while they start is the last test's case)
                await asyncio.to_thread(wait_until_serving, proc, base_url, 2 if args else 1)
                gateway = await open_gateway(base_url, database_type, gemini)
                before, full = await stream_speech(gateway)  # the same call, with nobody stopping
                during, events = await stream_speech(gateway, on_first=send(proc, signum, to_group))
                code = await exit_status(proc)
            finally:
                await asyncio.to_thread(stop, proc)
            assert_clean_exit(proc, code)
            assert len(full) == chunks and len(events) == chunks, events
            assert events[-1]["candidates"][0]["finishReason"] == "STOP"
            assert events[-1]["usageMetadata"] == full[-1]["usageMetadata"]

            logs, (quota, used, count) = charges(db_url, gateway.user_id)
    cost = logs[before]
    assert cost > 0
    assert logs == {before: cost, during: cost}  # one consume log each, at the same price
    assert (quota, used, count) == (gateway.quota - 2 * cost, gateway.used_quota + 2 * cost,
                                    gateway.request_count + 2)


async def test_a_stream_longer_than_the_grace_is_ended_cleanly_and_charged_once(tmp_path: Path) -> None:
    async with FakeGemini(stream_chunks=40, chunk_delay=0.5) as gemini:  # 20 s: longer than any grace here
        with stack_env(tmp_path, "mariadb+redis", UPSTREAM_ALLOW_PRIVATE=FAKES_NETWORK,
                        SHUTDOWN_GRACE="1") as (env, db_url, args):
            proc = start(tmp_path, env, "serve", *args)
            try:
                base_url = f"http://127.0.0.1:{env['PORT']}"
                # every worker serves before the stop (a stop while they start is the last test's case)
                await asyncio.to_thread(wait_until_serving, proc, base_url, 2 if args else 1)
                gateway = await open_gateway(base_url, "mysql", gemini)
                request_id, events = await stream_speech(gateway, on_first=send(proc, signal.SIGTERM, True))
                code = await exit_status(proc)
            finally:
                await asyncio.to_thread(stop, proc)
            assert_clean_exit(proc, code)
            delivered, last = events[:-1], events[-1]
            assert 1 <= len(delivered) < 40, events
            assert last == {"error": {"code": 503, "status": "UNAVAILABLE",
                                      "message": f"the server is stopping (request id: {request_id})"}}

            logs, (quota, used, count) = charges(db_url, gateway.user_id)
            interrupted = sql_rows(db_url, "SELECT other FROM logs WHERE type = 2")
    cost = logs[request_id]
    assert list(logs) == [request_id]
    assert json.loads(interrupted[0].other)["stream_interrupted"] is True
    assert (quota, used, count) == (gateway.quota - cost, gateway.used_quota + cost,
                                    gateway.request_count + 1)


# ---- a stop while the workers are still starting ---------------------------------------------------------

@pytest.mark.parametrize("step", ["before", "after"])
def test_a_stop_signal_while_the_workers_start_stops_them_once_they_serve(tmp_path: Path, step: str) -> None:
    """Both workers get the group's SIGTERM (and the main process's SIGINT) while a start-up step of theirs
    runs (`TEST_WORKER_START_DELAY`): before they serve (no stop handler of theirs yet), or after (Sanic's
    handlers are in place, but the loop only runs until the step is done). They stop as soon as they
    serve, and the server exits cleanly (a lost signal left such a worker serving and the server hanging)."""
    delayed = {"TOLLWAY_TEST_FAULTS": "1", "TEST_WORKER_START_DELAY": "3"}
    with stack_env(tmp_path, "sqlite+redis", **delayed) as (env, _, args):
        proc = start(tmp_path, env, "serve", *args)
        try:
            deadline = time.monotonic() + 60
            while proc.stderr.count(f"worker start delayed ({step})") < 2:  # both are in that step
                assert proc.popen.poll() is None and time.monotonic() < deadline, proc.output()
                time.sleep(0.05)
            assert "Worker ready" not in proc.stdout, proc.output()
            os.killpg(proc.popen.pid, signal.SIGTERM)
            try:
                code: int | None = proc.popen.wait(EXIT_DEADLINE)
            except subprocess.TimeoutExpired:
                code = None
        finally:
            stop(proc)
    assert_clean_exit(proc, code)
    assert proc.stdout.count("Worker complete") == 2, proc.output()
