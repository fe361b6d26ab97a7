"""Money moved exactly once across two real `tollway serve` processes on one MariaDB and one Redis
(docs/api/payments.md#redemption-codes, #invitations, #top-up-records).

Every request below is spread over both processes at once:
- 20 redeems of one code by four users: one 200, nineteen 409, one topup log, the winner's balance
  raised once — and visible on both processes from the next request;
- 10 transfers of invitation rewards that together ask for more than `aff_quota` holds: only as many as
  fit succeed, the others are 400s, the amount moved is what left `aff_quota`, and the balances agree;
- an admin completing one order 10 times: all 200, credited once.
Then the owner of the rewards makes paid model calls (an OpenAI moderation at a fixed price, through
the local fake) on both processes, and the books conserve for every user: SQL balance = starting
balance + credits − the consume logs, and the live balance each process shows equals SQL.
"""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from core.enums import LogType, TopUpStatus
from models.db import Database
from models.logs import Log
from models.tables import User
from models.topups import TopUp, TopUpRepository
from tests.fakes.openai import FakeOpenAI
from tests.test_e2e_serve import ROOT_PASSWORD, free_port, mariadb_redis_env, serving, setup_root

pytestmark = pytest.mark.slow

PASSWORD = "password-123"
MOD = "omni-moderation-latest"
PER_UNIT = 500_000
CODE_QUOTA = 7_777
INVITER_REWARD = 1_000_000  # three invitees: 3_000_000 of rewards, six transfers of PER_UNIT
CALLS = 12
DEADLINE = 60.0  # seconds; bounds a hang only


async def _client(base_url: str, username: str, password: str = PASSWORD) -> httpx.AsyncClient:
    client = httpx.AsyncClient(base_url=base_url, timeout=60)
    reply = await client.post("/api/user/login", json={"username": username, "password": password})
    assert reply.status_code == 200, reply.text
    client.headers["New-Api-User"] = str(reply.json()["data"]["id"])
    return client


def _data(reply: httpx.Response) -> Any:
    assert reply.status_code == 200, reply.text
    return reply.json()["data"]


async def _sql(db_url: str) -> tuple[dict[str, User], list[Log]]:
    db = Database(db_url, pool_size=1)
    try:
        async with db.transaction() as tx:
            users = {u.username: u for u in (await tx.scalars(select(User))).all()}
            logs = list((await tx.scalars(select(Log).order_by(Log.id))).all())
        return users, logs
    finally:
        await db.dispose()


async def _seed_order(db_url: str, user_id: int, trade_no: str, amount: int) -> None:
    db = Database(db_url, pool_size=1)
    try:
        async with db.transaction() as tx:
            await TopUpRepository(tx).add(TopUp(
                user_id=user_id, amount=amount, money=amount * 8.0, trade_no=trade_no, payment_method="card",
                payment_provider="stripe", create_time=0, complete_time=0, status=TopUpStatus.PENDING))
    finally:
        await db.dispose()


async def _synced(db_url: str, clients: dict[str, httpx.AsyncClient]) -> dict[str, User]:
    """Wait until SQL holds every live balance (the sync caught up); the SQL rows."""
    for _ in range(int(DEADLINE * 10)):
        users, _ = await _sql(db_url)
        live = {name: _data(await c.get("/api/user/self"))["quota"] for name, c in clients.items()}
        if all(users[name].quota == value for name, value in live.items()):
            return users
        await asyncio.sleep(0.1)
    raise AssertionError("the quota sync did not catch up")


async def _scenario(urls: tuple[str, str], db_url: str, openai: FakeOpenAI) -> None:
    root = [await _client(url, "root", ROOT_PASSWORD) for url in urls]
    try:
        for key, value in (("QuotaForInviter", INVITER_REWARD), ("ModelPrice", f'{{"{MOD}": 0.002}}')):
            _data(await root[0].put("/api/option/", json={"key": key, "value": str(value)}))
        _data(await root[1].post("/api/channel/", json={"mode": "single", "channel": {
            "name": "mod", "type": 1, "key": "o-key", "base_url": openai.url, "models": MOD,
            "group": "default"}}))
        for name in ("ann", "ben", "cat", "dan"):
            _data(await root[0].post("/api/user/", json={"username": name, "password": PASSWORD}))
        clients = {name: [await _client(url, name) for url in urls] for name in ("ann", "ben", "cat", "dan")}
        code = _data(await clients["ann"][0].get("/api/user/aff"))
        anonymous = httpx.AsyncClient(base_url=urls[1], timeout=60)
        for n in range(3):
            _data(await anonymous.post("/api/user/register", json={
                "username": f"guest{n}", "password": PASSWORD, "aff_code": code}))
        await anonymous.aclose()
        start, _ = await _sql(db_url)
        assert start["ann"].aff_quota == 3 * INVITER_REWARD

        # 20 redeems of one code, by four users, on both processes at once
        [key] = _data(await root[1].post("/api/redemption/", json={"name": "race", "quota": CODE_QUOTA,
                                                                    "count": 1}))
        names = list(clients)
        replies = await asyncio.gather(*(clients[names[n % 4]][n % 2].post("/api/user/topup",
                                                                           json={"key": key})
                                         for n in range(20)))
        assert sorted(r.status_code for r in replies) == [200] + [409] * 19, [r.text for r in replies]
        winner = names[next(n for n, r in enumerate(replies) if r.status_code == 200) % 4]
        for side in clients[winner]:  # the credit is live on both processes from the next request
            assert _data(await side.get("/api/user/self"))["quota"] == CODE_QUOTA

        # 10 transfers of invitation rewards that together ask for more than is held
        replies = await asyncio.gather(*(clients["ann"][n % 2].post("/api/user/aff_transfer",
                                                                    json={"quota": PER_UNIT})
                                         for n in range(10)))
        moved = sum(r.status_code == 200 for r in replies)
        assert sorted(r.status_code for r in replies) == [200] * 6 + [400] * 4, [r.text for r in replies]
        ann = [_data(await side.get("/api/user/self")) for side in clients["ann"]]
        expected_ann = moved * PER_UNIT + (CODE_QUOTA if winner == "ann" else 0)
        assert [(a["quota"], a["aff_quota"]) for a in ann] == [(expected_ann, 0)] * 2

        # one order completed ten times
        trade_no = f"ref_{secrets.token_hex(16)}"
        await _seed_order(db_url, start["ben"].id, trade_no, amount=2)
        replies = await asyncio.gather(*(root[n % 2].post("/api/user/topup/complete",
                                                          json={"trade_no": trade_no})
                                         for n in range(10)))
        assert [r.status_code for r in replies] == [200] * 10, [r.text for r in replies]

        # paid calls on both processes
        made = _data(await clients["ann"][0].post("/api/token/", json={"name": "calls",
                                                                        "unlimited_quota": True}))
        callers = [httpx.AsyncClient(base_url=url, timeout=60,
                                     headers={"Authorization": f"Bearer {made['key']}"}) for url in urls]
        try:
            for n in range(CALLS):
                reply = await callers[n % 2].post("/v1/moderations", json={"input": "hello"})
                assert reply.status_code == 200, reply.text
        finally:
            for caller in callers:
                await caller.aclose()

        single = {name: sides[n % 2] for n, (name, sides) in enumerate(clients.items())}
        users = await _synced(db_url, single)
        _, logs = await _sql(db_url)
        credits = {name: 0 for name in clients}
        credits[winner] += CODE_QUOTA
        credits["ann"] += moved * PER_UNIT
        credits["ben"] += 2 * PER_UNIT
        for name in clients:
            uid = users[name].id
            mine = [x for x in logs if x.user_id == uid]
            consumed = sum(x.quota for x in mine if x.type == LogType.CONSUME)
            topups = [x.quota for x in mine if x.type in (LogType.TOPUP, LogType.SYSTEM)]
            assert sum(topups) == credits[name], (name, topups)
            assert users[name].quota == start[name].quota + credits[name] - consumed, name
            for side in clients[name]:
                assert _data(await side.get("/api/user/self"))["quota"] == users[name].quota
        ann_calls = [x for x in logs if x.user_id == users["ann"].id and x.type == LogType.CONSUME]
        assert len(ann_calls) == CALLS and all(x.quota == 1000 for x in ann_calls)
        assert users["ann"].request_count == CALLS and users["ann"].used_quota == CALLS * 1000
        code_logs = [x.quota for x in logs if x.type == LogType.TOPUP and str(CODE_QUOTA) in x.content]
        assert code_logs == [CODE_QUOTA]
        assert users["ann"].aff_quota == 3 * INVITER_REWARD - moved * PER_UNIT
        for sides in clients.values():
            for side in sides:
                await side.aclose()
    finally:
        for client in root:
            await client.aclose()


def test_money_moves_exactly_once_across_two_processes(tmp_path: Path) -> None:
    settings = {"QUOTA_SYNC_INTERVAL": "0.2", "UPSTREAM_ALLOW_PRIVATE": "127.0.0.1/32"}
    with mariadb_redis_env(tmp_path / "one", "money", **settings) as (env_one, db_url, _):
        env_two = {**env_one, "DATA_DIR": str(tmp_path / "two"), "PORT": str(free_port())}  # a second node

        async def run(url_one: str, url_two: str) -> None:
            async with FakeOpenAI() as openai:
                await _scenario((url_one, url_two), db_url, openai)

        with serving(tmp_path, env_one) as (_, url_one):
            setup_root(url_one, "mysql")
            with serving(tmp_path, env_two) as (_, url_two):
                asyncio.run(run(url_one, url_two))
