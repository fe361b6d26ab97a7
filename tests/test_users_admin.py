"""The admin user routes follow docs/api/accounts.md#users on every stack.

Proved here, over HTTP against the real app on SQLite, MariaDB+Redis and PostgreSQL+Redis:
- `GET /api/user/` and `GET /api/user/search` page as docs/API.md#paging says (shape, defaults, clamping, id
  desc), hide soft-deleted users unless `include_deleted=1`, and search by exact id, by a case-insensitive
  literal substring (`%`, `_`, `\\` match themselves) and by exact group, ANDed;
- no reply ever carries a password (always `""`) or an `access_token`; each view says whether the user's
  2FA is on and how many passkeys they have (for a whole page in two queries);
- `GET/PUT/DELETE /api/user/:id`, `POST /api/user/` and `POST /api/user/manage` answer the documented
  statuses, enforce the role hierarchy (admins cannot touch admins or root; root can act on admins), and
  leave the documented durable effect in SQL: soft deletes, reserved usernames, re-hashed passwords,
  revoked sessions, dead access tokens, roles, statuses and balances;
- `add_quota` changes a balance exactly once per request under concurrency and never drives it below zero.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx

from models.passkeys import PasskeyCredential
from models.tables import User
from models.two_factor import TwoFactor
from models.users import UserRepository
from tests.harness import Api, Running, add_user, data_of, fails, logged_in

USER_FIELDS = {
    "id", "username", "password", "display_name", "email", "role", "status", "group", "quota", "used_quota",
    "request_count", "aff_code", "aff_count", "aff_quota", "aff_history_quota", "inviter_id", "setting",
    "remark", "stripe_customer", "created_at", "last_login_at", "DeletedAt", "two_factor_enabled",
    "passkey_count",
}
MANAGE_REPLY = {"role", "status", "quota"}


# ---- helpers (local to this file) -------------------------------------------------------------------


def walk(value: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object nested anywhere in `value`."""
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from walk(v)


def assert_no_secrets(body: Any) -> None:
    """No object in a reply carries an access token, and every `password` is the empty string."""
    for obj in walk(body):
        assert "access_token" not in obj, obj
        if "password" in obj:
            assert obj["password"] == "", obj


async def stored(app: Running, user_id: int) -> User | None:
    """The user row as SQL holds it once the quota sync caught up (deleted ones included)."""
    await app.state.quota_sync.drain()
    async with app.state.db.transaction() as tx:
        return await UserRepository(tx).get(user_id, include_deleted=True)


async def must_exist(app: Running, user_id: int) -> User:
    user = await stored(app, user_id)
    assert user is not None
    return user


async def set_fields(app: Running, user_id: int, **values: Any) -> None:
    """Seed columns that no route under test sets (e-mail, remark, …)."""
    async with app.state.db.transaction() as tx:
        await UserRepository(tx).update_fields(user_id, **values)


async def bulk_users(app: Running, count: int, prefix: str = "bulk") -> list[int]:
    """Seed many common users in one transaction sharing one password hash (keeps paging tests fast)."""
    hashed = await app.state.passwords.hash("password123")
    now = app.state.clock.now_s()
    async with app.state.db.transaction() as tx:
        users = UserRepository(tx)
        return [await users.add(User(
            username=f"{prefix}{n:04d}", password=hashed, display_name=f"{prefix}{n:04d}", role=1, status=1,
            group="default", quota=0, aff_code=None, created_at=now, email="", setting="", remark="",
            stripe_customer="",
        )) for n in range(count)]


async def with_token(app: Running, api: Api) -> Api:
    """A second client of the same user authenticated only by a fresh access token."""
    token = data_of(await api.get("/api/user/token"))
    assert isinstance(token, str) and len(token) >= 32
    client = app.client()
    client.user_id, client.token = api.user_id, token
    return client


async def alive(api: Api) -> int:
    """The status `GET /api/user/self` answers for this caller (200 = still authenticated)."""
    return (await api.get("/api/user/self")).status_code


async def root_api(app: Running) -> Api:
    await add_user(app.state, "root", role=100)
    return await logged_in(app, "root")


async def admin_api(app: Running, name: str = "admin") -> Api:
    await add_user(app.state, name, role=10)
    return await logged_in(app, name)


async def balance(app: Running, api: Api, user_id: int) -> int:
    """The user's balance as the API shows it (the live one, B.1) — checked equal to the SQL row.

    `add_quota` runs through the quota engine (docs/API.md#quota), so the SQL value follows after a sync."""
    shown = data_of(await api.get(f"/api/user/{user_id}"))["quota"]
    await app.state.quota_sync.drain()  # the durable balance follows the live one at the next sync
    assert shown == (await must_exist(app, user_id)).quota
    return int(shown)


async def manage(api: Api, user_id: int, action: str, **extra: Any) -> httpx.Response:
    return await api.post("/api/user/manage", json={"id": user_id, "action": action, **extra})


# ---- list and pagination ----------------------------------------------------------------------------

async def test_list_pages_users_in_id_descending_order(app: Running) -> None:
    admin = await admin_api(app)
    ids = [await add_user(app.state, f"user{n:02d}") for n in range(12)]
    everyone = sorted([admin.user_id or 0, *ids], reverse=True)

    first = data_of(await admin.get("/api/user/"))
    assert set(first) == {"items", "total", "page", "page_size"}
    assert (first["total"], first["page"], first["page_size"]) == (13, 1, 10)
    assert [u["id"] for u in first["items"]] == everyone[:10]
    for item in first["items"]:
        assert set(item) == USER_FIELDS
        assert item["password"] == "" and item["DeletedAt"] is None

    second = data_of(await admin.get("/api/user/", params={"p": 2}))
    assert (second["total"], second["page"], second["page_size"]) == (13, 2, 10)
    assert [u["id"] for u in second["items"]] == everyone[10:]

    beyond = data_of(await admin.get("/api/user/", params={"p": 5}))
    assert beyond["items"] == [] and beyond["total"] == 13

    small = data_of(await admin.get("/api/user/", params={"p": 3, "page_size": 4}))
    assert (small["page"], small["page_size"]) == (3, 4)
    assert [u["id"] for u in small["items"]] == everyone[8:12]
    for alias in ("ps", "size"):
        aliased = data_of(await admin.get("/api/user/", params={alias: 3}))
        assert aliased["page_size"] == 3 and len(aliased["items"]) == 3


async def test_list_clamps_the_page_size_to_100_items(app: Running) -> None:
    admin = await admin_api(app)
    await bulk_users(app, 104)
    clamped = data_of(await admin.get("/api/user/", params={"page_size": 1000}))
    assert (clamped["total"], clamped["page"], clamped["page_size"]) == (105, 1, 100)
    assert len(clamped["items"]) == 100
    rest = data_of(await admin.get("/api/user/", params={"page_size": 1000, "p": 2}))
    assert (rest["page"], rest["page_size"], len(rest["items"])) == (2, 100, 5)
    seen = [u["id"] for u in clamped["items"] + rest["items"]]
    assert seen == sorted(seen, reverse=True) and len(set(seen)) == 105


async def test_list_clamps_nonsense_paging_to_the_defaults(app: Running) -> None:
    admin = await admin_api(app)
    for n in range(3):
        await add_user(app.state, f"user{n}")
    cases: list[tuple[dict[str, Any], int, int]] = [
        ({"page_size": 1000}, 1, 100),
        ({"p": -1}, 1, 10),
        ({"p": 0}, 1, 10),
        ({"p": "abc"}, 1, 10),
        ({"page_size": 0}, 1, 10),
        ({"page_size": -5}, 1, 10),
        ({"page_size": "many"}, 1, 10),
        ({"p": "2", "page_size": "2"}, 2, 2),
    ]
    for params, page, size in cases:
        got = data_of(await admin.get("/api/user/", params=params))
        assert (got["page"], got["page_size"], got["total"]) == (page, size, 4), params
        assert len(got["items"]) == min(size, 4 - (page - 1) * size), params


async def test_list_hides_deleted_users_unless_asked(app: Running) -> None:
    root = await root_api(app)
    live = await add_user(app.state, "live")
    gone = await add_user(app.state, "gone")
    started = app.clock.now_s()
    data_of(await root.delete(f"/api/user/{gone}"))
    finished = app.clock.now_s()

    listed = data_of(await root.get("/api/user/"))
    assert gone not in [u["id"] for u in listed["items"]]
    assert listed["total"] == 2

    for flag in ("0", "no", ""):
        hidden = data_of(await root.get("/api/user/", params={"include_deleted": flag}))
        assert gone not in [u["id"] for u in hidden["items"]]

    everyone = data_of(await root.get("/api/user/", params={"include_deleted": "1"}))
    assert everyone["total"] == 3
    by_id = {u["id"]: u for u in everyone["items"]}
    deleted_at = by_id[gone]["DeletedAt"]
    assert isinstance(deleted_at, int) and not isinstance(deleted_at, bool)
    assert deleted_at == (await must_exist(app, gone)).deleted_at
    assert started <= deleted_at <= finished
    assert by_id[live]["DeletedAt"] is None


async def test_no_admin_reply_carries_a_password_or_access_token(app: Running) -> None:
    root = await root_api(app)
    uid = await add_user(app.state, "holder")
    holder = await logged_in(app, "holder")
    await with_token(app, holder)  # the row now holds a token digest
    assert (await must_exist(app, uid)).access_token

    replies = [
        await root.get("/api/user/"),
        await root.get("/api/user/", params={"include_deleted": 1}),
        await root.get("/api/user/search", params={"keyword": "holder"}),
        await root.get(f"/api/user/{uid}"),
        await root.put("/api/user/", json={"id": uid, "display_name": "Holder"}),
        await root.put("/api/user/", json={"id": uid, "password": "another-pass-1"}),
        await manage(root, uid, "add_quota", mode="add", value=5),
    ]
    for response in replies:
        assert response.status_code == 200, response.text
        assert_no_secrets(response.json())
        assert "another-pass-1" not in response.text
    single = data_of(await root.get(f"/api/user/{uid}"))
    assert single["password"] == ""


# ---- search -----------------------------------------------------------------------------------------

async def search(api: Api, **params: Any) -> list[str]:
    page = data_of(await api.get("/api/user/search", params=params))
    assert set(page) == {"items", "total", "page", "page_size"}
    assert_no_secrets(page)
    return [u["username"] for u in page["items"]]


async def test_search_matches_a_case_insensitive_substring_of_the_names_or_email(app: Running) -> None:
    admin = await admin_api(app, "boss")
    alice = await add_user(app.state, "Alice")
    bob = await add_user(app.state, "bob")
    await add_user(app.state, "carol")
    await set_fields(app, bob, email="Bob.Builder@Example.org")
    await set_fields(app, alice, display_name="Wonder Land")

    assert await search(admin, keyword="alic") == ["Alice"]
    assert await search(admin, keyword="ALICE") == ["Alice"]
    assert await search(admin, keyword="wonder land") == ["Alice"]  # display_name
    assert await search(admin, keyword="builder@example") == ["bob"]  # email
    assert await search(admin, keyword="  CAROL  ") == ["carol"]  # trimmed
    assert await search(admin, keyword="nobody") == []
    assert sorted(await search(admin, keyword="B")) == ["bob", "boss"]
    # an empty keyword is no filter
    assert sorted(await search(admin)) == ["Alice", "bob", "boss", "carol"]
    assert sorted(await search(admin, keyword="")) == ["Alice", "bob", "boss", "carol"]


async def test_search_treats_percent_underscore_and_backslash_literally(app: Running) -> None:
    admin = await admin_api(app, "boss")
    for name in ("a%b", "axb", "a_b", "ayb", "c\\d", "cd"):
        await add_user(app.state, name)

    assert await search(admin, keyword="%") == ["a%b"]
    assert await search(admin, keyword="a%b") == ["a%b"]
    assert await search(admin, keyword="_") == ["a_b"]
    assert await search(admin, keyword="a_b") == ["a_b"]
    assert await search(admin, keyword="\\") == ["c\\d"]
    assert await search(admin, keyword="c\\d") == ["c\\d"]


async def test_search_by_digits_finds_the_user_with_that_exact_id(app: Running) -> None:
    admin = await admin_api(app, "boss")
    ids = {name: await add_user(app.state, name) for name in ("alpha", "beta", "gamma")}
    for name, uid in ids.items():
        assert await search(admin, keyword=str(uid)) == [name]
    missing = max(ids.values()) + 1000
    assert await search(admin, keyword=str(missing)) == []


async def test_search_by_digits_other_than_ascii_is_a_text_search_not_an_error(app: Running) -> None:
    admin = await admin_api(app, "boss")
    await add_user(app.state, "x²")
    for _ in range(12):
        await add_user(app.state, f"filler{_}")
    # '²' counts as a digit for str.isdigit() but is no number; '١٢' would read as id 12
    assert await search(admin, keyword="²") == ["x²"]
    assert await search(admin, keyword="١٢") == []


async def test_search_by_group_is_exact_and_anded_with_the_keyword(app: Running) -> None:
    root = await root_api(app)
    await add_user(app.state, "vip-ann", group="vip")
    await add_user(app.state, "vip-ben", group="vip")
    await add_user(app.state, "std-ann", group="default")
    await add_user(app.state, "svip-ann", group="svip")

    assert sorted(await search(root, group="vip")) == ["vip-ann", "vip-ben"]
    assert await search(root, group="vi") == []
    assert await search(root, group="VIP") == []
    assert await search(root, keyword="ann", group="vip") == ["vip-ann"]
    assert await search(root, keyword="ben", group="default") == []
    assert sorted(await search(root, keyword="ann")) == ["std-ann", "svip-ann", "vip-ann"]


async def test_search_pages_and_hides_deleted_users_unless_asked(app: Running) -> None:
    root = await root_api(app)
    ids = [await add_user(app.state, f"match{n}") for n in range(5)]
    await add_user(app.state, "other")
    data_of(await root.delete(f"/api/user/{ids[0]}"))

    page = data_of(await root.get("/api/user/search", params={"keyword": "match", "page_size": 2, "p": 2}))
    assert (page["total"], page["page"], page["page_size"]) == (4, 2, 2)
    assert [u["id"] for u in page["items"]] == [ids[2], ids[1]]
    clamped = data_of(await root.get("/api/user/search", params={"keyword": "match", "page_size": 1000,
                                                                 "p": "x"}))
    assert (clamped["page"], clamped["page_size"], clamped["total"]) == (1, 100, 4)

    assert "match0" not in await search(root, keyword="match")
    with_deleted = data_of(await root.get("/api/user/search", params={"keyword": "match",
                                                                      "include_deleted": "1"}))
    assert with_deleted["total"] == 5
    deleted = [u for u in with_deleted["items"] if u["id"] == ids[0]]
    assert len(deleted) == 1 and isinstance(deleted[0]["DeletedAt"], int)


# ---- get one ----------------------------------------------------------------------------------------

async def test_get_user_returns_the_user_resource(app: Running) -> None:
    admin = await admin_api(app)
    uid = await add_user(app.state, "target", quota=42, group="vip")
    await set_fields(app, uid, remark="note", email="t@example.com")
    user = data_of(await admin.get(f"/api/user/{uid}"))
    assert set(user) == USER_FIELDS
    row = await must_exist(app, uid)
    assert user == {
        "id": uid, "username": "target", "password": "", "display_name": "target", "email": "t@example.com",
        "role": 1, "status": 1, "group": "vip", "quota": 42, "used_quota": 0, "request_count": 0,
        "aff_code": row.aff_code, "aff_count": 0, "aff_quota": 0, "aff_history_quota": 0, "inviter_id": 0,
        "setting": "", "remark": "note", "stripe_customer": "", "created_at": row.created_at,
        "last_login_at": 0, "DeletedAt": None, "two_factor_enabled": False, "passkey_count": 0,
    }


async def test_each_view_says_whether_2fa_is_on_and_how_many_passkeys_the_user_has(app: Running) -> None:
    admin = await admin_api(app)
    plain, guarded, pending = [await add_user(app.state, name) for name in ("plain", "guarded", "pending")]
    async with app.state.db.transaction() as tx:
        tx.add_all([TwoFactor(user_id=guarded, secret="s", enabled=True),
                    TwoFactor(user_id=pending, secret="s", enabled=False),  # set up, never turned on
                    *(PasskeyCredential(user_id=guarded, credential_id=f"cred-{i}", public_key="k")
                      for i in range(2))])
    listed = data_of(await admin.get("/api/user/", params={"page_size": 100}))["items"]
    found = data_of(await admin.get("/api/user/search", params={"keyword": "guarded"}))["items"]
    one = data_of(await admin.get(f"/api/user/{guarded}"))
    edited = data_of(await admin.put("/api/user/", json={"id": guarded, "remark": "x"}))
    flags = {u["id"]: (u["two_factor_enabled"], u["passkey_count"]) for u in listed}
    assert (flags[plain], flags[guarded], flags[pending]) == ((False, 0), (True, 2), (False, 0))
    assert [(v["two_factor_enabled"], v["passkey_count"]) for v in (*found, one, edited)] == [(True, 2)] * 3


async def test_get_user_refuses_missing_deleted_and_malformed_ids(app: Running) -> None:
    root = await root_api(app)
    gone = await add_user(app.state, "gone")
    data_of(await root.delete(f"/api/user/{gone}"))
    fails(await root.get(f"/api/user/{gone}"), 404)
    fails(await root.get(f"/api/user/{gone + 1000}"), 404)
    for bad in ("abc", "0", "-1", "1.5", "9" * 30):
        fails(await root.get(f"/api/user/{bad}"), 400, "id")


# ---- hierarchy --------------------------------------------------------------------------------------

async def test_an_admin_cannot_act_on_another_admin_or_root(app: Running) -> None:
    root_id = await add_user(app.state, "root", role=100)
    admin = await admin_api(app, "admin")
    other_admin = await add_user(app.state, "admin2", role=10)
    other_session = await logged_in(app, "admin2")

    for target in (other_admin, root_id, admin.user_id or 0):
        before = await must_exist(app, target)
        fails(await admin.get(f"/api/user/{target}"), 403)
        fails(await admin.put("/api/user/", json={"id": target, "display_name": "hacked",
                                                  "password": "hacked-pass-1"}), 403)
        actions: list[tuple[str, dict[str, Any]]] = [
            ("disable", {}), ("enable", {}), ("delete", {}), ("promote", {}), ("demote", {}),
            ("add_quota", {"mode": "add", "value": 5}),
        ]
        for action, extra in actions:
            fails(await manage(admin, target, action, **extra), 403)
        fails(await admin.delete(f"/api/user/{target}"), 403)
        after = await must_exist(app, target)
        assert (after.display_name, after.password, after.role, after.status, after.quota, after.deleted_at) \
            == (before.display_name, before.password, before.role, before.status, before.quota, None)
    assert await alive(other_session) == 200
    assert await alive(admin) == 200


async def test_root_can_act_on_admins(app: Running) -> None:
    root = await root_api(app)
    admin_id = await add_user(app.state, "admin", role=10)
    admin = await logged_in(app, "admin")

    assert data_of(await root.get(f"/api/user/{admin_id}"))["role"] == 10
    assert data_of(await root.put("/api/user/", json={"id": admin_id, "display_name": "Chief"}))[
        "display_name"] == "Chief"
    assert data_of(await manage(root, admin_id, "add_quota", mode="add", value=3)) == \
        {"role": 10, "status": 1, "quota": 3}
    assert data_of(await manage(root, admin_id, "disable"))["status"] == 2
    assert data_of(await manage(root, admin_id, "enable"))["status"] == 1
    data_of(await root.delete(f"/api/user/{admin_id}"))
    row = await must_exist(app, admin_id)
    assert row.display_name == "Chief" and row.quota == 3 and row.deleted_at is not None
    assert await alive(admin) == 401


async def test_an_admin_can_act_on_common_users(app: Running) -> None:
    admin = await admin_api(app)
    uid = await add_user(app.state, "common")
    assert data_of(await admin.get(f"/api/user/{uid}"))["username"] == "common"
    assert data_of(await admin.put("/api/user/", json={"id": uid, "remark": "ok"}))["remark"] == "ok"
    assert data_of(await manage(admin, uid, "disable"))["status"] == 2
    data_of(await admin.delete(f"/api/user/{uid}"))
    assert (await must_exist(app, uid)).deleted_at is not None


# ---- create -----------------------------------------------------------------------------------------

async def test_create_makes_an_enabled_user_with_the_new_user_quota(app: Running) -> None:
    root = await root_api(app)
    data_of(await root.put("/api/option/", json={"key": "QuotaForNewUser", "value": 777}))
    admin = await admin_api(app)

    body = {"username": " newbie ", "password": "secret-pass"}
    created = data_of(await admin.post("/api/user/", json=body))
    assert set(created) == {"id"} and isinstance(created["id"], int)
    row = await must_exist(app, created["id"])
    assert (row.username, row.display_name, row.role, row.status, row.group, row.quota) == \
        ("newbie", "newbie", 1, 1, "default", 777)
    assert row.deleted_at is None and row.access_token is None
    assert row.aff_code is not None and len(row.aff_code) == 8 and row.aff_code.isalnum()
    assert row.password != "secret-pass" and row.password.startswith("$argon2")
    newbie = await logged_in(app, "newbie", "secret-pass")
    assert data_of(await newbie.get("/api/user/self"))["quota"] == 777

    named = data_of(await admin.post("/api/user/", json={"username": "named", "password": "secret-pass",
                                                         "display_name": "Named One", "role": 1}))
    assert (await must_exist(app, named["id"])).display_name == "Named One"


async def test_create_checks_the_role(app: Running) -> None:
    root = await root_api(app)
    admin = await admin_api(app)
    before = data_of(await root.get("/api/user/"))["total"]

    for role in (0, 5, 100, 2):
        fails(await root.post("/api/user/", json={"username": f"r{role}", "password": "secret-pass",
                                                  "role": role}), 400, "role")
    for role_value in ("10", True, 1.5):
        fails(await root.post("/api/user/", json={"username": "typed", "password": "secret-pass",
                                                  "role": role_value}), 400, "role")
    peer = {"username": "peer", "password": "secret-pass", "role": 10}
    fails(await admin.post("/api/user/", json=peer), 403)
    assert data_of(await root.get("/api/user/"))["total"] == before

    made = data_of(await root.post("/api/user/", json=peer))
    assert (await must_exist(app, made["id"])).role == 10


async def test_create_refuses_invalid_fields(app: Running) -> None:
    admin = await admin_api(app)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"password": "secret-pass"}, "username"),
        ({"username": "x"}, "password"),
        ({"username": "", "password": "secret-pass"}, "username"),
        ({"username": "u" * 21, "password": "secret-pass"}, "username"),
        ({"username": "tab\tname", "password": "secret-pass"}, "username"),
        ({"username": "short", "password": "1234567"}, "password"),
        ({"username": "long", "password": "p" * 65}, "password"),
        ({"username": "disp", "password": "secret-pass", "display_name": "d" * 21}, "display_name"),
        ({"username": 12, "password": "secret-pass"}, "username"),
    ]
    for body, field in cases:
        fails(await admin.post("/api/user/", json=body), 400, field)
    fails(await admin.post("/api/user/", content=b"not json",
                           headers={"Content-Type": "application/json"}), 400)
    fails(await admin.post("/api/user/", json=["a"]), 400)
    assert data_of(await admin.get("/api/user/"))["total"] == 1

    edge = data_of(await admin.post("/api/user/", json={"username": "u" * 20, "password": "p" * 64}))
    assert (await must_exist(app, edge["id"])).username == "u" * 20


async def test_create_refuses_a_taken_username_even_a_deleted_ones(app: Running) -> None:
    admin = await admin_api(app)
    await add_user(app.state, "taken")
    gone = await add_user(app.state, "ghost")
    data_of(await admin.delete(f"/api/user/{gone}"))

    fails(await admin.post("/api/user/", json={"username": "taken", "password": "secret-pass"}), 409)
    fails(await admin.post("/api/user/", json={"username": "ghost", "password": "secret-pass"}), 409)
    everyone = data_of(await admin.get("/api/user/", params={"include_deleted": 1}))
    assert sorted(u["username"] for u in everyone["items"]) == ["admin", "ghost", "taken"]


async def test_concurrent_creates_of_one_username_make_one_user(app: Running) -> None:
    admin = await admin_api(app)
    replies = await asyncio.gather(*(
        admin.post("/api/user/", json={"username": "racer", "password": "secret-pass"}) for _ in range(5)
    ))
    statuses = sorted(r.status_code for r in replies)
    assert statuses == [200, 409, 409, 409, 409], [r.text for r in replies]
    found = data_of(await admin.get("/api/user/search", params={"keyword": "racer"}))
    assert found["total"] == 1


# ---- update -----------------------------------------------------------------------------------------

async def test_update_changes_only_the_fields_present(app: Running) -> None:
    root = await root_api(app)
    uid = await add_user(app.state, "editee", quota=10, group="default")
    await set_fields(app, uid, remark="old remark")
    before = await must_exist(app, uid)

    view = data_of(await root.put("/api/user/", json={"id": uid, "display_name": "Edited"}))
    assert set(view) == USER_FIELDS and view["password"] == ""
    assert (view["display_name"], view["username"], view["group"], view["remark"]) == \
        ("Edited", "editee", "default", "old remark")
    row = await must_exist(app, uid)
    assert (row.display_name, row.username, row.group, row.remark, row.password) == \
        ("Edited", "editee", "default", "old remark", before.password)

    view = data_of(await root.put("/api/user/", json={"id": uid, "group": "vip", "remark": "new remark",
                                                      "username": "renamed"}))
    assert (view["group"], view["remark"], view["username"], view["display_name"]) == \
        ("vip", "new remark", "renamed", "Edited")
    row = await must_exist(app, uid)
    assert (row.group, row.remark, row.username, row.display_name) == \
        ("vip", "new remark", "renamed", "Edited")
    assert data_of(await root.get(f"/api/user/{uid}")) == view
    # nothing but the id: a no-op that still answers the resource
    assert data_of(await root.put("/api/user/", json={"id": uid})) == view
    await logged_in(app, "renamed")


async def test_update_ignores_role_status_and_quota(app: Running) -> None:
    root = await root_api(app)
    uid = await add_user(app.state, "plain", quota=50)
    view = data_of(await root.put("/api/user/", json={
        "id": uid, "role": 100, "status": 2, "quota": 999999, "used_quota": 5, "deleted_at": 1,
        "DeletedAt": 1, "access_token": "x", "aff_code": "HACKED", "display_name": "Plain",
    }))
    assert (view["role"], view["status"], view["quota"], view["used_quota"], view["DeletedAt"]) == \
        (1, 1, 50, 0, None)
    row = await must_exist(app, uid)
    assert (row.role, row.status, row.quota, row.used_quota, row.deleted_at, row.access_token) == \
        (1, 1, 50, 0, None, None)
    assert row.aff_code != "HACKED" and row.display_name == "Plain"


async def test_update_checks_the_group_and_the_fields(app: Running) -> None:
    root = await root_api(app)
    uid = await add_user(app.state, "grouped")
    fails(await root.put("/api/user/", json={"id": uid, "group": "nonexistent"}), 400, "group")
    fails(await root.put("/api/user/", json={"id": uid, "display_name": "d" * 21}), 400, "display_name")
    fails(await root.put("/api/user/", json={"id": uid, "remark": "r" * 256}), 400, "remark")
    fails(await root.put("/api/user/", json={"id": uid, "username": "u" * 21}), 400, "username")
    fails(await root.put("/api/user/", json={"id": uid, "password": "short"}), 400, "password")
    fails(await root.put("/api/user/", json={"id": uid, "group": 5}), 400, "group")
    fails(await root.put("/api/user/", json={"display_name": "no id"}), 400, "id")
    fails(await root.put("/api/user/", json={"id": "abc"}), 400, "id")
    fails(await root.put("/api/user/", json={"id": 10**30, "display_name": "x"}), 400, "id")
    fails(await root.put("/api/user/", json={"id": uid + 1000, "display_name": "x"}), 404)
    row = await must_exist(app, uid)
    assert (row.group, row.display_name, row.remark, row.username) == ("default", "grouped", "", "grouped")

    # a group added to GroupRatio becomes assignable
    data_of(await root.put("/api/option/", json={"key": "GroupRatio",
                                                 "value": json.dumps({"default": 1, "gold": 2})}))
    assert data_of(await root.put("/api/user/", json={"id": uid, "group": "gold"}))["group"] == "gold"
    assert (await must_exist(app, uid)).group == "gold"
    fails(await root.put("/api/user/", json={"id": uid, "group": "vip"}), 400, "group")


async def test_update_refuses_a_taken_username_even_a_deleted_ones(app: Running) -> None:
    root = await root_api(app)
    uid = await add_user(app.state, "mover")
    await add_user(app.state, "taken")
    gone = await add_user(app.state, "ghost")
    data_of(await root.delete(f"/api/user/{gone}"))
    fails(await root.put("/api/user/", json={"id": uid, "username": "taken"}), 409)
    fails(await root.put("/api/user/", json={"id": uid, "username": "ghost"}), 409)
    assert (await must_exist(app, uid)).username == "mover"
    # keeping one's own name is not a conflict
    assert data_of(await root.put("/api/user/", json={"id": uid, "username": "mover"}))["username"] == "mover"


async def test_update_with_a_password_rehashes_it_and_revokes_the_targets_sessions(app: Running) -> None:
    root = await root_api(app)
    uid = await add_user(app.state, "victim")
    first = await logged_in(app, "victim")
    second = await logged_in(app, "victim")
    before = await must_exist(app, uid)

    data_of(await root.put("/api/user/", json={"id": uid, "password": "brand-new-pass"}))
    after = await must_exist(app, uid)
    assert after.password != before.password and after.password != "brand-new-pass"
    assert await alive(first) == 401
    assert await alive(second) == 401
    assert await alive(root) == 200
    fails(await app.client().login("victim", "password123"), 401)
    await logged_in(app, "victim", "brand-new-pass")


async def test_update_with_an_empty_password_keeps_it_and_the_sessions(app: Running) -> None:
    root = await root_api(app)
    uid = await add_user(app.state, "keeper")
    session = await logged_in(app, "keeper")
    before = await must_exist(app, uid)
    data_of(await root.put("/api/user/", json={"id": uid, "password": "", "display_name": "Keeper"}))
    after = await must_exist(app, uid)
    assert after.password == before.password and after.display_name == "Keeper"
    assert await alive(session) == 200
    await logged_in(app, "keeper")


# ---- delete -----------------------------------------------------------------------------------------

async def test_delete_soft_deletes_and_revokes_everything(app: Running) -> None:
    admin = await admin_api(app)
    uid = await add_user(app.state, "doomed", quota=99)
    session = await logged_in(app, "doomed")
    token_client = await with_token(app, session)
    assert await alive(token_client) == 200

    started = app.clock.now_s()
    assert data_of(await admin.delete(f"/api/user/{uid}")) is None
    finished = app.clock.now_s()
    row = await must_exist(app, uid)
    assert row.deleted_at is not None and started <= row.deleted_at <= finished
    assert row.access_token is None
    assert row.username == "doomed" and row.quota == 99  # kept, only hidden
    assert await alive(session) == 401
    assert await alive(token_client) == 401
    fails(await app.client().login("doomed", "password123"), 401)

    fails(await admin.delete(f"/api/user/{uid}"), 404)
    fails(await admin.get(f"/api/user/{uid}"), 404)
    fails(await admin.put("/api/user/", json={"id": uid, "display_name": "zombie"}), 404)
    fails(await manage(admin, uid, "enable"), 404)
    assert (await must_exist(app, uid)).status == 1 and (await must_exist(app, uid)).display_name == "doomed"


async def test_a_deleted_username_stays_reserved(app: Running) -> None:
    admin = await admin_api(app)
    uid = await add_user(app.state, "reserved")
    data_of(await admin.delete(f"/api/user/{uid}"))
    body = {"username": "reserved", "password": "secret-pass"}
    fails(await app.client().post("/api/user/register", json=body), 409)
    fails(await admin.post("/api/user/", json=body), 409)
    rows = data_of(await admin.get("/api/user/search", params={"keyword": "reserved", "include_deleted": 1}))
    assert rows["total"] == 1


async def test_delete_refuses_root_missing_and_malformed_targets(app: Running) -> None:
    root_id = await add_user(app.state, "root", role=100)
    root = await logged_in(app, "root")
    admin = await admin_api(app)
    fails(await root.delete(f"/api/user/{root_id}"), 403)
    fails(await admin.delete(f"/api/user/{root_id}"), 403)
    assert (await must_exist(app, root_id)).deleted_at is None
    assert await alive(root) == 200
    fails(await root.delete(f"/api/user/{root_id + 1000}"), 404)
    for bad in ("abc", "0"):
        fails(await root.delete(f"/api/user/{bad}"), 400, "id")


# ---- manage -----------------------------------------------------------------------------------------

async def test_disable_blocks_sessions_and_tokens_at_once_and_enable_restores_login(app: Running) -> None:
    admin = await admin_api(app)
    uid = await add_user(app.state, "target", quota=7)
    session = await logged_in(app, "target")
    token_client = await with_token(app, session)
    assert await alive(session) == 200 and await alive(token_client) == 200  # both cached as active

    reply = data_of(await manage(admin, uid, "disable"))
    assert reply == {"role": 1, "status": 2, "quota": 7}
    assert (await must_exist(app, uid)).status == 2
    assert await alive(session) == 401
    fails(await token_client.get("/api/user/self"), 403, "disabled")
    fails(await app.client().login("target", "password123"), 401)

    reply = data_of(await manage(admin, uid, "enable"))
    assert reply == {"role": 1, "status": 1, "quota": 7}
    assert (await must_exist(app, uid)).status == 1
    assert await alive(session) == 401  # revoked sessions stay revoked
    assert await alive(token_client) == 200
    await logged_in(app, "target")
    # enabling an enabled user is harmless
    assert data_of(await manage(admin, uid, "enable"))["status"] == 1


async def test_root_cannot_be_disabled_deleted_or_demoted(app: Running) -> None:
    root_id = await add_user(app.state, "root", role=100)
    root = await logged_in(app, "root")
    for action in ("disable", "delete", "demote"):
        fails(await manage(root, root_id, action), 403)
    row = await must_exist(app, root_id)
    assert (row.role, row.status, row.deleted_at) == (100, 1, None)
    assert await alive(root) == 200


async def test_manage_delete_is_a_soft_delete(app: Running) -> None:
    admin = await admin_api(app)
    uid = await add_user(app.state, "goner", quota=3)
    session = await logged_in(app, "goner")
    token_client = await with_token(app, session)
    reply = data_of(await manage(admin, uid, "delete"))
    assert set(reply) == MANAGE_REPLY and reply["quota"] == 3
    row = await must_exist(app, uid)
    assert row.deleted_at is not None and row.access_token is None
    assert await alive(session) == 401 and await alive(token_client) == 401
    fails(await admin.get(f"/api/user/{uid}"), 404)
    fails(await manage(admin, uid, "delete"), 404)
    fails(await admin.post("/api/user/", json={"username": "goner", "password": "secret-pass"}), 409)


async def test_promote_is_for_root_only(app: Running) -> None:
    root = await root_api(app)
    admin = await admin_api(app)
    uid = await add_user(app.state, "climber")
    session = await logged_in(app, "climber")

    fails(await manage(admin, uid, "promote"), 403)
    assert (await must_exist(app, uid)).role == 1

    assert data_of(await manage(root, uid, "promote")) == {"role": 10, "status": 1, "quota": 0}
    assert (await must_exist(app, uid)).role == 10
    fails(await manage(root, uid, "promote"), 409)
    assert (await must_exist(app, uid)).role == 10
    # the promoted user's next request sees the new role (admin route admits them)
    assert data_of(await session.get("/api/user/"))["total"] == 3


async def test_demote_lowers_an_admin_and_revokes_their_sessions(app: Running) -> None:
    root = await root_api(app)
    uid = await add_user(app.state, "fallen", role=10)
    session = await logged_in(app, "fallen")
    assert data_of(await session.get("/api/user/"))["total"] == 2

    assert data_of(await manage(root, uid, "demote")) == {"role": 1, "status": 1, "quota": 0}
    assert (await must_exist(app, uid)).role == 1
    assert await alive(session) == 401
    again = await logged_in(app, "fallen")
    fails(await again.get("/api/user/"), 403)
    fails(await manage(root, uid, "demote"), 409)
    assert (await must_exist(app, uid)).role == 1


async def test_manage_refuses_unknown_actions_and_missing_targets(app: Running) -> None:
    admin = await admin_api(app)
    uid = await add_user(app.state, "someone", quota=5)
    for action in ("explode", "", "DISABLE"):
        fails(await manage(admin, uid, action), 400, "action")
    fails(await admin.post("/api/user/manage", json={"id": uid}), 400, "action")
    fails(await admin.post("/api/user/manage", json={"action": "disable"}), 400, "id")
    fails(await admin.post("/api/user/manage", json={"id": "x", "action": "disable"}), 400, "id")
    fails(await admin.post("/api/user/manage", json={"id": 10**30, "action": "disable"}), 400, "id")
    fails(await manage(admin, uid + 1000, "disable"), 404)
    fails(await manage(admin, uid + 1000, "add_quota", mode="add", value=1), 404)
    row = await must_exist(app, uid)
    assert (row.status, row.quota) == (1, 5)


# ---- add_quota --------------------------------------------------------------------------------------

async def test_add_quota_adds_subtracts_and_overrides_exactly(app: Running) -> None:
    admin = await admin_api(app)
    uid = await add_user(app.state, "payee", quota=100)

    assert data_of(await manage(admin, uid, "add_quota", mode="add", value=25)) == \
        {"role": 1, "status": 1, "quota": 125}
    assert await balance(app, admin, uid) == 125
    assert data_of(await manage(admin, uid, "add_quota", mode="subtract", value=20))["quota"] == 105
    assert await balance(app, admin, uid) == 105
    assert data_of(await manage(admin, uid, "add_quota", mode="subtract", value=105))["quota"] == 0
    assert await balance(app, admin, uid) == 0
    assert data_of(await manage(admin, uid, "add_quota", mode="override", value=5000))["quota"] == 5000
    assert await balance(app, admin, uid) == 5000
    assert data_of(await manage(admin, uid, "add_quota", mode="override", value=0))["quota"] == 0
    assert await balance(app, admin, uid) == 0
    big = 10**12
    assert data_of(await manage(admin, uid, "add_quota", mode="add", value=big))["quota"] == big
    assert await balance(app, admin, uid) == big


async def test_add_quota_refuses_subtracting_above_the_balance(app: Running) -> None:
    admin = await admin_api(app)
    uid = await add_user(app.state, "poor", quota=30)
    fails(await manage(admin, uid, "add_quota", mode="subtract", value=31), 409)
    assert await balance(app, admin, uid) == 30
    assert data_of(await manage(admin, uid, "add_quota", mode="subtract", value=30))["quota"] == 0


async def test_add_quota_refuses_bad_modes_and_values(app: Running) -> None:
    admin = await admin_api(app)
    uid = await add_user(app.state, "exact", quota=40)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"value": 5}, "mode"),
        ({"mode": "multiply", "value": 5}, "mode"),
        ({"mode": "", "value": 5}, "mode"),
        ({"mode": 3, "value": 5}, "mode"),
        ({"mode": "add"}, "value"),
        ({"mode": "add", "value": 0}, "value"),
        ({"mode": "add", "value": -5}, "value"),
        ({"mode": "subtract", "value": 0}, "value"),
        ({"mode": "subtract", "value": -5}, "value"),
        ({"mode": "override", "value": -1}, "value"),
        ({"mode": "override"}, "value"),
        ({"mode": "add", "value": "5"}, "value"),
        ({"mode": "add", "value": 1.5}, "value"),
        ({"mode": "add", "value": True}, "value"),
        ({"mode": "add", "value": 10**30}, "value"),
        ({"mode": "add", "value": 10**15 + 1}, "value"),
        ({"mode": "override", "value": 2**63}, "value"),
    ]
    for extra, field in cases:
        fails(await manage(admin, uid, "add_quota", **extra), 400, field)
    assert await balance(app, admin, uid) == 40


async def test_add_quota_never_overflows_the_balance(app: Running) -> None:
    admin = await admin_api(app)
    uid = await add_user(app.state, "rich")
    near_max = 2**53 - 10  # the engine keeps balances where its arithmetic is exact
    await set_fields(app, uid, quota=near_max)
    response = await manage(admin, uid, "add_quota", mode="add", value=10**15)
    assert response.status_code == 409, response.text
    assert "largest supported amount" in response.json()["message"]
    assert await balance(app, admin, uid) == near_max


async def test_concurrent_adds_each_apply_exactly_once(app: Running) -> None:
    admin = await admin_api(app)
    initial = 1000
    uid = await add_user(app.state, "crowd", quota=initial)
    replies = await asyncio.gather(*(manage(admin, uid, "add_quota", mode="add", value=7) for _ in range(20)))
    assert [r.status_code for r in replies] == [200] * 20, [r.text for r in replies if r.status_code != 200]
    balances = sorted(data_of(r)["quota"] for r in replies)
    assert balances == [initial + 7 * n for n in range(1, 21)]  # each reply saw its own step
    assert await balance(app, admin, uid) == initial + 140


async def test_concurrent_subtracts_never_drive_the_balance_below_zero(app: Running) -> None:
    admin = await admin_api(app)
    initial, amount, attempts = 50, 7, 20
    uid = await add_user(app.state, "drained", quota=initial)
    replies = await asyncio.gather(*(
        manage(admin, uid, "add_quota", mode="subtract", value=amount) for _ in range(attempts)
    ))
    statuses = [r.status_code for r in replies]
    assert set(statuses) <= {200, 409}, [r.text for r in replies]
    granted = statuses.count(200)
    assert granted == initial // amount
    assert statuses.count(409) == attempts - granted
    final = await balance(app, admin, uid)
    assert final == initial - granted * amount
    assert final >= 0
    assert sorted(data_of(r)["quota"] for r in replies if r.status_code == 200) == \
        [initial - amount * n for n in range(granted, 0, -1)]


async def test_concurrent_mixed_adds_and_subtracts_balance_out(app: Running) -> None:
    admin = await admin_api(app)
    uid = await add_user(app.state, "mixed", quota=0)
    calls = [manage(admin, uid, "add_quota", mode="add", value=5) for _ in range(10)]
    calls += [manage(admin, uid, "add_quota", mode="subtract", value=3) for _ in range(10)]
    replies = await asyncio.gather(*calls)
    adds, subs = replies[:10], replies[10:]
    assert all(r.status_code == 200 for r in adds), [r.text for r in adds]
    assert {r.status_code for r in subs} <= {200, 409}
    granted = sum(r.status_code == 200 for r in subs)
    final = await balance(app, admin, uid)
    assert final == 50 - 3 * granted and final >= 0
