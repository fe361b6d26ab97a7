"""A payment webhook's credit through real failures (docs/MONEY.md#payment-webhooks-exactly-once).

- The database fails inside the delivery's transaction, after the order's UPDATE ran (the outbox table
  is renamed away on MariaDB, so the insert of the credit fails for real): 500, the order still
  pending, no customer id, no event, no credit; the provider's redelivery, once the table is back,
  credits exactly once.
- Redis is down when the event arrives (a redis-server of the test's own, stopped): the transaction
  commits, the delivery is 200, the credit waits in the outbox; when Redis is back the outbox's replay
  applies it, once — replaying again and redelivering the event add nothing.
- `kill -9` between the commit and the live-balance update (the real `tollway serve` on MariaDB + Redis
  with `TEST_KILL_AFTER_CREDIT_COMMIT`): the process dies with the request; SQL holds the completed order
  and the recorded credit, Redis never saw it; the next process (two workers) applies it at start-up,
  once, and then the same new event delivered ten times at once to that process (two workers) credits
  once. After each: balance (live and SQL), the order, the logs and the recorded events agree.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select, text

from core.enums import LogType, TopUpStatus
from models.credits import PendingCredit, PendingCreditRepository
from models.db import Database
from models.logs import Log
from models.payments import PaymentEvent
from models.tables import User
from models.topups import TopUp, TopUpRepository
from tests.conftest import _Databases, fresh_database
from tests.fakes.openai import FakeOpenAI
from tests.fakes.payment import UNIT_AMOUNT, FakeStripe, session_event, signed
from tests.harness import add_user, logged_in, make_config, serve
from tests.payments import (
    API_KEY,
    PER_UNIT,
    PRICE,
    WEBHOOK_SECRET,
    books,
    configure,
    deliver,
    live_quota,
    model_call,
    open_order,
    paid_calls,
    stored,
)
from tests.redis_server import own_redis
from tests.services import (
    REDIS_URL,
    run_blocking,
)
from tests.test_e2e_serve import ROOT_PASSWORD, START_DEADLINE, mariadb_redis_env, setup_root
from tests.test_money_crash import PASSWORD, client, killed_by, never_seen, process

pytestmark = pytest.mark.slow

PER_UNIT_DEFAULT = 500_000  # QuotaPerUnit of a fresh install (the process test keeps it)


@pytest.fixture
async def stripe_fake() -> AsyncIterator[FakeStripe]:
    async with FakeStripe(api_key=API_KEY, price_id=PRICE) as fake:
        yield fake


async def _rename(db: Database, old: str, new: str) -> None:
    async with db.engine.begin() as conn:
        await conn.execute(text(f"ALTER TABLE {old} RENAME TO {new}"))


async def test_a_delivery_that_cannot_commit_is_a_500_and_the_redelivery_credits_once(
        databases: _Databases, redis_prefix: str, tmp_path: Path, stripe_fake: FakeStripe,
        openai_fake: FakeOpenAI) -> None:
    url = await fresh_database(databases, "mariadb")
    async with serve(make_config(url, tmp_path, REDIS_URL, redis_prefix)) as app:
        await configure(app.state, stripe_fake)
        uid = await add_user(app.state, "payer")
        payer = await logged_in(app, "payer")
        key = await paid_calls(app.state, uid, openai_fake.url)
        order = await open_order(payer, app.state, 4)
        paid = session_event(order.trade_no, amount_total=4 * UNIT_AMOUNT, customer="cus_D1")
        http = app.client()
        await _rename(app.state.db, "pending_credits", "pending_credits_away")
        try:
            reply = await deliver(http, paid, app.clock.now_s())
        finally:
            await _rename(app.state.db, "pending_credits_away", "pending_credits")
        assert reply.status_code == 500 and reply.json()["success"] is False, reply.text
        assert "pending_credits" not in reply.text and "SELECT" not in reply.text
        assert (await stored(app.state, order.trade_no)).status == TopUpStatus.PENDING  # rolled back
        before = await books(app, uid, order.trade_no)
        assert (before.quota, before.topups, before.events, before.customer) == (0, [], 0, "")
        assert await live_quota(payer) == 0
        assert (await model_call(http, key)).status_code == 429

        for _ in range(2):  # the provider's redeliveries
            assert (await deliver(http, paid, app.clock.now_s())).status_code == 200
        assert (await model_call(http, key)).status_code == 200
        assert await live_quota(payer) == 4 * PER_UNIT - 2
        after = await books(app, uid, order.trade_no)
        assert (after.quota, after.topups, after.events, after.customer) == (
            4 * PER_UNIT - 2, [4 * PER_UNIT], 1, "cus_D1")


async def test_redis_down_after_the_commit_credits_when_it_returns(
        databases: _Databases, tmp_path: Path, stripe_fake: FakeStripe, openai_fake: FakeOpenAI) -> None:
    url = await fresh_database(databases, "mariadb")
    with own_redis(tmp_path / "redis") as redis:
        async with serve(make_config(url, tmp_path, redis.url, "twtest:payredis:")) as app:
            await configure(app.state, stripe_fake)
            uid = await add_user(app.state, "payer", quota=5)
            payer = await logged_in(app, "payer")
            key = await paid_calls(app.state, uid, openai_fake.url)
            order = await open_order(payer, app.state, 2)
            paid = session_event(order.trade_no, amount_total=2 * UNIT_AMOUNT)
            http = app.client()
            holder, watcher = Database(url, pool_size=1), Database(url, pool_size=1)
            try:
                # Hold the order's row so the delivery waits inside its transaction, after the guard's
                # Redis reads; stop Redis; then let the transaction commit into a world without Redis.
                async with holder.transaction() as lock:
                    await lock.execute(select(TopUp.id).where(TopUp.trade_no == order.trade_no)
                                       .with_for_update())
                    delivery = asyncio.ensure_future(deliver(http, paid, app.clock.now_s()))
                    await _until_waiting_on(watcher, "top_ups", delivery)
                    await asyncio.to_thread(redis.stop)
                reply = await delivery
                assert reply.status_code == 200, reply.text  # committed: acknowledged
                assert (await stored(app.state, order.trade_no)).status == TopUpStatus.SUCCESS
                async with app.state.db.transaction() as tx:
                    assert await PendingCreditRepository(tx).count() == 1
            finally:
                await holder.dispose()
                await watcher.dispose()
                await asyncio.to_thread(redis.start)
            await app.state.credits.replay()  # what every worker runs every few seconds
            assert (await model_call(http, key)).status_code == 200
            assert await live_quota(await logged_in(app, "payer")) == 5 + 2 * PER_UNIT - 2
            for _ in range(3):
                await app.state.credits.replay()
                assert (await deliver(http, paid, app.clock.now_s())).status_code == 200
            final = await books(app, uid, order.trade_no)
            assert (final.quota, final.topups, final.events) == (5 + 2 * PER_UNIT - 2, [2 * PER_UNIT], 1)
            await app.state.credits.replay()  # the credit is in SQL now: the outbox forgets it
            async with app.state.db.transaction() as tx:
                assert await PendingCreditRepository(tx).count() == 0


async def _until_waiting_on(db: Database, table: str, task: asyncio.Future[Any]) -> None:
    """Until another connection's UPDATE of `table` waits for a lock (MariaDB's process list)."""
    for _ in range(200):
        assert not task.done(), task.result().text
        async with db.engine.connect() as conn:
            waiting = await conn.scalar(text("SELECT COUNT(*) FROM information_schema.processlist"
                                             " WHERE info LIKE :q"), {"q": f"UPDATE {table}%"})
        if waiting:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no UPDATE of {table} started waiting")


# ---- kill -9 of a real process ----------------------------------------------------------------------------

async def _seed_order(db_url: str, user_id: int, trade_no: str, units: int) -> None:
    db = Database(db_url, pool_size=1)
    try:
        async with db.transaction() as tx:
            await TopUpRepository(tx).add(TopUp(
                user_id=user_id, amount=units, money=units * 8.0, trade_no=trade_no, payment_method="stripe",
                payment_provider="stripe", create_time=0, complete_time=0, status=TopUpStatus.PENDING))
    finally:
        await db.dispose()


async def _sql(db_url: str) -> dict[str, Any]:
    db = Database(db_url, pool_size=1)
    try:
        async with db.transaction() as tx:
            user = await tx.scalar(select(User).where(User.username == "vic"))
            assert user is not None
            return {
                "user": user,
                "orders": {o.trade_no: o.status for o in (await tx.scalars(select(TopUp))).all()},
                "pending": sorted((await tx.scalars(select(PendingCredit.ref))).all()),
                "events": len((await tx.scalars(select(PaymentEvent))).all()),
                "topups": sorted(x.quota for x in (await tx.scalars(select(Log).where(
                    Log.user_id == user.id, Log.type == LogType.TOPUP))).all()),
            }
    finally:
        await db.dispose()


def _deliver(url: str, payload: bytes) -> httpx.Response:
    return httpx.post(f"{url}/api/stripe/webhook", content=payload, timeout=60, headers={
        "Content-Type": "application/json", "Stripe-Signature": signed(WEBHOOK_SECRET, payload)})


def test_kill_9_between_the_commit_and_the_live_balance_loses_no_credit(tmp_path: Path) -> None:
    first, second = f"ref_{secrets.token_hex(16)}", f"ref_{secrets.token_hex(16)}"
    with mariadb_redis_env(tmp_path, "paycrash", QUOTA_SYNC_INTERVAL="0.2") as (env, db_url, prefix):
        with process(tmp_path, env) as url:
            setup_root(url, "mysql")
            root = client(url, "root", ROOT_PASSWORD)
            vic = root.post("/api/user/", json={"username": "vic", "password": PASSWORD}).json()["data"]["id"]
            for key, value in (("StripeApiSecret", API_KEY), ("StripeWebhookSecret", WEBHOOK_SECRET),
                               ("StripePriceId", PRICE)):
                assert root.put("/api/option/", json={"key": key, "value": value}).status_code == 200
            run_blocking(_seed_order(db_url, vic, first, 3))
            run_blocking(_seed_order(db_url, vic, second, 2))

        paid = session_event(first, amount_total=3 * UNIT_AMOUNT)
        killed_by(tmp_path, env, lambda url: _deliver(url, paid))
        found = run_blocking(_sql(db_url))
        assert found["orders"][first] == TopUpStatus.SUCCESS and found["events"] == 1
        assert found["pending"] == [f"topup:{first}"] and found["user"].quota == 0
        never_seen(prefix, f"topup:{first}")

        expected = 3 * PER_UNIT_DEFAULT
        with process(tmp_path, env | {"WORKERS": "2"}) as url:
            deadline = time.monotonic() + START_DEADLINE
            while run_blocking(_sql(db_url))["pending"] and time.monotonic() < deadline:
                time.sleep(0.2)
            vic_http = client(url, "vic")
            assert vic_http.get("/api/user/self").json()["data"]["quota"] == expected
            assert _deliver(url, paid).status_code == 200  # the provider redelivers what died: no change

            other = session_event(second, amount_total=2 * UNIT_AMOUNT)

            async def ten_at_once() -> list[int]:
                async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                    now = int(time.time())
                    replies = await asyncio.gather(*(deliver(http, other, now) for _ in range(10)))
                return [r.status_code for r in replies]

            assert run_blocking(ten_at_once()) == [200] * 10
            expected += 2 * PER_UNIT_DEFAULT
            assert vic_http.get("/api/user/self").json()["data"]["quota"] == expected
        found = run_blocking(_sql(db_url))  # the clean stop drained the sync
        assert (found["user"].quota, found["topups"], found["events"]) == (
            expected, [2 * PER_UNIT_DEFAULT, 3 * PER_UNIT_DEFAULT], 2)
        assert found["orders"] == {first: TopUpStatus.SUCCESS, second: TopUpStatus.SUCCESS}
        with process(tmp_path, env) as url:  # yet another start replays nothing twice
            assert client(url, "vic").get("/api/user/self").json()["data"]["quota"] == expected
        assert run_blocking(_sql(db_url))["pending"] == []

