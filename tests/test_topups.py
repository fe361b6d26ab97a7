"""Top-up records follow docs/api/payments.md#top-up-records on every stack (SQLite, MariaDB + Redis,
PostgreSQL + Redis), over HTTP against the real app.

Proved here:
- the admin list covers every user's orders, the self list only the caller's, both newest first, paged
  within bounds, each order naming its owner by `username`, and `keyword` is a literal part of the trade
  number (`%`, `_` match themselves);
- completing an order: pending or review → success with `complete_time`, the order's quota
  (units × QuotaPerUnit) on the owner's live balance at once and in SQL after the sync, with exactly one
  topup log naming the admin; a second completion answers 200 and adds nothing; 400 empty, 404 unknown,
  409 failed or expired (and nothing changes); ten concurrent completions credit it once;
- an order whose credit the owner's balance cannot take (it would pass 2^53 − 1) is a 409 and stays
  pending, with nothing recorded; once the balance has room it completes and credits once.
"""

from __future__ import annotations

import asyncio
import json

from sqlalchemy import select

from core.enums import LogType, TopUpStatus
from models.credits import PendingCredit
from models.logs import Log
from models.topups import TopUp, TopUpRepository
from models.users import UserRepository
from quota.types import BALANCE_MAX
from server.context import State
from tests.harness import Api, Running, add_user, data_of, fails, logged_in

VIEW_FIELDS = {"id", "user_id", "username", "amount", "money", "trade_no", "payment_method",
               "payment_provider", "create_time", "complete_time", "status"}


async def order(state: State, user_id: int, trade_no: str, *, amount: int = 10,
                status: TopUpStatus = TopUpStatus.PENDING) -> int:
    """Seed an order the way the payment routes will store it."""
    async with state.db.transaction() as tx:
        return await TopUpRepository(tx).add(TopUp(
            user_id=user_id, amount=amount, money=round(amount * 8.0, 2), trade_no=trade_no,
            payment_method="card", payment_provider="stripe", create_time=state.clock.now_s(),
            complete_time=0, status=status))


async def stored(state: State, trade_no: str) -> TopUp:
    async with state.db.transaction() as tx:
        found = await TopUpRepository(tx).by_trade_no(trade_no)
    assert found is not None
    return found


async def books(app: Running, user_id: int) -> tuple[int, list[Log]]:
    await app.state.quota_sync.drain()
    async with app.state.db.transaction() as tx:
        user = await UserRepository(tx).get(user_id)
        logs = (await tx.scalars(select(Log).where(Log.user_id == user_id, Log.type == LogType.TOPUP))).all()
    assert user is not None
    return user.quota, list(logs)


async def admin_api(app: Running) -> tuple[int, Api]:
    root = await add_user(app.state, "root", role=100)
    return root, await logged_in(app, "root")


async def test_lists_page_filter_and_keep_users_apart(app: Running) -> None:
    _, admin = await admin_api(app)
    alice = await add_user(app.state, "alice")
    bob = await add_user(app.state, "bob")
    for n in range(12):
        await order(app.state, alice, f"ref_alice_{n:02d}")
    await order(app.state, bob, "ref_bob%x")
    await order(app.state, bob, "ref_bobAx")
    everyone = data_of(await admin.get("/api/user/topup", params={"page_size": 100}))
    assert everyone["total"] == 14 and all(set(v) == VIEW_FIELDS for v in everyone["items"])
    assert [v["trade_no"] for v in everyone["items"]][:3] == ["ref_bobAx", "ref_bob%x", "ref_alice_11"]
    first = everyone["items"][0]
    assert (first["user_id"], first["username"], first["amount"], first["money"], first["status"],
            first["complete_time"], first["payment_provider"]) == (
        bob, "bob", 10, 80.0, "pending", 0, "stripe")
    assert {(v["user_id"], v["username"]) for v in everyone["items"]} == {(alice, "alice"), (bob, "bob")}
    page = data_of(await admin.get("/api/user/topup", params={"p": 2, "page_size": 5}))
    beyond = data_of(await admin.get("/api/user/topup", params={"p": 4, "page_size": 5}))
    assert (page["page"], page["page_size"], len(page["items"]), beyond["items"]) == (2, 5, 5, [])
    clamped = data_of(await admin.get("/api/user/topup", params={"page_size": 500, "p": "-1"}))
    assert (clamped["page"], clamped["page_size"], len(clamped["items"])) == (1, 100, 14)

    async def matching(api: Api, path: str, keyword: str) -> list[str]:
        found = data_of(await api.get(path, params={"keyword": keyword, "page_size": 100}))
        return sorted(v["trade_no"] for v in found["items"])

    assert await matching(admin, "/api/user/topup", "bob%") == ["ref_bob%x"]  # % is literal
    assert await matching(admin, "/api/user/topup", "_bob") == ["ref_bob%x", "ref_bobAx"]
    assert await matching(admin, "/api/user/topup", "b_b") == []  # _ is literal
    assert await matching(admin, "/api/user/topup", "BOBA") == ["ref_bobAx"]  # case is ignored
    assert len(await matching(admin, "/api/user/topup", "alice_1")) == 2

    alice_api = await logged_in(app, "alice")
    own = data_of(await alice_api.get("/api/user/topup/self", params={"page_size": 5}))
    assert own["total"] == 12 and {(v["user_id"], v["username"]) for v in own["items"]} == {(alice, "alice")}
    assert await matching(alice_api, "/api/user/topup/self", "bob") == []
    assert await matching(alice_api, "/api/user/topup/self", "_03") == ["ref_alice_03"]


async def test_completing_credits_the_order_once(app: Running) -> None:
    root, admin = await admin_api(app)
    await app.state.options.put("QuotaPerUnit", "1000")
    uid = await add_user(app.state, "payer", quota=5)
    payer = await logged_in(app, "payer")
    await order(app.state, uid, "ref_paid", amount=7)
    await order(app.state, uid, "ref_held", amount=2, status=TopUpStatus.REVIEW)
    app.clock.shift(30)
    before = app.clock.now_s()
    assert data_of(await admin.post("/api/user/topup/complete", json={"trade_no": "ref_paid"})) is None
    done = await stored(app.state, "ref_paid")
    assert done.status == TopUpStatus.SUCCESS and before <= done.complete_time <= app.clock.now_s()
    assert data_of(await payer.get("/api/user/self"))["quota"] == 5 + 7000  # live at once
    app.clock.shift(30)
    assert data_of(await admin.post("/api/user/topup/complete", json={"trade_no": "ref_paid"})) is None
    assert (await stored(app.state, "ref_paid")).complete_time == done.complete_time  # untouched
    data_of(await admin.post("/api/user/topup/complete", json={"trade_no": "ref_held"}))
    quota, logs = await books(app, uid)
    assert quota == 5 + 7000 + 2000
    assert sorted((x.quota, x.username) for x in logs) == [(2000, "payer"), (7000, "payer")]
    assert all("admin root" in x.content for x in logs)
    assert {json.loads(x.other)["admin_info"]["admin_id"] for x in logs} == {root}
    mine = data_of(await payer.get("/api/log/self", params={"type": 1}))["items"]
    assert all("admin_info" not in x["other"] for x in mine)  # the user's view hides the admin


async def test_completion_refusals_change_nothing(app: Running) -> None:
    _, admin = await admin_api(app)
    uid = await add_user(app.state, "unlucky", quota=1)
    await order(app.state, uid, "ref_failed", status=TopUpStatus.FAILED)
    await order(app.state, uid, "ref_expired", status=TopUpStatus.EXPIRED)
    for trade_no, status in (("ref_failed", 409), ("ref_expired", 409), ("ref_nope", 404),
                             ("x" * 500, 404), ("", 400)):
        fails(await admin.post("/api/user/topup/complete", json={"trade_no": trade_no}), status)
    for body in ({}, {"trade_no": 5}, {"trade_no": None}):
        fails(await admin.post("/api/user/topup/complete", json=body), 400, "trade_no:", prefix=True)
    assert (await stored(app.state, "ref_failed")).status == TopUpStatus.FAILED
    assert (await stored(app.state, "ref_expired")).complete_time == 0
    assert await books(app, uid) == (1, [])


async def test_concurrent_completions_credit_once(app: Running) -> None:
    _, admin = await admin_api(app)
    uid = await add_user(app.state, "rich")
    await order(app.state, uid, "ref_race", amount=3)
    other = await logged_in(app, "root")
    replies = await asyncio.gather(*((admin, other)[n % 2].post("/api/user/topup/complete",
                                                                 json={"trade_no": "ref_race"})
                                     for n in range(10)))
    assert [r.status_code for r in replies] == [200] * 10, [r.text for r in replies]
    quota, logs = await books(app, uid)
    assert (quota, len(logs)) == (3 * 500_000, 1)


async def test_an_order_the_balance_cannot_take_is_refused_before_it_moves(app: Running) -> None:
    _, admin = await admin_api(app)
    await app.state.options.put("QuotaPerUnit", "1000")
    near_max = BALANCE_MAX - 1000
    uid = await add_user(app.state, "full", quota=near_max)
    await order(app.state, uid, "ref_full", amount=2)
    fails(await admin.post("/api/user/topup/complete", json={"trade_no": "ref_full"}), 409,
          "the balance would exceed the largest supported amount")
    held = await stored(app.state, "ref_full")
    assert (held.status, held.complete_time) == (TopUpStatus.PENDING, 0)
    async with app.state.db.transaction() as tx:
        assert (await tx.scalars(select(PendingCredit))).all() == []
    assert await books(app, uid) == (near_max, [])
    data_of(await admin.post("/api/user/manage", json={"id": uid, "action": "add_quota", "mode": "subtract",
                                                       "value": 5000}))
    data_of(await admin.post("/api/user/topup/complete", json={"trade_no": "ref_full"}))
    assert (await stored(app.state, "ref_full")).status == TopUpStatus.SUCCESS
    quota, logs = await books(app, uid)
    assert (quota, [x.quota for x in logs]) == (near_max - 5000 + 2000, [2000])
