"""Redemption codes and redeeming follow docs/api/payments.md#redemption-codes on every stack (SQLite,
MariaDB + Redis, PostgreSQL + Redis), over HTTP against the real app.

Proved here:
- create: `count` keys of 32 lowercase hex, all or none; every field's 400 (name, quota > 0, count
  1–100, expired_time 0 or future);
- list / search / get: live codes newest first, paging bounds, the three keyword kinds with literal
  wildcards, 404 for missing or deleted codes;
- update: the default mode (name, quota, expiry, checked as on create; status ignored), `status_only`
  (status alone, 1 or 2), 404, and 409 for a used code; delete (soft) and delete invalid;
- redeeming: the quota is on the live balance at once and in SQL after the sync with exactly one topup
  log naming the code; the four refusals (not found or deleted, used, disabled, expired) with their
  statuses and messages; an expiry is checked on the injected clock; concurrent redeems of one code
  credit it once; a code whose credit the balance cannot take (it would pass 2^53 − 1) is refused with
  409 before it is used — the code stays unused, nothing is recorded, the balance is unchanged — and
  redeems once the balance has room.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from sqlalchemy import select

from core.enums import LogType, RedemptionStatus
from models.credits import PendingCredit
from models.logs import Log
from models.redemptions import Redemption
from models.users import UserRepository
from quota.types import BALANCE_MAX
from tests.harness import Api, Running, add_user, data_of, fails, logged_in

VIEW_FIELDS = {"id", "user_id", "key", "status", "name", "quota", "created_time", "redeemed_time",
               "expired_time", "used_user_id", "used_username", "count", "DeletedAt"}


async def admin_api(app: Running) -> Api:
    await add_user(app.state, "root", role=100)
    return await logged_in(app, "root")


async def create(admin: Api, name: str = "promo", quota: int = 500, count: int = 1, **extra: Any
                 ) -> list[str]:
    keys = data_of(await admin.post("/api/redemption/", json={"name": name, "quota": quota, "count": count,
                                                               **extra}))
    assert isinstance(keys, list) and len(keys) == count
    return keys


async def code_by_key(app: Running, key: str) -> Redemption:
    async with app.state.db.transaction() as tx:
        code = await tx.scalar(select(Redemption).where(Redemption.key == key))
    assert code is not None
    return code


async def books(app: Running, user_id: int) -> tuple[int, list[Log]]:
    """(SQL balance, topup logs) once the quota sync caught up."""
    await app.state.quota_sync.drain()
    async with app.state.db.transaction() as tx:
        user = await UserRepository(tx).get(user_id)
        logs = (await tx.scalars(select(Log).where(Log.user_id == user_id, Log.type == LogType.TOPUP))).all()
    assert user is not None
    return user.quota, list(logs)


async def live_quota(api: Api) -> int:
    return int(data_of(await api.get("/api/user/self"))["quota"])


# ---- admin routes -------------------------------------------------------------------------------------


async def test_create_makes_count_enabled_codes_in_one_go(app: Running) -> None:
    admin = await admin_api(app)
    keys = await create(admin, "batch", quota=1234, count=3, expired_time=app.clock.now_s() + 3600)
    assert len(set(keys)) == 3 and all(re.fullmatch(r"[0-9a-f]{32}", k) for k in keys)
    page = data_of(await admin.get("/api/redemption/"))
    assert page["total"] == 3 and [c["key"] for c in page["items"]] == keys[::-1]  # newest first
    for view in page["items"]:
        assert set(view) == VIEW_FIELDS
        assert (view["status"], view["name"], view["quota"], view["count"], view["used_user_id"],
                view["used_username"], view["redeemed_time"], view["DeletedAt"]) == (
                    1, "batch", 1234, 0, 0, "", 0, None)
    one = data_of(await admin.get(f"/api/redemption/{page['items'][0]['id']}"))
    assert one == page["items"][0]


async def test_create_refuses_each_bad_field_and_makes_nothing(app: Running) -> None:
    admin = await admin_api(app)
    past = app.clock.now_s() - 1
    for body, field in (
        ({"quota": 1, "count": 1}, "name"),
        ({"name": "   ", "quota": 1, "count": 1}, "name"),
        ({"name": "x" * 21, "quota": 1, "count": 1}, "name"),
        ({"name": "n", "quota": 0, "count": 1}, "quota"),
        ({"name": "n", "quota": -5, "count": 1}, "quota"),
        ({"name": "n", "quota": "5", "count": 1}, "quota"),
        ({"name": "n", "count": 1}, "quota"),
        ({"name": "n", "quota": 1, "count": 0}, "count"),
        ({"name": "n", "quota": 1, "count": 101}, "count"),
        ({"name": "n", "quota": 1}, "count"),
        ({"name": "n", "quota": 1, "count": 1, "expired_time": past}, "expired_time"),
        ({"name": "n", "quota": 1, "count": 1, "expired_time": True}, "expired_time"),
    ):
        fails(await admin.post("/api/redemption/", json=body), 400, f"{field}:", prefix=True)
    assert data_of(await admin.get("/api/redemption/"))["total"] == 0
    assert len(await create(admin, "x" * 20, quota=1, count=100)) == 100  # the bounds themselves pass


async def test_pages_and_search(app: Running) -> None:
    admin = await admin_api(app)
    keys = await create(admin, "Alpha", count=12)
    await create(admin, "beta_1")
    await create(admin, "beta%2")
    first = data_of(await admin.get("/api/redemption/", params={"p": 1, "page_size": 5}))
    last = data_of(await admin.get("/api/redemption/", params={"p": 3, "page_size": 5}))
    beyond = data_of(await admin.get("/api/redemption/", params={"p": 4, "page_size": 5}))
    assert (first["total"], len(first["items"]), len(last["items"]), beyond["items"]) == (14, 5, 4, [])
    assert first["items"][0]["id"] > first["items"][-1]["id"] > last["items"][0]["id"]
    clamped = data_of(await admin.get("/api/redemption/", params={"page_size": 1000, "p": "x"}))
    assert (clamped["page"], clamped["page_size"], len(clamped["items"])) == (1, 100, 14)
    zero = data_of(await admin.get("/api/redemption/", params={"page_size": 0, "p": -3}))
    assert (zero["page"], zero["page_size"], len(zero["items"])) == (1, 10, 10)

    async def search(keyword: str) -> list[str]:
        page = data_of(await admin.get("/api/redemption/search",
                                       params={"keyword": keyword, "page_size": 100}))
        return sorted(c["name"] for c in page["items"])

    assert await search("") == sorted(["Alpha"] * 12 + ["beta_1", "beta%2"])
    assert await search("alp") == ["Alpha"] * 12  # a prefix, ignoring case
    assert await search("lpha") == []  # not a substring
    assert await search("beta_") == ["beta_1"] and await search("beta%") == ["beta%2"]  # literal
    alpha = await code_by_key(app, keys[3])
    assert await search(str(alpha.id)) == ["Alpha"]
    assert await search(keys[5]) == ["Alpha"]
    assert await search(keys[5].upper()) == []  # a key is exact
    # digits other than ASCII ones are no id: a name prefix, not a 500 ('²') nor id 1 ('١')
    await create(admin, "²nd")
    assert await search("²") == ["²nd"]
    assert await search("١") == []


async def test_get_update_and_delete(app: Running) -> None:
    admin = await admin_api(app)
    [key] = await create(admin, "edit me", quota=10)
    code = await code_by_key(app, key)
    later = app.clock.now_s() + 86400
    edited = data_of(await admin.put("/api/redemption/", json={
        "id": code.id, "name": " renamed ", "quota": 99, "expired_time": later, "status": 2}))
    assert (edited["name"], edited["quota"], edited["expired_time"], edited["status"]) == \
        ("renamed", 99, later, 1)  # status is only changed with status_only
    kept = data_of(await admin.put("/api/redemption/", json={"id": code.id, "name": None}))
    assert kept["name"] == "renamed"
    for body, field in (({"id": code.id, "quota": 0}, "quota"), ({"id": code.id, "name": ""}, "name"),
                        ({"id": code.id, "expired_time": 5}, "expired_time"), ({"name": "n"}, "id")):
        fails(await admin.put("/api/redemption/", json=body), 400, f"{field}:", prefix=True)

    disabled = data_of(await admin.put("/api/redemption/?status_only=1", json={
        "id": code.id, "status": 2, "name": "ignored", "quota": 1}))
    assert (disabled["status"], disabled["name"], disabled["quota"]) == (2, "renamed", 99)
    for status in (3, 0, None):
        fails(await admin.put("/api/redemption/?status_only=true", json={"id": code.id, "status": status}),
              400, "status:", prefix=True)
    assert data_of(await admin.put("/api/redemption/?status_only=1", json={"id": code.id, "status": 1}))[
        "status"] == 1
    fails(await admin.put("/api/redemption/", json={"id": 999999, "name": "n"}), 404)
    fails(await admin.get("/api/redemption/999999"), 404)

    assert data_of(await admin.delete(f"/api/redemption/{code.id}")) is None
    fails(await admin.get(f"/api/redemption/{code.id}"), 404)
    fails(await admin.delete(f"/api/redemption/{code.id}"), 404)
    fails(await admin.put("/api/redemption/", json={"id": code.id, "name": "n"}), 404)
    assert data_of(await admin.get("/api/redemption/"))["total"] == 0
    fails(await admin.get("/api/redemption/abc"), 400, "id:", prefix=True)


async def test_a_used_code_cannot_be_edited_and_invalid_codes_are_deleted(app: Running) -> None:
    admin = await admin_api(app)
    await add_user(app.state, "alice")
    alice = await logged_in(app, "alice")
    used, disabled, expiring, fine = await create(admin, count=4, expired_time=0)
    data_of(await alice.post("/api/user/topup", json={"key": used}))
    used_id = (await code_by_key(app, used)).id
    fails(await admin.put("/api/redemption/", json={"id": used_id, "name": "n"}), 409, "already used")
    fails(await admin.put("/api/redemption/?status_only=1", json={"id": used_id, "status": 1}), 409)
    data_of(await admin.put("/api/redemption/?status_only=1",
                            json={"id": (await code_by_key(app, disabled)).id, "status": 2}))
    data_of(await admin.put("/api/redemption/", json={"id": (await code_by_key(app, expiring)).id,
                                                       "expired_time": app.clock.now_s() + 60}))
    assert data_of(await admin.delete("/api/redemption/invalid")) == 2  # used and disabled
    app.clock.shift(61)
    assert data_of(await admin.delete("/api/redemption/invalid")) == 1  # now expired
    assert [c["key"] for c in data_of(await admin.get("/api/redemption/"))["items"]] == [fine]
    assert data_of(await admin.delete("/api/redemption/invalid")) == 0


# ---- redeeming ----------------------------------------------------------------------------------------


async def test_redeeming_adds_the_quota_once_live_and_in_sql(app: Running) -> None:
    admin = await admin_api(app)
    uid = await add_user(app.state, "alice", quota=100)
    alice = await logged_in(app, "alice")
    [key] = await create(admin, "welcome", quota=5000)
    before = app.clock.now_s()
    assert data_of(await alice.post("/api/user/topup", json={"key": key})) == 5000
    assert await live_quota(alice) == 5100
    code = data_of(await admin.get(f"/api/redemption/{(await code_by_key(app, key)).id}"))
    assert (code["status"], code["used_user_id"], code["used_username"]) == (3, uid, "alice")
    listed = data_of(await admin.get("/api/redemption/"))["items"]
    assert [(c["used_user_id"], c["used_username"]) for c in listed if c["key"] == key] == [(uid, "alice")]
    assert before <= code["redeemed_time"] <= app.clock.now_s()  # a second may begin during the call
    fails(await alice.post("/api/user/topup", json={"key": key}), 409, "redemption code already used")
    quota, logs = await books(app, uid)
    assert quota == 5100
    assert [(x.type, x.quota, x.username) for x in logs] == [(LogType.TOPUP, 5000, "alice")]
    assert f"#{code['id']}" in logs[0].content
    await app.state.credits.replay()
    async with app.state.db.transaction() as tx:
        assert (await tx.scalars(select(PendingCredit))).all() == []  # in SQL, nothing left to replay
    mine = data_of(await alice.get("/api/log/self", params={"type": 1}))
    assert [(x["quota"], x["type"]) for x in mine["items"]] == [(5000, 1)]


async def test_each_refusal_has_its_status_and_message(app: Running) -> None:
    admin = await admin_api(app)
    uid = await add_user(app.state, "bob", quota=7)
    bob = await logged_in(app, "bob")
    used, disabled, expired, deleted = await create(admin, count=4, expired_time=0)
    data_of(await bob.post("/api/user/topup", json={"key": used}))
    data_of(await admin.put("/api/redemption/?status_only=1",
                            json={"id": (await code_by_key(app, disabled)).id, "status": 2}))
    data_of(await admin.put("/api/redemption/", json={"id": (await code_by_key(app, expired)).id,
                                                       "expired_time": app.clock.now_s() + 10}))
    data_of(await admin.delete(f"/api/redemption/{(await code_by_key(app, deleted)).id}"))
    app.clock.shift(11)
    for key, status, message in (
        ("0" * 32, 400, "redemption code not found"),
        (deleted, 400, "redemption code not found"),
        ("x" * 5000, 400, "redemption code not found"),
        (used, 409, "redemption code already used"),
        (disabled, 400, "redemption code is disabled"),
        (expired, 400, "redemption code has expired"),
        (f" {disabled[1:]}", 400, "redemption code not found"),  # a key is never trimmed
        (disabled.upper(), 400, "redemption code not found"),  # nor folded (MariaDB compares bytes too)
    ):
        assert fails(await bob.post("/api/user/topup", json={"key": key}), status) == message
    for body in ({}, {"key": ""}, {"key": 5}, {"key": None}):
        fails(await bob.post("/api/user/topup", json=body), 400, "key:", prefix=True)
    quota, logs = await books(app, uid)
    assert (quota, len(logs)) == (7 + 500, 1)


async def test_an_expiry_of_now_still_redeems(app: Running) -> None:
    admin = await admin_api(app)
    await add_user(app.state, "carol")
    carol = await logged_in(app, "carol")
    app.clock.shift(1.001 - app.clock.now() % 1)  # just after a second begins: no tick before the redeem
    [key] = await create(admin, quota=3, expired_time=app.clock.now_s() + 5)
    app.clock.shift(5)  # expired_time == now: still valid
    assert data_of(await carol.post("/api/user/topup", json={"key": key})) == 3


async def test_concurrent_redeems_of_one_code_credit_it_once(app: Running) -> None:
    admin = await admin_api(app)
    users = [await add_user(app.state, f"racer{n}") for n in range(4)]
    apis = [await logged_in(app, f"racer{n}") for n in range(4)]
    [key] = await create(admin, quota=777)
    replies = await asyncio.gather(*(apis[n % 4].post("/api/user/topup", json={"key": key})
                                     for n in range(20)))
    statuses = sorted(r.status_code for r in replies)
    assert statuses == [200] + [409] * 19, [r.text for r in replies]
    winner = (await code_by_key(app, key)).used_user_id
    totals = {uid: (await books(app, uid)) for uid in users}
    assert {uid: (q, len(logs)) for uid, (q, logs) in totals.items()} == {
        uid: (777, 1) if uid == winner else (0, 0) for uid in users}
    assert [await live_quota(api) for api in apis] == [777 if uid == winner else 0 for uid in users]
    assert (await code_by_key(app, key)).status == RedemptionStatus.USED


async def test_a_credit_the_balance_cannot_take_is_refused_before_the_code_is_used(app: Running) -> None:
    admin = await admin_api(app)
    near_max = BALANCE_MAX - 100
    uid = await add_user(app.state, "full", quota=near_max)
    full = await logged_in(app, "full")
    [key] = await create(admin, quota=500)
    message = fails(await full.post("/api/user/topup", json={"key": key}), 409,
                    "the balance would exceed the largest supported amount")
    assert message.startswith("redemption code not used")
    code = await code_by_key(app, key)
    assert (code.status, code.used_user_id, code.redeemed_time) == (RedemptionStatus.ENABLED, 0, 0)
    async with app.state.db.transaction() as tx:
        assert (await tx.scalars(select(PendingCredit))).all() == []  # nothing recorded, nothing to fail
    assert await live_quota(full) == near_max
    assert await books(app, uid) == (near_max, [])

    data_of(await admin.post("/api/user/manage", json={"id": uid, "action": "add_quota", "mode": "subtract",
                                                       "value": 1000}))  # room for the code now
    assert data_of(await full.post("/api/user/topup", json={"key": key})) == 500
    assert await live_quota(full) == near_max - 1000 + 500
    quota, logs = await books(app, uid)
    assert (quota, [x.quota for x in logs]) == (near_max - 500, [500])
    assert (await code_by_key(app, key)).status == RedemptionStatus.USED
