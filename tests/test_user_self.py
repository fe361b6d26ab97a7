"""The self routes `GET/PUT/DELETE /api/user/self` follow docs/api/accounts.md#self-routes on every stack.

Proved here, over HTTP against the real app on SQLite, MariaDB+Redis and PostgreSQL+Redis:
- the self view has exactly the fields of the `SelfView` schema — never `password`, `access_token` or
  `remark` — and the `permissions` shape of the caller's role;
- `PUT` changes only the non-empty fields present; a username change is refused when the name is taken (even
  by a deleted user); a password change needs the right `original_password`, revokes the caller's other
  sessions and keeps the calling one alive under a rotated cookie; `sidebar_modules`/`language` merge into
  the stored settings;
- `DELETE` soft-deletes the caller, clears the cookie and kills the session and the access token; root is
  refused.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from models.tables import User
from models.users import UserRepository
from tests.harness import Api, Running, add_user, data_of, fails, logged_in

SELF_FIELDS = {
    "id", "username", "display_name", "role", "status", "email", "group", "quota", "used_quota",
    "request_count", "aff_code", "aff_count", "aff_quota", "aff_history_quota", "inviter_id", "setting",
    "stripe_customer", "created_at", "last_login_at", "sidebar_modules", "permissions",
}
PERMISSIONS = {
    1: {"sidebar_settings": True, "sidebar_modules": {"admin": False}},
    10: {"sidebar_settings": True, "sidebar_modules": {"admin": {"setting": False}}},
    100: {"sidebar_settings": False, "sidebar_modules": {}},
}


# ---- helpers (local to this file) -------------------------------------------------------------------


async def stored(app: Running, user_id: int) -> User:
    """The user row as SQL holds it once the quota sync caught up (deleted ones included)."""
    await app.state.quota_sync.drain()
    async with app.state.db.transaction() as tx:
        user = await UserRepository(tx).get(user_id, include_deleted=True)
    assert user is not None
    return user


async def set_fields(app: Running, user_id: int, **values: Any) -> None:
    """Seed columns that no route under test sets (remark, settings, …)."""
    async with app.state.db.transaction() as tx:
        await UserRepository(tx).update_fields(user_id, **values)


async def with_token(app: Running, api: Api) -> Api:
    """A second client of the same user authenticated only by a fresh access token."""
    token = data_of(await api.get("/api/user/token"))
    assert isinstance(token, str) and len(token) >= 32
    client = app.client()
    client.user_id, client.token = api.user_id, token
    return client


def cookie_of(api: Api) -> str:
    value = api.http.cookies.get("session")
    assert value, "the client holds no session cookie"
    return str(value)


def with_cookie(app: Running, user_id: int | None, value: str) -> Api:
    """A fresh client presenting exactly this session cookie value."""
    client = app.client(cookies={"session": value})
    client.user_id = user_id
    return client


def session_cookie_header(response: httpx.Response) -> str:
    headers = [h for h in response.headers.get_list("set-cookie") if h.startswith("session=")]
    assert len(headers) == 1, response.headers.get_list("set-cookie")
    return headers[0]


async def alive(api: Api) -> int:
    """The status `GET /api/user/self` answers for this caller (200 = still authenticated)."""
    return (await api.get("/api/user/self")).status_code


# ---- GET --------------------------------------------------------------------------------------------

async def test_self_view_has_exactly_the_documented_fields(app: Running) -> None:
    uid = await add_user(app.state, "me", quota=1234, group="vip")
    await set_fields(app, uid, remark="secret admin note", email="me@example.com", used_quota=7,
                     request_count=3, stripe_customer="cus_1")
    me = await logged_in(app, "me")
    await with_token(app, me)
    row = await stored(app, uid)
    assert row.access_token

    response = await me.get("/api/user/self")
    view = data_of(response)
    assert set(view) == SELF_FIELDS
    assert view == {
        "id": uid, "username": "me", "display_name": "me", "role": 1, "status": 1, "email": "me@example.com",
        "group": "vip", "quota": 1234, "used_quota": 7, "request_count": 3, "aff_code": row.aff_code,
        "aff_count": 0, "aff_quota": 0, "aff_history_quota": 0, "inviter_id": 0, "setting": "",
        "stripe_customer": "cus_1", "created_at": row.created_at, "last_login_at": row.last_login_at,
        "sidebar_modules": "", "permissions": PERMISSIONS[1],
    }
    assert row.last_login_at > 0
    for secret in ("password", "access_token", "remark", "secret admin note", row.access_token,
                   row.password):
        assert secret not in response.text


async def test_permissions_follow_the_callers_role(app: Running) -> None:
    for name, role in (("common", 1), ("admin", 10), ("root", 100)):
        await add_user(app.state, name, role=role)
        view = data_of(await (await logged_in(app, name)).get("/api/user/self"))
        assert view["role"] == role
        assert view["permissions"] == PERMISSIONS[role]


async def test_self_routes_need_a_login(app: Running) -> None:
    anonymous = app.client()
    fails(await anonymous.get("/api/user/self"), 401)
    fails(await anonymous.put("/api/user/self", json={"display_name": "x"}), 401)
    fails(await anonymous.delete("/api/user/self"), 401)


# ---- PUT: names -------------------------------------------------------------------------------------

async def test_put_self_changes_the_names_present(app: Running) -> None:
    uid = await add_user(app.state, "old-name")
    me = await logged_in(app, "old-name")

    view = data_of(await me.put("/api/user/self", json={"display_name": "  Shown  "}))
    assert set(view) == SELF_FIELDS
    assert (view["display_name"], view["username"]) == ("Shown", "old-name")
    row = await stored(app, uid)
    assert (row.display_name, row.username) == ("Shown", "old-name")

    view = data_of(await me.put("/api/user/self", json={"username": "new-name"}))
    assert (view["display_name"], view["username"]) == ("Shown", "new-name")
    assert (await stored(app, uid)).username == "new-name"
    assert data_of(await me.get("/api/user/self")) == view
    fails(await app.client().login("old-name", "password123"), 401)
    await logged_in(app, "new-name")

    # empty and absent fields change nothing
    before = await stored(app, uid)
    view = data_of(await me.put("/api/user/self", json={"username": "", "display_name": "", "password": ""}))
    after = await stored(app, uid)
    assert (after.username, after.display_name, after.password, after.setting) == \
        (before.username, before.display_name, before.password, before.setting)
    assert (view["username"], view["display_name"]) == ("new-name", "Shown")
    assert await alive(me) == 200


async def test_put_self_refuses_a_taken_or_invalid_username(app: Running) -> None:
    uid = await add_user(app.state, "mover")
    await add_user(app.state, "taken")
    ghost = await add_user(app.state, "ghost")
    await add_user(app.state, "root", role=100)
    root = await logged_in(app, "root")
    data_of(await root.delete(f"/api/user/{ghost}"))
    me = await logged_in(app, "mover")

    fails(await me.put("/api/user/self", json={"username": "taken"}), 409)
    fails(await me.put("/api/user/self", json={"username": "ghost"}), 409)
    fails(await me.put("/api/user/self", json={"username": "u" * 21}), 400, "username")
    fails(await me.put("/api/user/self", json={"username": 5}), 400, "username")
    fails(await me.put("/api/user/self", json={"display_name": "d" * 21}), 400, "display_name")
    fails(await me.put("/api/user/self", content=b"{not json",
                       headers={"Content-Type": "application/json"}), 400)
    row = await stored(app, uid)
    assert (row.username, row.display_name) == ("mover", "mover")
    # a combined edit is all or nothing
    fails(await me.put("/api/user/self", json={"display_name": "New", "username": "taken"}), 409)
    assert (await stored(app, uid)).display_name == "mover"
    # one's own current name is not a conflict
    assert data_of(await me.put("/api/user/self", json={"username": "mover"}))["username"] == "mover"


# ---- PUT: password ----------------------------------------------------------------------------------

async def test_password_change_needs_the_right_original_password(app: Running) -> None:
    uid = await add_user(app.state, "careful")
    me = await logged_in(app, "careful")
    other = await logged_in(app, "careful")
    before = (await stored(app, uid)).password

    fails(await me.put("/api/user/self", json={"password": "new-password-1"}), 400, "original_password")
    fails(await me.put("/api/user/self", json={"password": "new-password-1", "original_password": ""}), 400,
          "original_password")
    fails(await me.put("/api/user/self", json={"password": "new-password-1",
                                               "original_password": "wrong-password"}), 403)
    for bad in ("short", "p" * 65):
        body = {"password": bad, "original_password": "password123"}
        fails(await me.put("/api/user/self", json=body), 400, "password")
    # a refused password change takes nothing else with it
    fails(await me.put("/api/user/self", json={"display_name": "Changed", "password": "new-password-1",
                                               "original_password": "wrong-password"}), 403)

    row = await stored(app, uid)
    assert row.password == before and row.display_name == "careful"
    assert await alive(me) == 200 and await alive(other) == 200
    await logged_in(app, "careful")


async def test_password_change_keeps_the_calling_session_under_a_rotated_cookie(app: Running) -> None:
    uid = await add_user(app.state, "rotator")
    await add_user(app.state, "bystander")
    me = await logged_in(app, "rotator")
    other = await logged_in(app, "rotator")
    stranger = await logged_in(app, "bystander")
    old_cookie = cookie_of(me)
    before = (await stored(app, uid)).password

    response = await me.put("/api/user/self", json={"password": "new-password-1",
                                                    "original_password": "password123"})
    view = data_of(response)
    assert set(view) == SELF_FIELDS and view["id"] == uid
    assert "new-password-1" not in response.text
    header = session_cookie_header(response)
    assert "HttpOnly" in header and "SameSite=Strict" in header and "Max-Age=2592000" in header
    new_cookie = cookie_of(me)
    assert new_cookie != old_cookie and f"session={new_cookie}" in header

    after = (await stored(app, uid)).password
    assert after != before and after != "new-password-1"
    assert await alive(me) == 200  # the calling session lives on under the new cookie
    assert await alive(with_cookie(app, uid, new_cookie)) == 200
    assert await alive(with_cookie(app, uid, old_cookie)) == 401  # its old id is gone
    assert await alive(other) == 401  # every other session is revoked
    assert await alive(stranger) == 200  # other users are untouched
    fails(await app.client().login("rotator", "password123"), 401)
    await logged_in(app, "rotator", "new-password-1")


async def test_password_change_over_an_access_token_revokes_every_session(app: Running) -> None:
    uid = await add_user(app.state, "scripted")
    session = await logged_in(app, "scripted")
    token_client = await with_token(app, session)

    response = await token_client.put("/api/user/self", json={"password": "new-password-1",
                                                              "original_password": "password123"})
    assert data_of(response)["id"] == uid
    assert response.headers.get_list("set-cookie") == []
    assert await alive(session) == 401
    await logged_in(app, "scripted", "new-password-1")


# ---- PUT: settings ----------------------------------------------------------------------------------

async def test_sidebar_modules_and_language_merge_into_the_settings(app: Running) -> None:
    uid = await add_user(app.state, "tuner")
    await set_fields(app, uid, setting=json.dumps({"notify_type": "email", "language": "fr"}))
    me = await logged_in(app, "tuner")

    view = data_of(await me.put("/api/user/self", json={"language": "en"}))
    assert json.loads(view["setting"]) == {"notify_type": "email", "language": "en"}
    assert json.loads((await stored(app, uid)).setting) == {"notify_type": "email", "language": "en"}
    assert view["sidebar_modules"] == ""

    modules = {"chat": {"enabled": True}, "admin": {"channel": False}}
    view = data_of(await me.put("/api/user/self", json={"sidebar_modules": modules}))
    expected = {"notify_type": "email", "language": "en", "sidebar_modules": modules}
    assert json.loads(view["setting"]) == expected
    assert view["sidebar_modules"] == modules
    assert json.loads((await stored(app, uid)).setting) == expected
    again = data_of(await me.get("/api/user/self"))
    assert again["sidebar_modules"] == modules and json.loads(again["setting"]) == expected

    # the text form new-api's UI sends is kept as given
    text = json.dumps({"chat": {"enabled": False}})
    view = data_of(await me.put("/api/user/self", json={"sidebar_modules": text, "display_name": "Tuned"}))
    assert view["sidebar_modules"] == text and view["display_name"] == "Tuned"
    stored_setting = json.loads((await stored(app, uid)).setting)
    assert stored_setting == {"notify_type": "email", "language": "en", "sidebar_modules": text}

    # empty values are "not present": the settings stay as they are
    before = (await stored(app, uid)).setting
    view = data_of(await me.put("/api/user/self", json={"language": "", "sidebar_modules": ""}))
    assert (await stored(app, uid)).setting == before and view["setting"] == before


async def test_settings_fields_are_type_checked(app: Running) -> None:
    uid = await add_user(app.state, "strict")
    me = await logged_in(app, "strict")
    fails(await me.put("/api/user/self", json={"sidebar_modules": ["chat"]}), 400, "sidebar_modules")
    fails(await me.put("/api/user/self", json={"sidebar_modules": 3}), 400, "sidebar_modules")
    fails(await me.put("/api/user/self", json={"language": 3}), 400, "language")
    fails(await me.put("/api/user/self", json={"language": "x" * 17}), 400, "language")
    assert (await stored(app, uid)).setting == ""


# ---- DELETE -----------------------------------------------------------------------------------------

async def test_delete_self_soft_deletes_and_ends_the_session(app: Running) -> None:
    uid = await add_user(app.state, "leaver", quota=10)
    me = await logged_in(app, "leaver")
    other = await logged_in(app, "leaver")
    token_client = await with_token(app, me)
    old_cookie = cookie_of(me)

    started = app.clock.now_s()
    response = await me.delete("/api/user/self")
    finished = app.clock.now_s()
    assert data_of(response) is None
    header = session_cookie_header(response)
    assert header.startswith("session=;") or header.startswith('session="";')
    assert "Max-Age=0" in header

    row = await stored(app, uid)
    assert row.deleted_at is not None and started <= row.deleted_at <= finished
    assert row.access_token is None
    assert (row.username, row.quota) == ("leaver", 10)
    assert await app.state.sessions.get(old_cookie) is None
    assert await alive(with_cookie(app, uid, old_cookie)) == 401
    assert await alive(other) == 401
    assert await alive(token_client) == 401
    fails(await app.client().login("leaver", "password123"), 401)
    body = {"username": "leaver", "password": "secret-pass"}
    fails(await app.client().post("/api/user/register", json=body), 409)


async def test_root_cannot_delete_itself(app: Running) -> None:
    root_id = await add_user(app.state, "root", role=100)
    root = await logged_in(app, "root")
    response = await root.delete("/api/user/self")
    fails(response, 403)
    assert [h for h in response.headers.get_list("set-cookie") if "Max-Age=0" in h] == []
    assert (await stored(app, root_id)).deleted_at is None
    assert await alive(root) == 200


async def test_an_admin_can_delete_itself(app: Running) -> None:
    uid = await add_user(app.state, "admin", role=10)
    admin = await logged_in(app, "admin")
    data_of(await admin.delete("/api/user/self"))
    assert (await stored(app, uid)).deleted_at is not None
    fails(await app.client().login("admin", "password123"), 401)
