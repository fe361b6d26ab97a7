"""Invitations follow docs/api/accounts.md#invitations on every stack (SQLite, MariaDB + Redis,
PostgreSQL + Redis), over HTTP against the real app.

Proved here:
- `GET /api/user/aff` answers the caller's code: one made at creation stays; an account without one
  gets 8 random letters and digits, once (concurrent first calls agree), never changed afterwards;
- registering with a code pays the rewards in the registration's transaction: the new user starts with
  QuotaForNewUser + QuotaForInvitee, logged as a system log; the inviter's `aff_count` grows and
  QuotaForInviter goes to `aff_quota` and `aff_history_quota`, never to the balance;
- `POST /api/user/aff_transfer` moves rewards to the live balance at once and to SQL after the sync,
  with one log each; 400 for a missing or non-integer amount, one below QuotaPerUnit, or more than
  `aff_quota` holds — and then nothing moves; concurrent transfers never move more than was held; a
  transfer the balance cannot take (it would pass 2^53 − 1) is a 409 that moves nothing and records no
  credit, and one that fits exactly moves.
"""

from __future__ import annotations

import asyncio
import re

from sqlalchemy import select

from core.enums import LogType
from models.credits import PendingCredit
from models.logs import Log
from models.tables import User
from models.users import UserRepository
from quota.types import BALANCE_MAX
from tests.harness import Api, Running, add_user, data_of, fails, logged_in

PASSWORD = "password123"


async def row(app: Running, user_id: int) -> User:
    await app.state.quota_sync.drain()
    async with app.state.db.transaction() as tx:
        user = await UserRepository(tx).get(user_id, include_deleted=True)
    assert user is not None
    return user


async def logs_of(app: Running, user_id: int) -> list[Log]:
    await app.state.quota_sync.drain()
    async with app.state.db.transaction() as tx:
        return list((await tx.scalars(select(Log).where(Log.user_id == user_id).order_by(Log.id))).all())


async def with_rewards(app: Running, username: str, aff_quota: int, quota: int = 0) -> tuple[int, Api]:
    uid = await add_user(app.state, username, quota=quota)
    async with app.state.db.transaction() as tx:
        await UserRepository(tx).update_fields(uid, aff_quota=aff_quota, aff_history_quota=aff_quota)
    return uid, await logged_in(app, username)


async def test_the_code_is_made_once_and_kept(app: Running) -> None:
    uid = await add_user(app.state, "alice")
    alice = await logged_in(app, "alice")
    existing = (await row(app, uid)).aff_code
    assert data_of(await alice.get("/api/user/aff")) == existing
    async with app.state.db.transaction() as tx:
        await UserRepository(tx).update_fields(uid, aff_code=None)
    codes = await asyncio.gather(*(alice.get("/api/user/aff") for _ in range(8)))
    made = {data_of(c) for c in codes}
    assert len(made) == 1
    [code] = made
    assert re.fullmatch(r"[A-Za-z0-9]{8}", code) and code != existing
    assert (await row(app, uid)).aff_code == code
    assert data_of(await alice.get("/api/user/aff")) == code
    assert data_of(await alice.get("/api/user/self"))["aff_code"] == code


async def test_registration_pays_the_rewards_in_the_right_places(app: Running) -> None:
    for key, value in (("QuotaForNewUser", 100), ("QuotaForInvitee", 40), ("QuotaForInviter", 25)):
        await app.state.options.put(key, str(value))
    inviter, inviter_api = await with_rewards(app, "inviter", 0, quota=9)
    code = data_of(await inviter_api.get("/api/user/aff"))
    anonymous = app.client()
    data_of(await anonymous.post("/api/user/register", json={"username": "newbie", "password": PASSWORD,
                                                              "aff_code": code}))
    data_of(await anonymous.post("/api/user/register", json={"username": "loner", "password": PASSWORD,
                                                              "aff_code": "nope1234"}))
    newbie = await logged_in(app, "newbie")
    view = data_of(await newbie.get("/api/user/self"))
    assert (view["quota"], view["inviter_id"]) == (140, inviter)
    logs = await logs_of(app, view["id"])
    assert [(x.type, x.quota) for x in logs] == [(LogType.SYSTEM, 40)]
    loner = await logged_in(app, "loner")
    loner_view = data_of(await loner.get("/api/user/self"))
    assert (loner_view["quota"], loner_view["inviter_id"]) == (100, 0)
    assert await logs_of(app, loner_view["id"]) == []
    held = await row(app, inviter)
    assert (held.quota, held.aff_count, held.aff_quota, held.aff_history_quota) == (9, 1, 25, 25)
    assert data_of(await inviter_api.get("/api/user/self"))["quota"] == 9


async def test_a_transfer_moves_rewards_to_the_live_balance(app: Running) -> None:
    await app.state.options.put("QuotaPerUnit", "100")
    uid, api = await with_rewards(app, "saver", 1000, quota=5)
    assert data_of(await api.post("/api/user/aff_transfer", json={"quota": 300})) is None
    view = data_of(await api.get("/api/user/self"))
    assert (view["quota"], view["aff_quota"], view["aff_history_quota"]) == (305, 700, 1000)  # live at once
    data_of(await api.post("/api/user/aff_transfer", json={"quota": 700}))
    stored = await row(app, uid)
    assert (stored.quota, stored.aff_quota, stored.aff_history_quota) == (1005, 0, 1000)
    logs = await logs_of(app, uid)
    assert [(x.type, x.quota) for x in logs] == [(LogType.SYSTEM, 300), (LogType.SYSTEM, 700)]
    assert len({x.ref for x in logs}) == 2  # each transfer is its own credit


async def test_refused_transfers_move_nothing(app: Running) -> None:
    await app.state.options.put("QuotaPerUnit", "100")
    uid, api = await with_rewards(app, "careful", 250, quota=1)
    for body, message in (
        ({}, "quota: is required"),
        ({"quota": "200"}, "quota: must be an integer"),
        ({"quota": 1.5}, "quota: must be an integer"),
        ({"quota": True}, "quota: must be an integer"),
        ({"quota": 99}, "quota: must be at least 100"),
        ({"quota": -100}, "quota: must be at least 100"),
        ({"quota": 251}, "quota: is more than your invitation rewards"),
    ):
        assert fails(await api.post("/api/user/aff_transfer", json=body), 400, "quota:",
                     prefix=True).startswith(message)
    stored = await row(app, uid)
    assert (stored.quota, stored.aff_quota) == (1, 250)
    assert await logs_of(app, uid) == []


async def test_concurrent_transfers_never_move_more_than_was_held(app: Running) -> None:
    await app.state.options.put("QuotaPerUnit", "100")
    uid, api = await with_rewards(app, "eager", 1000)
    replies = await asyncio.gather(*(api.post("/api/user/aff_transfer", json={"quota": 300})
                                     for _ in range(10)))
    statuses = sorted(r.status_code for r in replies)
    assert statuses == [200] * 3 + [400] * 7, [r.text for r in replies]
    assert data_of(await api.get("/api/user/self"))["quota"] == 900
    stored = await row(app, uid)
    assert (stored.quota, stored.aff_quota) == (900, 100)
    assert sum(x.quota for x in await logs_of(app, uid)) == 900


async def test_a_transfer_the_balance_cannot_take_moves_nothing(app: Running) -> None:
    await app.state.options.put("QuotaPerUnit", "100")
    near_max = BALANCE_MAX - 100
    uid, api = await with_rewards(app, "brim", 1000, quota=near_max)
    fails(await api.post("/api/user/aff_transfer", json={"quota": 300}), 409,
          "the balance would exceed the largest supported amount")
    stored = await row(app, uid)
    assert (stored.quota, stored.aff_quota) == (near_max, 1000)
    async with app.state.db.transaction() as tx:
        assert (await tx.scalars(select(PendingCredit))).all() == []
    assert await logs_of(app, uid) == []
    data_of(await api.post("/api/user/aff_transfer", json={"quota": 100}))  # fits exactly
    stored = await row(app, uid)
    assert (stored.quota, stored.aff_quota) == (BALANCE_MAX, 900)
