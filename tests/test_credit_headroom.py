"""The room under the balance cap (2^53 − 1) is decided atomically with the fact that spends it
(server/credits.py `CreditOutbox.record`, docs/MONEY.md#credits-decided-in-sql), across nodes.

Proved here, on two nodes sharing MariaDB + Redis and PostgreSQL + Redis (and one embedded worker on
SQLite), with requests that really run at the same time:
- two or three redemptions at once whose credits together would pass the cap: in every round exactly one
  answers 200 and the others 409, each refused code stays unused (status, user, time), nothing is
  settled as failed, and the balance is exactly the one credit — live on each node and in SQL after the
  sync;
- an admin's `add_quota` that would leave no room for a credit already decided (recorded, not yet
  delivered) is refused with 409, and the decided credit then applies;
- a credit decided while a model call holds part of the balance counts the hold: the balance the hold
  returns to stays within the cap, so the credit is refused before the code is spent;
- every path that spends a fact decides in its transaction, counting the credits already decided: with
  a credit recorded and not yet applied (the live balance alone has room), a redemption is 409 with the
  code unused, an admin's completion is 409 with the order pending, a transfer is 409 with the rewards
  in place, and the payment webhook records the payment and holds the order for review; once the
  decided credit is applied and synced, the room is exact again and each of them goes through.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import select

from core.enums import CreditStatus, LogType, RedemptionStatus, TopUpStatus
from models.credits import PendingCredit
from models.redemptions import Redemption
from models.users import UserRepository
from quota.types import BALANCE_MAX
from server.credits import Credit
from tests.conftest import _Databases, _stack
from tests.fakes.payment import UNIT_AMOUNT, FakeStripe, session_event
from tests.harness import Api, Running, add_user, data_of, fails, logged_in, make_config, serve
from tests.payments import API_KEY, PER_UNIT, PRICE, configure, deliver, open_order, stored

ROUNDS = 8
CODE = 600  # each code's quota: the balance has room for one, not for two


@pytest.fixture(params=["mariadb+redis", "postgres+redis", "sqlite"])
async def pair(request: pytest.FixtureRequest, databases: _Databases, tmp_path: Path
               ) -> AsyncIterator[tuple[Running, Running]]:
    """Two nodes on one SQL database and one Redis; embedded mode is one process, so one worker twice."""
    async for s in _stack(request.param, databases):
        config = make_config(s.database_url, tmp_path, s.redis_url, s.prefix)
        if s.redis_url is None:
            async with serve(config) as one:
                yield one, one
            return
        async with serve(config) as one, serve(config) as two:
            yield one, two


async def code_rows(app: Running, keys: list[str]) -> list[Redemption]:
    async with app.state.db.transaction() as tx:
        rows = (await tx.scalars(select(Redemption).where(Redemption.key.in_(keys)))).all()
    return sorted(rows, key=lambda r: keys.index(r.key))


async def credit_rows(app: Running) -> list[PendingCredit]:
    async with app.state.db.transaction() as tx:
        return list((await tx.scalars(select(PendingCredit))).all())


async def sql_quota(app: Running, user_id: int) -> int:
    await app.state.quota_sync.drain()
    async with app.state.db.transaction() as tx:
        user = await UserRepository(tx).get(user_id)
    assert user is not None
    return user.quota


async def test_concurrent_redeems_near_the_cap_credit_exactly_one(pair: tuple[Running, Running]) -> None:
    one, two = pair
    await add_user(one.state, "root", role=100)
    root = await logged_in(one, "root")
    start = BALANCE_MAX - CODE - CODE // 2  # room for one code, not for two
    for n in range(ROUNDS):
        racers = 2 + n % 2  # two or three redemptions at once, alternately
        uid = await add_user(one.state, f"near{n}", quota=start)
        callers = [await logged_in((one, two)[i % 2], f"near{n}") for i in range(racers)]
        keys = data_of(await root.post("/api/redemption/", json={"name": f"r{n}", "quota": CODE,
                                                                  "count": racers}))
        replies = await asyncio.gather(*(api.post("/api/user/topup", json={"key": key})
                                         for api, key in zip(callers, keys, strict=True)))
        statuses = sorted(r.status_code for r in replies)
        assert statuses == [200] + [409] * (racers - 1), f"round {n}: {[r.text for r in replies]}"
        for reply in replies:
            if reply.status_code == 409:
                fails(reply, 409, "largest supported amount")
        rows = await code_rows(one, keys)
        assert [(r.status, r.used_user_id) for r in rows] == [
            (RedemptionStatus.USED, uid) if reply.status_code == 200 else (RedemptionStatus.ENABLED, 0)
            for reply in replies], f"round {n}: a refused code was spent"
        assert all(r.redeemed_time == 0 for r in rows if r.status == RedemptionStatus.ENABLED)
        for api in callers:
            assert data_of(await api.get("/api/user/self"))["quota"] == start + CODE
        assert await sql_quota(one, uid) == start + CODE
        assert [r.ref for r in await credit_rows(one) if r.status == CreditStatus.FAILED] == []


async def test_an_admin_add_leaves_the_room_of_a_decided_credit(pair: tuple[Running, Running]) -> None:
    one, two = pair
    for node in {id(one): one, id(two): two}.values():  # no background replay: this test delivers by hand
        await node.state.tasks.drain()
    await add_user(one.state, "root", role=100)
    root = await logged_in(two, "root")
    start = BALANCE_MAX - 1000
    uid = await add_user(one.state, "owed", quota=start)
    owed = Credit(ref="test:owed", user_id=uid, amount=700, log={
        "type": LogType.TOPUP, "username": "owed", "quota": 700, "content": "decided, not delivered"})
    async with one.state.db.transaction() as tx:  # the process that decided it died before delivering
        await one.state.credits.record(tx, owed)
    reply = await root.post("/api/user/manage", json={"id": uid, "action": "add_quota", "mode": "add",
                                                      "value": 500})
    fails(reply, 409, "largest supported amount")
    assert await one.state.quota.balance("user", uid) == start
    assert await one.state.credits.deliver(owed) is True
    await one.state.quota_sync.drain()  # until the sync has it, a credit applied still counts as owed
    await one.state.credits.replay()
    assert data_of(await root.post("/api/user/manage", json={"id": uid, "action": "add_quota", "mode": "add",
                                                             "value": 300}))["quota"] == start + 1000
    assert await sql_quota(one, uid) == BALANCE_MAX

    other = await add_user(one.state, "owed-more", quota=10)
    big = Credit(ref="test:big", user_id=other, amount=BALANCE_MAX - 500, log={
        "type": LogType.TOPUP, "username": "owed-more", "quota": BALANCE_MAX - 500, "content": "decided"})
    async with one.state.db.transaction() as tx:
        await one.state.credits.record(tx, big)
    reply = await root.post("/api/user/manage", json={"id": other, "action": "add_quota", "mode": "override",
                                                      "value": 1000})  # 1000 + the credit owed > the cap
    fails(reply, 409, "largest supported amount")
    assert data_of(await root.post("/api/user/manage", json={
        "id": other, "action": "add_quota", "mode": "override", "value": 400}))["quota"] == 400
    assert await one.state.credits.deliver(big) is True
    assert await sql_quota(one, other) == BALANCE_MAX - 100


async def test_a_credit_counts_the_balance_a_hold_returns_to(pair: tuple[Running, Running]) -> None:
    one, _ = pair
    await add_user(one.state, "root", role=100)
    root = await logged_in(one, "root")
    start = BALANCE_MAX - 1000
    uid = await add_user(one.state, "calling", quota=start)
    caller: Api = await logged_in(one, "calling")
    hold = await one.state.quota.reserve(uid, 800)  # a model call in flight
    [key] = data_of(await root.post("/api/redemption/", json={"name": "h", "quota": 1500, "count": 1}))
    fails(await caller.post("/api/user/topup", json={"key": key}), 409, "largest supported amount")
    [row] = await code_rows(one, [key])
    assert row.status == RedemptionStatus.ENABLED
    await one.state.quota.release(hold)  # the call failed: its hold comes back
    assert await one.state.quota.balance("user", uid) == start
    fails(await caller.post("/api/user/topup", json={"key": key}), 409, "largest supported amount")
    assert await sql_quota(one, uid) == start


@pytest.fixture
async def stripe_fake() -> AsyncIterator[FakeStripe]:
    async with FakeStripe(api_key=API_KEY, price_id=PRICE) as fake:
        yield fake


async def test_every_fact_is_decided_with_the_credits_already_owed(app: Running, stripe_fake: FakeStripe
                                                                    ) -> None:
    await app.state.tasks.drain()  # no background replay: the owed credit stays unapplied until delivered
    await configure(app.state, stripe_fake)  # QuotaPerUnit = PER_UNIT
    await add_user(app.state, "root", role=100)
    root = await logged_in(app, "root")
    start = BALANCE_MAX - 10 * PER_UNIT
    uid = await add_user(app.state, "owing", quota=start)
    async with app.state.db.transaction() as tx:
        await UserRepository(tx).update_fields(uid, aff_quota=2 * PER_UNIT, aff_history_quota=2 * PER_UNIT)
    owing = await logged_in(app, "owing")
    owed = Credit(ref="test:owed", user_id=uid, amount=9 * PER_UNIT, log={
        "type": LogType.TOPUP, "username": "owing", "quota": 9 * PER_UNIT, "content": "decided"})
    async with app.state.db.transaction() as tx:
        await app.state.credits.record(tx, owed)  # room left: one unit; the live balance alone shows ten

    [key] = data_of(await root.post("/api/redemption/", json={"name": "c", "quota": 2 * PER_UNIT,
                                                               "count": 1}))
    fails(await owing.post("/api/user/topup", json={"key": key}), 409, "redemption code not used")
    [code] = await code_rows(app, [key])
    assert (code.status, code.used_user_id) == (RedemptionStatus.ENABLED, 0)

    by_admin = await open_order(owing, app.state, 2)
    fails(await root.post("/api/user/topup/complete", json={"trade_no": by_admin.trade_no}), 409,
          "the top-up order is not completed")
    assert (await stored(app.state, by_admin.trade_no)).status == TopUpStatus.PENDING

    fails(await owing.post("/api/user/aff_transfer", json={"quota": 2 * PER_UNIT}), 409,
          "invitation rewards not moved")
    assert data_of(await owing.get("/api/user/self"))["aff_quota"] == 2 * PER_UNIT

    paid = await open_order(owing, app.state, 2)
    data_of(await deliver(app.client(), session_event(paid.trade_no, amount_total=2 * UNIT_AMOUNT),
                          app.clock.now_s()))  # the payment is recorded, not credited
    assert (await stored(app.state, paid.trade_no)).status == TopUpStatus.REVIEW
    assert [r.ref for r in await credit_rows(app)] == ["test:owed"]  # nothing else was decided
    assert data_of(await owing.get("/api/user/self"))["quota"] == start

    async def settled() -> None:
        """The sync has the credits applied so far: no longer owed, and the live balance holds them (until
        then an applied credit is counted twice, on the safe side)."""
        await app.state.quota_sync.drain()
        await app.state.credits.replay()
        assert await credit_rows(app) == []

    assert await app.state.credits.deliver(owed) is True
    await settled()
    data_of(await root.post("/api/user/manage", json={"id": uid, "action": "add_quota", "mode": "subtract",
                                                      "value": 7 * PER_UNIT}))  # room for all four, exactly
    assert data_of(await owing.post("/api/user/topup", json={"key": key})) == 2 * PER_UNIT
    await settled()
    data_of(await root.post("/api/user/topup/complete", json={"trade_no": by_admin.trade_no}))
    await settled()
    data_of(await owing.post("/api/user/aff_transfer", json={"quota": 2 * PER_UNIT}))
    await settled()
    data_of(await root.post("/api/user/topup/complete", json={"trade_no": paid.trade_no}))
    assert data_of(await owing.get("/api/user/self"))["quota"] == BALANCE_MAX
    assert await sql_quota(app, uid) == BALANCE_MAX
