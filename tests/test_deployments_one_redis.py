"""Two deployments on one Redis server: real `tollway serve --workers 2` processes, each on a MariaDB database
of its own, with `REDIS_URL` naming two databases of the same Redis server (13 and 14) and the same
`REDIS_KEY_PREFIX`. Redis pub/sub ignores the database number, so unless the channel's name carries it the
two hear each other's broadcasts; a worker that adopted the other deployment's (higher) version number
then ignored every later change of its own deployment.

Each deployment's two workers are reached over two keep-alive connections pinned to them (tests/workers.py),
so every check below lands on the other worker than the change, deterministically. 50 rounds, both
deployments in each: a model price set (`ModelPrice`) on one worker is listed by the other at once, and a
channel created on one worker serves the other's very next model call (priced by that option: a stale
option is a 400, a stale routing table a 404); the other deployment still lists its own price. The writer
alternates between the two workers.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.openai import FakeOpenAI
from tests.services import redis_db_url
from tests.test_account_security_workers import READY_DEADLINE, Pinned, pin_two_workers
from tests.test_e2e_gateway import FAKES_NETWORK
from tests.test_e2e_serve import ROOT_PASSWORD, mariadb_redis_env, serving, setup_root
from tests.workers import server_workers, wait_for

pytestmark = pytest.mark.slow

ROUNDS = 50
OPENAI = 1
REDIS_DATABASES = (13, 14)


@dataclass
class Deployment:
    name: str
    a: Pinned
    b: Pinned
    auth: dict[str, str]  # root's access token
    caller: dict[str, str]  # an unlimited API key of root
    price: dict[str, float]  # the ModelPrice this deployment was last given

    def workers(self, round_: int) -> tuple[Pinned, Pinned]:
        """(writer, reader) of a round: the writer alternates."""
        return (self.a, self.b) if round_ % 2 == 0 else (self.b, self.a)


def data(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["success"] is True, body
    return body["data"]


def listed_price(deployment: Deployment, via: Pinned) -> dict[str, float]:
    options = {o["key"]: o["value"] for o in data(via.send("GET", "/api/option/", deployment.auth))}
    price: dict[str, float] = json.loads(options["ModelPrice"])
    return price


@contextmanager
def deployment(tmp_path: Path, name: str, redis_db: int, prefix: str) -> Iterator[Deployment]:
    """One `tollway serve --workers 2` on a fresh MariaDB database and Redis database `redis_db`, set up,
    with root's access token, an API key and connections pinned to both workers."""
    workdir = tmp_path / name
    workdir.mkdir()
    with (mariadb_redis_env(workdir, name, redis_url=redis_db_url(redis_db), prefix=prefix,
                            UPSTREAM_ALLOW_PRIVATE=FAKES_NETWORK) as (env, _, _),
          serving(workdir, env, "--workers", "2") as (proc, base_url)):
        main_pid = proc.popen.pid
        wait_for(lambda: len(server_workers(main_pid)) == 2
                 and all(f"Worker ready [{pid}]" in proc.stdout for pid in server_workers(main_pid).values()),
                 READY_DEADLINE, "two ready workers")
        setup_root(base_url, "mysql")
        with httpx.Client(base_url=base_url, timeout=30) as http:
            login = data(http.post("/api/user/login", json={"username": "root", "password": ROOT_PASSWORD}))
            uid = str(login["id"])
            token = data(http.get("/api/user/token", headers={"New-Api-User": uid}))
        auth = {"Authorization": f"Bearer {token}", "New-Api-User": uid}
        a, b = pin_two_workers(base_url, main_pid, int(env["PORT"]))
        try:
            data(a.send("POST", "/api/user/manage", auth,
                        json={"id": int(uid), "action": "add_quota", "mode": "add", "value": 10**12}))
            made = data(a.send("POST", "/api/token/", auth, json={"name": "calls", "unlimited_quota": True}))
            key = made["key"]
            yield Deployment(name, a, b, auth, {"Authorization": f"Bearer {key}"}, {})
        finally:
            a.http.close()
            b.http.close()


def one_round(me: Deployment, other: Deployment, round_: int, upstream: str) -> None:
    writer, reader = me.workers(round_)
    model = f"{me.name}-model-{round_}"

    me.price = {model: 0.001}
    option = {"key": "ModelPrice", "value": json.dumps(me.price)}
    data(writer.send("PUT", "/api/option/", me.auth, json=option))
    assert listed_price(me, reader) == me.price, f"round {round_}: {me.name}'s other worker: old price"

    channel = {"name": model, "type": OPENAI, "key": "sk-upstream", "models": model, "group": "default",
               "base_url": upstream}
    data(writer.send("POST", "/api/channel/", me.auth, json={"mode": "single", "channel": channel}))
    response = reader.send("POST", "/v1/moderations", me.caller, json={"model": model, "input": "hello"})
    assert response.status_code == 200, f"round {round_}: {me.name}'s other worker: {response.text}"

    assert listed_price(other, other.workers(round_)[1]) == other.price, (
        f"round {round_}: {other.name} lists another price than its own")


def test_two_deployments_on_one_redis_server_follow_only_their_own_changes(tmp_path: Path) -> None:
    prefix = f"twtest:deploy:{secrets.token_hex(4)}:"  # the same in both Redis databases

    async def scenario() -> None:
        async with FakeOpenAI() as upstream:  # served by this event loop while the rounds run in a thread
            await asyncio.to_thread(rounds, upstream.url)

    def rounds(upstream: str) -> None:
        with ExitStack() as stack:
            one, two = (stack.enter_context(deployment(tmp_path, name, db, prefix))
                        for name, db in zip(("one", "two"), REDIS_DATABASES, strict=True))
            for round_ in range(ROUNDS):
                one_round(one, two, round_, upstream)
                one_round(two, one, round_, upstream)

    asyncio.run(scenario())
