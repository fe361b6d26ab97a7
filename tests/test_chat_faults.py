"""A streamed chat call whose worker is killed by the OS (`kill -9`) mid-stream, in pass-through and
converted (a `/v1/messages` stream on an OpenAI channel): the real `tollway serve --workers 2` on MariaDB and
a redis-server of the test's own. The dead worker never settles; the sweeper
returns its whole hold after the lease, so the books stay exact (no consume log, nothing charged), and the
next call is charged once by the formula."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import secrets
import signal
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.openai import FakeOpenAI
from tests.redis_server import own_redis
from tests.services import create_database, drop_database, unavailable
from tests.test_e2e_faults import DEADLINE, PREFIX, _books, _ready, _settled
from tests.test_e2e_serve import ROOT_PASSWORD, clean_env, free_port, serving, setup_root
from tests.workers import server_workers, wait_for

pytestmark = pytest.mark.slow

CHAT = "gpt-fake-chat"


async def _set_up(base_url: str, oai: FakeOpenAI) -> tuple[int, str]:
    await asyncio.to_thread(setup_root, base_url, "mysql")
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as admin:
        login = await admin.post("/api/user/login", json={"username": "root", "password": ROOT_PASSWORD})
        assert login.status_code == 200, login.text
        uid = int(login.json()["data"]["id"])
        admin.headers["New-Api-User"] = str(uid)
        channel = {"name": "openai", "type": 1, "key": "o-key", "base_url": oai.url, "models": CHAT,
                   "group": "default"}
        created = await admin.post("/api/channel/", json={"mode": "single", "channel": channel})
        assert created.status_code == 200, created.text
        for option, value in (("ModelRatio", {CHAT: 1.25}), ("CompletionRatio", {CHAT: 4})):
            put = await admin.put("/api/option/", json={"key": option, "value": json.dumps(value)})
            assert put.status_code == 200, put.text
        topped = await admin.post("/api/user/manage", json={"id": uid, "action": "add_quota", "mode": "add",
                                                             "value": 1_000_000})
        assert topped.status_code == 200, topped.text
        made = await admin.post("/api/token/", json={"name": "chat", "remain_quota": 500_000})
        assert made.status_code == 200, made.text
        return uid, str(made.json()["data"]["key"])


def _replaced(proc: Any, main_pid: int, victims: list[int]) -> Callable[[], bool]:
    """The killed workers are gone and replaced by ready ones."""
    return lambda: not set(victims) & set(server_workers(main_pid).values()) and _ready(proc, main_pid)()


async def test_a_worker_killed_mid_stream_charges_nothing_and_the_next_call_once(tmp_path: Path) -> None:
    try:
        db_url = await asyncio.to_thread(create_database, "mariadb")
    except Exception as exc:
        unavailable("mariadb", exc)
        raise
    try:
        with own_redis(tmp_path / "redis") as redis:
            env = clean_env(DATABASE_URL=db_url, REDIS_URL=redis.url, REDIS_KEY_PREFIX=PREFIX,
                            SECRET_KEY=secrets.token_hex(32), DATA_DIR=str(tmp_path / "data"),
                            HOST="127.0.0.1", PORT=str(free_port()), GLOBAL_API_RATE_LIMIT="0",
                            CRITICAL_RATE_LIMIT="0", QUOTA_HOLD_TIMEOUT="2", QUOTA_SYNC_INTERVAL="0.2",
                            UPSTREAM_ALLOW_PRIVATE="127.0.0.1/32")
            async with FakeOpenAI() as oai:
                with serving(tmp_path, env, "--workers", "2") as (proc, base_url):
                    main_pid = proc.popen.pid
                    uid, key = await _set_up(base_url, oai)
                    await asyncio.to_thread(wait_for, _ready(proc, main_pid), DEADLINE, "two ready workers")
                    await _settled(redis.url)  # the top-up is in SQL before the books are read
                    start = await _books(db_url, uid)
                    body = {"model": CHAT, "messages": [{"role": "user", "content": "hi"}], "stream": True,
                            "max_tokens": 100}
                    # a chat stream in pass-through, then a Messages stream converted for the OpenAI channel
                    for path, headers, first in (
                            ("/v1/chat/completions", {"Authorization": f"Bearer {key}"}, "data: "),
                            ("/v1/messages", {"x-api-key": key, "anthropic-version": "2023-06-01"},
                             "event: message_start")):
                        oai.hold_stream()
                        async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
                            with contextlib.suppress(httpx.TransportError):
                                async with http.stream("POST", path, json=body, headers=headers) as reply:
                                    assert reply.status_code == 200
                                    async for line in reply.aiter_lines():
                                        assert line.startswith(first)  # the first event has arrived
                                        break
                                    victims = list(server_workers(main_pid).values())
                                    for victim in victims:  # whichever took it, killed mid-stream
                                        os.kill(victim, signal.SIGKILL)
                        oai.release_stream()
                        await asyncio.to_thread(wait_for, _replaced(proc, main_pid, victims), DEADLINE,
                                                "the killed workers replaced")
                        await _settled(redis.url)  # the sweeper returned the hold; the sync drained
                        after_kill = await _books(db_url, uid)
                        assert after_kill["logs"] == [], path
                        assert (after_kill["quota"], after_kill["remain"]) == (start["quota"],
                                                                               start["remain"])

                    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
                        done = await http.post("/v1/chat/completions", json={**body, "stream": False},
                                               headers={"Authorization": f"Bearer {key}"})
                    assert done.status_code == 200, done.text
                    usage = done.json()["usage"]
                    await _settled(redis.url)
                    end = await _books(db_url, uid)
                    (log,) = end["logs"]
                    expected = math.ceil((Decimal(usage["prompt_tokens"])
                                          + Decimal(usage["completion_tokens"]) * 4) * Decimal("1.25"))
                    assert log.quota == expected
                    assert end["quota"] == start["quota"] - expected
                    assert end["remain"] == start["remain"] - expected
    finally:
        await asyncio.to_thread(drop_database, "mariadb", db_url)
