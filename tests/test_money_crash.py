"""`kill -9` between a credit's SQL commit and the live-balance update loses nothing
(docs/MONEY.md#credits-decided-in-sql).

The real `tollway serve`, on MariaDB + Redis and on SQLite in embedded mode, started with
`TEST_KILL_AFTER_CREDIT_COMMIT=true`: the process SIGKILLs itself right after committing a credit's fact,
before the quota engine sees the credit. Three times, one process each: a code is redeemed, invitation
rewards are moved, an admin completes an order. After each death SQL holds the fact and the recorded
credit, and (with Redis) the engine has never seen the credit's key. Then a process without the hook
starts: its start-up replay applies the three credits, each exactly once — the balance, live and in SQL,
is the three amounts, with one log each; redeeming the code again is a 409, completing the order again
adds nothing, and yet another restart replays nothing twice.

And a queue led by credits the engine refuses for good: 101 credits that would take a balance past
2^53 − 1 recorded ahead of a code's credit whose process was killed before delivering it. The next process
settles the 101 as failed (kept, each with its reason) and applies the code's credit in its start-up
replay; its log names each refused credit once and holds no traceback.
"""

from __future__ import annotations

import contextlib
import secrets
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from sqlalchemy import select

from core.enums import LogType, RedemptionStatus, TopUpStatus
from models.credits import PendingCredit, PendingCreditRepository
from models.db import Database
from models.logs import Log
from models.redemptions import Redemption
from models.tables import User
from models.topups import TopUp, TopUpRepository
from models.users import UserRepository
from quota.partitions import DEFAULT_PARTITIONS, tag
from tests.services import (
    REDIS_URL,
    run_blocking,
)
from tests.test_e2e_serve import (
    ROOT_PASSWORD,
    START_DEADLINE,
    clean_env,
    free_port,
    mariadb_redis_env,
    setup_root,
    start,
    stop,
    wait_until_serving,
)

pytestmark = pytest.mark.slow

PASSWORD = "password-123"
PER_UNIT = 500_000
CODE_QUOTA = 4_321
AFF = 2 * PER_UNIT
ORDER_UNITS = 3


@contextmanager
def process(tmp_path: Path, env: dict[str, str]) -> Iterator[str]:
    """`tollway serve` for the duration of the block (stopped however it ended); its URL."""
    proc = start(tmp_path, env, "serve")
    try:
        url = f"http://{env['HOST']}:{env['PORT']}"
        wait_until_serving(proc, url)
        yield url
    finally:
        stop(proc)


def client(url: str, username: str, password: str = PASSWORD) -> httpx.Client:
    http = httpx.Client(base_url=url, timeout=60)
    reply = http.post("/api/user/login", json={"username": username, "password": password})
    assert reply.status_code == 200, reply.text
    http.headers["New-Api-User"] = str(reply.json()["data"]["id"])
    return http


def killed_by(tmp_path: Path, env: dict[str, str], act: Any) -> None:
    """Run `act(url)` against a process with the hook: the request must die with the process."""
    armed = {"TOLLWAY_TEST_FAULTS": "1", "TEST_KILL_AFTER_CREDIT_COMMIT": "true"}
    proc = start(tmp_path, env | armed, "serve")
    try:
        url = f"http://{env['HOST']}:{env['PORT']}"
        wait_until_serving(proc, url)
        with pytest.raises(httpx.TransportError):
            act(url)
        assert proc.popen.wait(timeout=START_DEADLINE) == -signal.SIGKILL, proc.output()
    finally:
        stop(proc)


async def _sql(db_url: str) -> dict[str, Any]:
    db = Database(db_url, pool_size=1)
    try:
        async with db.transaction() as tx:
            user = await tx.scalar(select(User).where(User.username == "vic"))
            assert user is not None
            return {
                "user": user,
                "code": await tx.scalar(select(Redemption)),
                "order": await tx.scalar(select(TopUp)),
                "pending": sorted((await tx.scalars(select(PendingCredit.ref))).all()),
                "logs": list((await tx.scalars(select(Log).where(Log.user_id == user.id,
                                                                 Log.type.in_([LogType.TOPUP, LogType.SYSTEM])
                                                                 ).order_by(Log.id))).all()),
            }
    finally:
        await db.dispose()


async def _seed(db_url: str, user_id: int, trade_no: str) -> None:
    db = Database(db_url, pool_size=1)
    try:
        async with db.transaction() as tx:
            await UserRepository(tx).update_fields(user_id, aff_quota=AFF, aff_history_quota=AFF)
            await TopUpRepository(tx).add(TopUp(
                user_id=user_id, amount=ORDER_UNITS, money=24.0, trade_no=trade_no, payment_method="card",
                payment_provider="stripe", create_time=0, complete_time=0, status=TopUpStatus.PENDING))
    finally:
        await db.dispose()


def never_seen(prefix: str | None, ref: str) -> None:
    """The engine has no trace of the credit's key (the process died before calling it)."""
    if prefix is None:
        return  # embedded mode: the engine died with the process
    r = redis.Redis.from_url(REDIS_URL)
    try:
        assert not any(r.exists(f"{prefix}q:{tag(p)}:i:{ref}") for p in range(DEFAULT_PARTITIONS))
    finally:
        r.close()


def wait_for_replay(db_url: str) -> dict[str, Any]:
    deadline = time.monotonic() + START_DEADLINE
    while time.monotonic() < deadline:
        found = run_blocking(_sql(db_url))
        if not found["pending"]:
            return found
        time.sleep(0.2)
    raise AssertionError("the recorded credits were not replayed")


def scenario(tmp_path: Path, env: dict[str, str], db_url: str, kind: str, prefix: str | None) -> None:
    trade_no = f"ref_{secrets.token_hex(16)}"
    with process(tmp_path, env) as url:
        setup_root(url, kind)
        root = client(url, "root", ROOT_PASSWORD)
        vic_id = root.post("/api/user/", json={"username": "vic", "password": PASSWORD}).json()["data"]["id"]
        made = root.post("/api/redemption/", json={"name": "c", "quota": CODE_QUOTA, "count": 1})
        [key] = made.json()["data"]
        run_blocking(_seed(db_url, vic_id, trade_no))

    killed_by(tmp_path, env, lambda url: client(url, "vic").post("/api/user/topup", json={"key": key}))
    found = run_blocking(_sql(db_url))
    code_ref = f"redeem:{found['code'].id}"
    assert (found["code"].status, found["code"].used_user_id) == (RedemptionStatus.USED, vic_id)
    assert code_ref in found["pending"]
    never_seen(prefix, code_ref)

    killed_by(tmp_path, env, lambda url: client(url, "vic").post("/api/user/aff_transfer",
                                                                 json={"quota": AFF}))
    found = run_blocking(_sql(db_url))
    [aff_ref] = [ref for ref in found["pending"] if ref.startswith("aff:")]
    assert found["user"].aff_quota == 0
    never_seen(prefix, aff_ref)

    killed_by(tmp_path, env, lambda url: client(url, "root", ROOT_PASSWORD).post(
        "/api/user/topup/complete", json={"trade_no": trade_no}))
    found = run_blocking(_sql(db_url))
    assert found["order"].status == TopUpStatus.SUCCESS and f"topup:{trade_no}" in found["pending"]
    never_seen(prefix, f"topup:{trade_no}")

    expected = CODE_QUOTA + AFF + ORDER_UNITS * PER_UNIT
    for _ in range(2):  # the second start must replay nothing twice
        with process(tmp_path, env) as url:
            found = wait_for_replay(db_url)
            vic = client(url, "vic")
            assert vic.get("/api/user/self").json()["data"]["quota"] == expected
            again = vic.post("/api/user/topup", json={"key": key})
            assert again.status_code == 409, again.text
            root = client(url, "root", ROOT_PASSWORD)
            assert root.post("/api/user/topup/complete", json={"trade_no": trade_no}).status_code == 200
        found = run_blocking(_sql(db_url))  # the clean stop drained the sync
        assert found["user"].quota == expected
        assert sorted(x.quota for x in found["logs"]) == sorted([CODE_QUOTA, AFF, ORDER_UNITS * PER_UNIT])
        assert found["pending"] == []


def test_kill_9_after_the_commit_loses_no_credit_on_mariadb_and_redis(tmp_path: Path) -> None:
    with mariadb_redis_env(tmp_path, "crash", QUOTA_SYNC_INTERVAL="0.2") as (env, db_url, prefix):
        scenario(tmp_path, env, db_url, "mysql", prefix)


def test_kill_9_after_the_commit_loses_no_credit_in_embedded_mode(tmp_path: Path) -> None:
    data = tmp_path / "data"
    db_url = f"sqlite+aiosqlite:///{data / 'tollway.db'}"
    env = clean_env(DATA_DIR=str(data), HOST="127.0.0.1", PORT=str(free_port()), GLOBAL_API_RATE_LIMIT="0",
                    CRITICAL_RATE_LIMIT="0", QUOTA_SYNC_INTERVAL="0.2")
    with contextlib.suppress(FileExistsError):
        data.mkdir(mode=0o700)
    scenario(tmp_path, env, db_url, "sqlite", None)


REFUSED = 101
FULL = 9 * 10**15  # nine add_quota of 10^15, the most one may add: 7.2 * 10^12 below 2^53 - 1
TOO_MUCH = 10**13  # what each refused credit would add


async def _queue_behind_refused(db_url: str, full_id: int) -> str:
    """Record REFUSED credits for `full_id` ahead of the one pending credit (the code's): that one is
    recorded again behind them, unchanged. Its ref."""
    db = Database(db_url, pool_size=1)
    try:
        async with db.transaction() as tx:
            [waiting] = (await tx.scalars(select(PendingCredit))).all()
            await tx.delete(waiting)
            await tx.flush()
            credits = PendingCreditRepository(tx)
            for n in range(REFUSED):
                await credits.add(ref=f"test:refused:{n}", user_id=full_id, amount=TOO_MUCH, created_at=1,
                                  log={"type": LogType.TOPUP, "username": "full", "quota": TOO_MUCH,
                                       "content": "a credit the balance cannot take"})
            await credits.add(ref=waiting.ref, user_id=waiting.user_id, amount=waiting.amount,
                              log=waiting.log_row(), created_at=waiting.created_at)
            return waiting.ref
    finally:
        await db.dispose()


async def _outbox(db_url: str) -> list[PendingCredit]:
    db = Database(db_url, pool_size=1)
    try:
        async with db.transaction() as tx:
            return list((await tx.scalars(select(PendingCredit).order_by(PendingCredit.id))).all())
    finally:
        await db.dispose()


def test_credits_refused_for_good_never_block_a_killed_credit(tmp_path: Path) -> None:
    with mariadb_redis_env(tmp_path, "refused", QUOTA_SYNC_INTERVAL="0.2") as (env, db_url, _):
        with process(tmp_path, env) as url:
            setup_root(url, "mysql")
            root = client(url, "root", ROOT_PASSWORD)
            ids = {name: root.post("/api/user/", json={"username": name, "password": PASSWORD}
                                   ).json()["data"]["id"] for name in ("vic", "full")}
            for mode in ["override"] + ["add"] * 8:
                reply = root.post("/api/user/manage", json={"id": ids["full"], "action": "add_quota",
                                                             "mode": mode, "value": 10**15})
                assert reply.status_code == 200, reply.text
            assert reply.json()["data"]["quota"] == FULL
            made = root.post("/api/redemption/", json={"name": "c", "quota": CODE_QUOTA, "count": 1})
            [key] = made.json()["data"]

        killed_by(tmp_path, env, lambda url: client(url, "vic").post("/api/user/topup", json={"key": key}))
        code_ref = run_blocking(_queue_behind_refused(db_url, ids["full"]))

        proc = start(tmp_path, env, "serve")
        try:
            url = f"http://{env['HOST']}:{env['PORT']}"
            wait_until_serving(proc, url)
            vic = client(url, "vic")
            deadline = time.monotonic() + START_DEADLINE  # bounds a hang: the start-up replay applies it
            while vic.get("/api/user/self").json()["data"]["quota"] != CODE_QUOTA:
                assert time.monotonic() < deadline, "the killed credit was never applied"
                time.sleep(0.2)
            while code_ref in [row.ref for row in run_blocking(_outbox(db_url))]:  # forgotten after the sync
                assert time.monotonic() < deadline, "the applied credit was never forgotten"
                time.sleep(0.2)
            full = client(url, "full")
            assert full.get("/api/user/self").json()["data"]["quota"] == FULL
        finally:
            stop(proc)
        kept = run_blocking(_outbox(db_url))
        assert [row.ref for row in kept] == [f"test:refused:{n}" for n in range(REFUSED)]
        assert all(row.status == "failed" and "largest supported amount" in row.reason for row in kept)
        output = proc.output()
        for n in range(REFUSED):
            assert output.count(f"test:refused:{n} ") == 1, n
        assert "Traceback" not in output, output[-4000:]
