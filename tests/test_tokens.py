"""The API key routes follow docs/api/accounts.md#api-keys on every stack (SQLite, MariaDB+Redis,
PostgreSQL+Redis).

Proved here over HTTP against the real app:
- a created key is 48 `[A-Za-z0-9]`, shown in full (`sk-…`) once, masked (`abcd**********wxyz`) in lists
  and gets, and again in full only through `POST /api/token/:id/key`; SQL holds it encrypted plus its
  HMAC digest, never in clear;
- search by a case-insensitive literal name substring, by the exact full key (with or without `sk-`; a
  partial key matches nothing) and by both;
- `PUT` applies exactly the present fields (clearing ones included), `?status_only=1` only the status,
  and refuses to enable a key that would be expired or exhausted;
- every invalid field is a 400 naming it (never a 500); another user's key is a 404 everywhere; batch
  delete counts only the caller's own live keys; a user has at most 1000 keys (403 beyond);
- `remain_quota` edits go through the quota engine (usage not yet synced is absorbed, not lost) and
  every view shows the live remaining quota;
- `GET /api/usage/token/` is authenticated by the key itself, whatever its status.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
from sqlalchemy import insert, select

from models.keys import ApiKey, ApiKeyRepository
from server.keys.service import MAX_KEYS_PER_USER, new_key
from tests.harness import Api, Running, add_user, data_of, fails, logged_in

TOKEN_FIELDS = {
    "id", "user_id", "key", "status", "name", "created_time", "accessed_time", "expired_time",
    "remain_quota", "used_quota", "unlimited_quota", "model_limits_enabled", "model_limits", "allow_ips",
    "group", "DeletedAt",
}
FULL = re.compile(r"sk-[A-Za-z0-9]{48}")


# ---- helpers (local to this file) -------------------------------------------------------------------


def masked(full: str) -> str:
    bare = full.removeprefix("sk-")
    return f"{bare[:4]}**********{bare[-4:]}"


async def user_api(app: Running, name: str = "alice", **kwargs: Any) -> Api:
    await add_user(app.state, name, **kwargs)
    return await logged_in(app, name)


async def create(api: Api, **fields: Any) -> dict[str, Any]:
    token: dict[str, Any] = data_of(await api.post("/api/token/", json=fields))
    return token


async def row_of(app: Running, key_id: int) -> ApiKey:
    await app.state.quota_sync.drain()
    async with app.state.db.transaction() as tx:
        row = await tx.scalar(select(ApiKey).where(ApiKey.id == key_id))
    assert row is not None
    return row


# ---- create, show, reveal ---------------------------------------------------------------------------

async def test_a_created_key_is_shown_once_then_masked(app: Running) -> None:
    alice = await user_api(app)
    token = await create(alice, name="  my key  ", remain_quota=1234, model_limits="a, b,,a",
                         allow_ips="10.0.0.1\n 192.168.0.0/16 \n\n::1", group="vip")
    assert set(token) == TOKEN_FIELDS
    assert FULL.fullmatch(token["key"]), token["key"]
    now = app.state.clock.now_s()
    assert token["user_id"] == alice.user_id and token["status"] == 1 and token["name"] == "my key"
    assert token["expired_time"] == -1 and token["remain_quota"] == 1234 and token["used_quota"] == 0
    assert token["unlimited_quota"] is False and token["model_limits_enabled"] is False
    assert token["model_limits"] == "a,b" and token["allow_ips"] == "10.0.0.1\n192.168.0.0/16\n::1"
    assert token["group"] == "vip" and token["DeletedAt"] is None
    assert abs(token["created_time"] - now) <= 2 and token["accessed_time"] == token["created_time"]

    listed = await alice.get("/api/token/")
    page = data_of(listed)
    assert (page["total"], page["page"], page["page_size"]) == (1, 1, 10)
    assert page["items"][0]["key"] == masked(token["key"])
    assert token["key"].removeprefix("sk-") not in listed.text
    shown = data_of(await alice.get(f"/api/token/{token['id']}"))
    assert shown == {**token, "key": masked(token["key"])}
    revealed = data_of(await alice.post(f"/api/token/{token['id']}/key"))
    assert revealed == {"key": token["key"].removeprefix("sk-")}  # bare, as new-api answers

    row = await row_of(app, token["id"])
    bare = token["key"].removeprefix("sk-")
    assert row.key_digest == app.state.box.digest(bare)
    assert bare not in row.key_encrypted and app.state.box.decrypt(row.key_encrypted) == bare
    assert row.remain_quota == 1234

    second = await create(alice)  # every field optional
    assert second["key"] != token["key"] and second["name"] == "" and second["remain_quota"] == 0
    ids = [t["id"] for t in data_of(await alice.get("/api/token/"))["items"]]
    assert ids == [second["id"], token["id"]]  # id descending


async def test_search_by_name_substring_and_by_exact_key(app: Running) -> None:
    alice = await user_api(app)
    alpha = await create(alice, name="Alpha Key")
    beta = await create(alice, name="beta")
    alphabet = await create(alice, name="alphabet 100%")
    bob = await user_api(app, "bob")
    await create(bob, name="alpha of bob")

    async def found(**params: str) -> list[int]:
        page = data_of(await alice.get("/api/token/search", params=params))
        assert page["total"] == len(page["items"])
        for item in page["items"]:
            assert len(item["key"]) == 18 and item["key"][4:14] == "**********"
        return [t["id"] for t in page["items"]]

    assert await found(keyword="ALPHA") == [alphabet["id"], alpha["id"]]
    assert await found(keyword="  alpha  ") == [alphabet["id"], alpha["id"]]  # keywords are trimmed
    assert await found(keyword="100%") == [alphabet["id"]]
    assert await found(keyword="%") == [alphabet["id"]]  # literal, not a wildcard
    assert await found(keyword="_") == []
    assert await found(keyword="") == [alphabet["id"], beta["id"], alpha["id"]]
    assert await found(token=beta["key"]) == [beta["id"]]
    assert await found(token=beta["key"].removeprefix("sk-")) == [beta["id"]]
    assert await found(token=beta["key"][:20]) == []  # no partial search
    assert await found(token=new_key()) == []
    assert await found(keyword="bet", token=beta["key"]) == [beta["id"]]
    assert await found(keyword="alpha", token=beta["key"]) == []


# ---- edit -------------------------------------------------------------------------------------------

async def test_put_applies_present_fields_including_cleared_ones(app: Running) -> None:
    alice = await user_api(app)
    future = app.state.clock.now_s() + 3600
    token = await create(alice, name="full", expired_time=future, remain_quota=500, unlimited_quota=True,
                         model_limits_enabled=True, model_limits="m1,m2", allow_ips="10.0.0.0/8",
                         group="vip")
    kid = token["id"]

    renamed = data_of(await alice.put("/api/token/", json={"id": kid, "name": "renamed"}))
    assert renamed == {**token, "name": "renamed", "key": masked(token["key"])}

    cleared = data_of(await alice.put("/api/token/", json={
        "id": kid, "name": "", "expired_time": -1, "unlimited_quota": False, "model_limits_enabled": False,
        "model_limits": "", "allow_ips": "", "group": "", "remain_quota": 0,
    }))
    assert (cleared["name"], cleared["expired_time"], cleared["unlimited_quota"]) == ("", -1, False)
    assert (cleared["model_limits_enabled"], cleared["model_limits"], cleared["allow_ips"]) == (False, "", "")
    assert (cleared["group"], cleared["remain_quota"], cleared["status"]) == ("", 0, 1)
    row = await row_of(app, kid)
    assert (row.name, row.expired_time, row.unlimited_quota) == ("", -1, False)
    assert row.model_limits_enabled is False
    assert (row.model_limits, row.allow_ips, row.group, row.remain_quota) == ("", "", "", 0)

    # a client echoing the whole key (new-api's UI does) is accepted, null fields are ignored
    echoed = data_of(await alice.put("/api/token/", json={**cleared, "name": "again", "key": None}))
    assert echoed == {**cleared, "name": "again"}


async def test_status_changes_and_enabling_rules(app: Running) -> None:
    alice = await user_api(app)
    now = app.state.clock.now_s()
    token = await create(alice, name="k", remain_quota=10, expired_time=now + 100)
    kid = token["id"]

    disabled = data_of(await alice.put("/api/token/?status_only=1", json={"id": kid, "status": 2,
                                                                        "name": "ignored"}))
    assert (disabled["status"], disabled["name"]) == (2, "k")
    assert (await row_of(app, kid)).status == 2
    enabled = data_of(await alice.put("/api/token/", params={"status_only": "true"},
                                      json={"id": kid, "status": 1}))
    assert enabled["status"] == 1
    for bad in (0, 3, 4, "1"):
        fails(await alice.put("/api/token/?status_only=1", json={"id": kid, "status": bad}), 400, "status")
    fails(await alice.put("/api/token/?status_only=1", json={"id": kid}), 400, "status")
    fails(await alice.put("/api/token/", json={"id": kid, "status": 3}), 400, "status")

    # expired: cannot be enabled until expired_time moves
    data_of(await alice.put("/api/token/?status_only=1", json={"id": kid, "status": 2}))
    app.clock.shift(200)
    fails(await alice.put("/api/token/?status_only=1", json={"id": kid, "status": 1}), 400, "status")
    fails(await alice.put("/api/token/", json={"id": kid, "status": 1}), 400, "status")
    revived = data_of(await alice.put("/api/token/", json={"id": kid, "status": 1, "expired_time": -1}))
    assert (revived["status"], revived["expired_time"]) == (1, -1)

    # exhausted: the gateway persisted status 4; enabling needs quota or unlimited
    key = await app.state.keys.lookup(token["key"])
    assert key is not None
    data_of(await alice.put("/api/token/", json={"id": kid, "remain_quota": 0}))
    assert await app.state.keys.mark_status(key, 4) is True
    assert data_of(await alice.get(f"/api/token/{kid}"))["status"] == 4
    fails(await alice.put("/api/token/?status_only=1", json={"id": kid, "status": 1}), 400, "status")
    same = data_of(await alice.put("/api/token/", json={"id": kid, "status": 4, "name": "k2"}))
    assert (same["status"], same["name"]) == (4, "k2")  # the echoed status is not a change
    data_of(await alice.put("/api/token/", json={"id": kid, "unlimited_quota": True}))
    assert data_of(await alice.put("/api/token/?status_only=1", json={"id": kid, "status": 1}))["status"] == 1
    data_of(await alice.put("/api/token/?status_only=1", json={"id": kid, "status": 2}))
    data_of(await alice.put("/api/token/", json={"id": kid, "unlimited_quota": False}))
    fails(await alice.put("/api/token/", json={"id": kid, "status": 1}), 400, "status")
    back = data_of(await alice.put("/api/token/", json={"id": kid, "status": 1, "remain_quota": 7}))
    assert (back["status"], back["remain_quota"]) == (1, 7)


async def test_remain_quota_edits_go_through_the_quota_engine(app: Running) -> None:
    alice = await user_api(app, quota=1_000_000)
    token = await create(alice, name="metered", remain_quota=1000)
    kid, uid = token["id"], alice.user_id or 0
    await app.state.quota_sync.drain()
    hold = await app.state.quota.reserve(uid, 300, key_id=kid, key_limited=True)
    await app.state.quota.settle(hold, 300)  # usage queued, not yet in SQL
    assert data_of(await alice.get(f"/api/token/{kid}"))["remain_quota"] == 700  # the live value
    listed = data_of(await alice.get("/api/token/"))["items"][0]
    assert listed["remain_quota"] == 700

    reply = data_of(await alice.put("/api/token/", json={"id": kid, "remain_quota": 5000}))
    assert reply["remain_quota"] == 5000
    assert data_of(await alice.get(f"/api/token/{kid}"))["remain_quota"] == 5000
    row = await row_of(app, kid)  # after the sync: the override absorbed the usage, none was lost
    assert (row.remain_quota, row.used_quota) == (5000, 300)
    # echoing the live value changes nothing
    echoed = data_of(await alice.put("/api/token/", json={"id": kid, "remain_quota": 5000}))
    assert echoed["remain_quota"] == 5000
    assert (await row_of(app, kid)).remain_quota == 5000


# ---- validation -------------------------------------------------------------------------------------

async def test_invalid_fields_are_400s_naming_the_field(app: Running) -> None:
    alice = await user_api(app, group="svip")
    now = app.state.clock.now_s()
    top = 1_000_000_000 * 500_000  # 1e9 × QuotaPerUnit
    cases: list[tuple[dict[str, Any], str]] = [
        ({"name": "x" * 51}, "name"),
        ({"name": 5}, "name"),
        ({"name": "bad\nname"}, "name"),
        ({"expired_time": 0}, "expired_time"),
        ({"expired_time": now - 10}, "expired_time"),
        ({"expired_time": "soon"}, "expired_time"),
        ({"expired_time": True}, "expired_time"),
        ({"remain_quota": -1}, "remain_quota"),
        ({"remain_quota": top + 1}, "remain_quota"),
        ({"remain_quota": 1.5}, "remain_quota"),
        ({"remain_quota": 10**30}, "remain_quota"),
        ({"unlimited_quota": "yes"}, "unlimited_quota"),
        ({"model_limits_enabled": 1}, "model_limits_enabled"),
        ({"model_limits": ["a"]}, "model_limits"),
        ({"model_limits": "ok,bad\u0001name"}, "model_limits"),
        ({"allow_ips": "300.1.1.1"}, "allow_ips"),
        ({"allow_ips": "10.0.0.0/33"}, "allow_ips"),
        ({"allow_ips": "10.0.0.1,10.0.0.2"}, "allow_ips"),
        ({"allow_ips": "localhost"}, "allow_ips"),
        ({"group": "nope"}, "group"),
        ({"group": 3}, "group"),
    ]
    for body, field in cases:
        fails(await alice.post("/api/token/", json=body), 400, field)
    token = await create(alice, remain_quota=top, group="svip", allow_ips="2001:db8::/32\n127.0.0.1",
                         expired_time=now + 10)
    assert token["group"] == "svip"  # the user's own group is usable even if not in UserUsableGroups
    for body, field in cases:
        fails(await alice.put("/api/token/", json={"id": token["id"], **body}), 400, field)
    fails(await alice.post("/api/token/", content=b"not json",
                           headers={"Content-Type": "application/json"}), 400)
    fails(await alice.post("/api/token/", json=[1]), 400)
    fails(await alice.put("/api/token/", json={"name": "x"}), 400, "id")
    fails(await alice.put("/api/token/", json={"id": "abc"}), 400, "id")
    fails(await alice.put("/api/token/", json={"id": 0}), 400, "id")
    for method, path in (("GET", "/api/token/abc"), ("POST", "/api/token/1x/key"),
                         ("DELETE", "/api/token/-1"), ("GET", "/api/token/0")):
        fails(await alice.request(method, path), 400, "id")

    bob = await user_api(app, "bob")
    fails(await bob.post("/api/token/", json={"group": "svip"}), 400, "group")  # not bob's group
    assert (await create(bob, group="auto"))["group"] == "auto"
    assert (await create(bob, group="vip"))["group"] == "vip"
    # a value equal to the stored one is accepted even when it no longer validates (echoing clients)
    app.clock.shift(60)
    same = data_of(await alice.put("/api/token/", json={"id": token["id"], "expired_time": now + 10,
                                                        "name": "kept"}))
    assert (same["expired_time"], same["name"]) == (now + 10, "kept")


async def test_a_user_has_at_most_1000_keys(app: Running) -> None:
    alice = await user_api(app)
    uid = alice.user_id or 0
    now = app.state.clock.now_s()
    rows = []
    for n in range(MAX_KEYS_PER_USER - 1):
        bare = new_key()
        rows.append({"user_id": uid, "name": f"k{n}", "key_digest": app.state.box.digest(bare),
                     "key_encrypted": app.state.box.encrypt(bare), "status": 1, "created_time": now,
                     "accessed_time": now, "expired_time": -1, "remain_quota": 0, "used_quota": 0,
                     "unlimited_quota": False, "model_limits_enabled": False, "model_limits": "",
                     "allow_ips": "", "group": ""})
    async with app.state.db.transaction() as tx:
        await tx.execute(insert(ApiKey), rows)
        assert await ApiKeyRepository(tx).count_live(uid) == MAX_KEYS_PER_USER - 1
    last = await create(alice, name="the 1000th")
    fails(await alice.post("/api/token/", json={"name": "one too many"}), 403, "a user can have at most")
    assert data_of(await alice.delete(f"/api/token/{last['id']}")) is None
    await create(alice, name="room again")
    other = await user_api(app, "bob")
    await create(other, name="bob is not limited by alice")


# ---- ownership and deletion -------------------------------------------------------------------------

async def test_other_users_keys_are_404_and_batch_delete_counts_own_deletions(app: Running) -> None:
    alice = await user_api(app)
    root = await user_api(app, "root", role=100)
    theirs = await create(root, name="root's")
    mine = [await create(alice, name=f"k{n}") for n in range(3)]
    tid = theirs["id"]
    fails(await alice.get(f"/api/token/{tid}"), 404)
    fails(await alice.post(f"/api/token/{tid}/key"), 404)
    fails(await alice.put("/api/token/", json={"id": tid, "name": "stolen"}), 404)
    fails(await alice.put("/api/token/?status_only=1", json={"id": tid, "status": 2}), 404)
    fails(await alice.delete(f"/api/token/{tid}"), 404)
    fails(await root.get(f"/api/token/{mine[0]['id']}"), 404)  # admins and root too: own keys only
    fails(await alice.get("/api/token/999999"), 404)
    listed = data_of(await alice.get("/api/token/"))["items"]
    assert [t["id"] for t in listed] == [t["id"] for t in mine[::-1]]
    assert data_of(await alice.get("/api/token/search", params={"token": theirs["key"]}))["total"] == 0

    assert data_of(await alice.delete(f"/api/token/{mine[0]['id']}")) is None
    fails(await alice.get(f"/api/token/{mine[0]['id']}"), 404)
    fails(await alice.delete(f"/api/token/{mine[0]['id']}"), 404)
    assert (await row_of(app, mine[0]["id"])).deleted_at is not None  # soft delete
    ids = [mine[0]["id"], mine[1]["id"], mine[2]["id"], mine[2]["id"], tid, 999999]
    assert data_of(await alice.post("/api/token/batch", json={"ids": ids})) == 2
    assert data_of(await alice.post("/api/token/batch", json={"ids": ids})) == 0
    assert data_of(await alice.get("/api/token/"))["total"] == 0
    assert data_of(await root.get(f"/api/token/{tid}"))["id"] == tid  # untouched
    for bad in ([], "1", [0], ["1"], [True], [1.5], None):
        fails(await alice.post("/api/token/batch", json={"ids": bad}), 400, "ids")
    fails(await alice.post("/api/token/batch", json={"ids": list(range(1, 1002))}), 400, "ids")


# ---- usage ------------------------------------------------------------------------------------------

async def test_usage_is_authenticated_by_the_key_itself(app: Running) -> None:
    alice = await user_api(app, quota=10_000)
    expires = app.state.clock.now_s() + 3600
    token = await create(alice, name="usage", remain_quota=900, expired_time=expires)
    never = await create(alice, name="forever", unlimited_quota=True)
    anonymous = app.client()

    async def usage(authorization: str | None) -> httpx.Response:
        headers = {} if authorization is None else {"Authorization": authorization}
        return await anonymous.get("/api/usage/token/", headers=headers)

    expected = {"object": "token_usage", "name": "usage", "total_granted": 900, "total_used": 0,
                "total_available": 900, "unlimited_quota": False, "expires_at": expires}
    assert data_of(await usage(f"Bearer {token['key']}")) == expected
    assert data_of(await usage(token["key"])) == expected
    assert data_of(await usage(f"bearer {token['key'].removeprefix('sk-')}")) == expected
    forever = data_of(await usage(f"Bearer {never['key']}"))
    assert (forever["expires_at"], forever["unlimited_quota"], forever["name"]) == (0, True, "forever")

    hold = await app.state.quota.reserve(alice.user_id or 0, 0, key_id=token["id"], key_limited=True)
    await app.state.quota.settle(hold, 250)
    await app.state.quota_sync.drain()  # used_quota is the SQL counter; remain is the live balance
    after = data_of(await usage(f"Bearer {token['key']}"))
    assert (after["total_granted"], after["total_used"], after["total_available"]) == (900, 250, 650)

    data_of(await alice.put("/api/token/?status_only=1", json={"id": token["id"], "status": 2}))
    assert data_of(await usage(f"Bearer {token['key']}"))["name"] == "usage"  # disabled still answers
    for bad in (None, "", "Bearer", "Bearer sk-short", f"Bearer {new_key()}", f"Bearer {token['key']}-1",
                "Basic abc"):
        fails(await usage(bad), 401)
    data_of(await alice.delete(f"/api/token/{token['id']}"))
    fails(await usage(f"Bearer {token['key']}"), 401)
    # the session alone is not an API key
    fails(await alice.get("/api/usage/token/"), 401)
