"""Login, logout, registration, access tokens and the session guard
(docs/api/auth.md#authentication-and-sessions) over HTTP.

Proves, on every stack (SQLite with SQL sessions; MariaDB and PostgreSQL with Redis):
- login answers the user and a `session` cookie with the attributes of docs/api/auth.md#sessions; wrong
  password, unknown, disabled and deleted accounts get one identical 401; e-mail login is case-insensitive; 10
  failures per (account, client IP) lock the 11th attempt with 429 + `Retry-After`; a correct login clears the
  count; login rotates the session; `PasswordLoginEnabled=false` is a 403;
- logout deletes the server-side session and clears the cookie, with or without one;
- registration validates, refuses duplicates (deleted users included), honours the switches, pays the
  invitation rewards to the right columns, does not log in, and stays unique under concurrency;
- access tokens are 32 url-safe chars, work with and without `Bearer`, are stored only as a keyed digest
  and die when replaced; `New-Api-User` is enforced on user routes only; a session cookie wins over a bad
  `Authorization`; disabling a user ends their session at once (revoked in the store, not just hidden)
  and turns their token into a 403; a promotion rotates the session on the next request.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from models.tables import User
from models.users import UserRepository
from server.context import State
from tests.conftest import Stack
from tests.harness import Api, Running, add_user, logged_in, make_config, serve

PASSWORD = "password123"
INVALID_LOGIN = {"success": False, "message": "invalid username or password"}
SESSION_TTL = 2_592_000

# ---- helpers (candidates for tests/harness.py) -----------------------------------------------------


@dataclass(frozen=True)
class SetCookie:
    value: str
    attrs: dict[str, str]  # lower-cased attribute name → value ("" for flags)


def session_set_cookie(response: httpx.Response) -> SetCookie | None:
    """The `session` cookie the response sets, if any."""
    for header in response.headers.get_list("set-cookie"):
        first, *rest = [part.strip() for part in header.split(";")]
        name, _, value = first.partition("=")
        if name == "session":
            attrs = {}
            for part in rest:
                key, _, val = part.partition("=")
                attrs[key.lower()] = val
            return SetCookie(value.strip('"'), attrs)
    return None


async def login_cookie(app: Running, username: str, password: str = PASSWORD) -> tuple[Api, str]:
    """A logged-in client and the raw value of its session cookie."""
    api = app.client()
    response = await api.login(username, password)
    assert response.status_code == 200, response.text
    cookie = session_set_cookie(response)
    assert cookie is not None
    return api, cookie.value


async def self_with_cookie(app: Running, raw: str, user_id: int) -> httpx.Response:
    """`GET /api/user/self` from a fresh client that sends exactly this session cookie."""
    return await app.client().get("/api/user/self",
                                  headers={"Cookie": f"session={raw}", "New-Api-User": str(user_id)})


async def self_with_token(app: Running, authorization: str, user_id: int | None) -> httpx.Response:
    headers = {"Authorization": authorization}
    if user_id is not None:
        headers["New-Api-User"] = str(user_id)
    return await app.client().get("/api/user/self", headers=headers)


async def user_row(state: State, user_id: int) -> User:
    async with state.db.transaction() as tx:
        user = await UserRepository(tx).get(user_id, include_deleted=True)
    assert user is not None
    return user


async def users_named(state: State, username: str) -> list[User]:
    async with state.db.transaction() as tx:
        return list((await tx.scalars(select(User).where(User.username == username))).all())


async def user_count(state: State) -> int:
    async with state.db.transaction() as tx:
        return len((await tx.scalars(select(User.id))).all())


async def set_fields(state: State, user_id: int, **values: Any) -> None:
    async with state.db.transaction() as tx:
        await UserRepository(tx).update_fields(user_id, **values)
    await state.users.invalidate(user_id)


async def soft_delete(state: State, user_id: int) -> None:
    await set_fields(state, user_id, deleted_at=state.clock.now_s())


async def root_client(app: Running) -> Api:
    await add_user(app.state, "root", role=100)
    return await logged_in(app, "root")


@pytest.fixture
async def proxied_app(stack: Stack, tmp_path: Path) -> AsyncIterator[Running]:
    """The app on every stack, trusting 127.0.0.1 as a proxy so tests can choose the client IP."""
    config = make_config(stack.database_url, tmp_path, stack.redis_url, stack.prefix,
                         trusted_proxies=(ipaddress.ip_network("127.0.0.1/32"),))
    async with serve(config) as running:
        yield running


# ---- login ------------------------------------------------------------------------------------------

async def test_login_returns_the_user_and_a_session_cookie(app: Running) -> None:
    uid = await add_user(app.state, "alice", group="vip")
    api = app.client()
    response = await api.post("/api/user/login", json={"username": "  alice ", "password": PASSWORD})
    assert response.status_code == 200, response.text
    assert response.json() == {"success": True, "message": "", "data": {
        "id": uid, "username": "alice", "display_name": "alice", "role": 1, "status": 1, "group": "vip",
    }}
    cookie = session_set_cookie(response)
    assert cookie is not None
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", cookie.value)  # 32 random bytes, base64url
    assert cookie.attrs.get("path") == "/"
    assert cookie.attrs.get("max-age") == str(SESSION_TTL)
    assert cookie.attrs.get("samesite") == "Strict"
    assert "httponly" in cookie.attrs
    assert "secure" not in cookie.attrs  # plain http

    record = await app.state.sessions.get(cookie.value)
    assert record is not None and record["id"] == uid and record["role"] == 1
    assert record["auth_method"] == "password"
    assert (await user_row(app.state, uid)).last_login_at > 0

    me = await api.get("/api/user/self", headers={"New-Api-User": str(uid)})
    assert me.status_code == 200, me.text
    assert me.json()["data"]["id"] == uid


async def test_login_cookie_is_secure_behind_an_https_public_url(embedded_stack: Stack,
                                                                tmp_path: Path) -> None:
    config = make_config(embedded_stack.database_url, tmp_path, public_url="https://gw.example.com")
    async with serve(config) as app:
        await add_user(app.state, "alice")
        response = await app.client().login("alice", PASSWORD)
        assert response.status_code == 200, response.text
        cookie = session_set_cookie(response)
        assert cookie is not None and "secure" in cookie.attrs


async def test_login_cookie_is_secure_when_the_server_address_option_is_https(app: Running) -> None:
    """`ServerAddress` says where users reach the site as much as `PUBLIC_URL` does, and it changes at run
    time: the cookie follows the current value."""
    await add_user(app.state, "root", role=100)
    await add_user(app.state, "alice")
    root = await logged_in(app, "root")

    async def cookies_with(address: str) -> tuple[SetCookie, SetCookie]:
        changed = await root.put("/api/option/", json={"key": "ServerAddress", "value": address})
        assert changed.status_code == 200, changed.text
        api = app.client()
        login = await api.login("alice", PASSWORD)
        assert login.status_code == 200, login.text
        logout = await api.get("/api/user/logout")
        assert logout.status_code == 200, logout.text
        set_, cleared = session_set_cookie(login), session_set_cookie(logout)
        assert set_ is not None and cleared is not None
        return set_, cleared

    for cookie in await cookies_with("https://gw.example.com"):
        assert "secure" in cookie.attrs
    for cookie in await cookies_with("http://gw.example.com"):
        assert "secure" not in cookie.attrs


async def test_login_failures_are_indistinguishable(app: Running) -> None:
    await add_user(app.state, "alice")
    await add_user(app.state, "bob", status=2)
    carol = await add_user(app.state, "carol")
    await set_fields(app.state, carol, email="carol@example.com")
    await soft_delete(app.state, carol)
    attempts = [
        ("alice", "wrong-password"),      # wrong password
        ("nobody", PASSWORD),             # unknown account
        ("bob", PASSWORD),                # disabled, right password
        ("carol", PASSWORD),              # deleted, right password
        ("carol@example.com", PASSWORD),  # deleted, by e-mail
    ]
    for username, password in attempts:
        response = await app.client().login(username, password)
        assert response.status_code == 401, (username, response.text)
        assert response.json() == INVALID_LOGIN, username
        assert session_set_cookie(response) is None, username


async def test_login_by_email_is_case_insensitive(app: Running) -> None:
    uid = await add_user(app.state, "alice")
    await set_fields(app.state, uid, email="Alice@Example.COM")
    for name in ("alice@example.com", "  ALICE@example.com  "):
        response = await app.client().login(name, PASSWORD)
        assert response.status_code == 200, (name, response.text)
        assert response.json()["data"]["id"] == uid
    wrong = await app.client().login("alice@example.com", "wrong-password")
    assert wrong.status_code == 401 and wrong.json() == INVALID_LOGIN


@pytest.mark.parametrize(("body", "field"), [
    ({"password": PASSWORD}, "username"),
    ({"username": "   ", "password": PASSWORD}, "username"),
    ({"username": 7, "password": PASSWORD}, "username"),
    ({"username": "alice"}, "password"),
    ({"username": "alice", "password": ""}, "password"),
    ({"username": "alice", "password": ["x"]}, "password"),
], ids=["no username", "blank username", "username not a string", "no password", "empty password",
        "password not a string"])
async def test_login_rejects_an_invalid_body(embedded_app: Running, body: dict[str, Any],
                                             field: str) -> None:
    await add_user(embedded_app.state, "alice")
    response = await embedded_app.client().post("/api/user/login", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["message"].startswith(f"{field}: ")
    assert session_set_cookie(response) is None


async def test_login_rejects_a_body_that_is_not_json(embedded_app: Running) -> None:
    response = await embedded_app.client().post("/api/user/login", content=b"username=alice",
                                                headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert response.json() == {"success": False, "message": "request body is not valid JSON"}


async def test_ten_failures_lock_the_account_even_for_the_right_password(app: Running) -> None:
    uid = await add_user(app.state, "alice")
    await set_fields(app.state, uid, email="alice@example.com")
    await add_user(app.state, "bob")
    # Failures by username and by e-mail count against the same account.
    for name in ["alice"] * 5 + ["alice@example.com"] * 5:
        response = await app.client().login(name, "wrong-password")
        assert response.status_code == 401, response.text
    locked = await app.client().login("alice", PASSWORD)
    assert locked.status_code == 429, locked.text
    assert locked.json() == {"success": False, "message": "too many failed logins, try again later"}
    assert 1 <= int(locked.headers["retry-after"]) <= 900
    assert session_set_cookie(locked) is None
    assert (await app.client().login("alice@example.com", PASSWORD)).status_code == 429
    # Another account from the same IP is not affected.
    assert (await app.client().login("bob", PASSWORD)).status_code == 200


async def test_unknown_names_are_counted_lower_cased(app: Running) -> None:
    for name in ["Ghost"] * 5 + ["ghost"] * 5:
        assert (await app.client().login(name, "whatever1")).status_code == 401
    response = await app.client().login("GHOST", "whatever1")
    assert response.status_code == 429, response.text
    assert int(response.headers["retry-after"]) >= 1


async def test_lockout_counts_per_client_ip(proxied_app: Running) -> None:
    app = proxied_app
    await add_user(app.state, "alice")
    attacker = {"X-Forwarded-For": "203.0.113.7"}
    owner = {"X-Forwarded-For": "198.51.100.20"}
    for _ in range(10):
        response = await app.client().post("/api/user/login", headers=attacker,
                                           json={"username": "alice", "password": "wrong-password"})
        assert response.status_code == 401, response.text
    from_attacker = await app.client().post("/api/user/login", headers=attacker,
                                            json={"username": "alice", "password": PASSWORD})
    assert from_attacker.status_code == 429, from_attacker.text
    assert "retry-after" in from_attacker.headers
    from_owner = await app.client().post("/api/user/login", headers=owner,
                                         json={"username": "alice", "password": PASSWORD})
    assert from_owner.status_code == 200, from_owner.text


async def test_a_correct_login_clears_the_failure_count(app: Running) -> None:
    await add_user(app.state, "alice")
    for _ in range(9):
        assert (await app.client().login("alice", "wrong-password")).status_code == 401
    assert (await app.client().login("alice", PASSWORD)).status_code == 200
    # Had the count survived, this 10th failure would lock the account and the login below get a 429.
    assert (await app.client().login("alice", "wrong-password")).status_code == 401
    response = await app.client().login("alice", PASSWORD)
    assert response.status_code == 200, response.text


async def test_login_rotates_the_session(app: Running) -> None:
    uid = await add_user(app.state, "alice")
    api, first = await login_cookie(app, "alice")
    again = await api.login("alice", PASSWORD)  # the client sends its current cookie
    assert again.status_code == 200, again.text
    second = session_set_cookie(again)
    assert second is not None and second.value != first
    assert await app.state.sessions.get(first) is None
    assert (await self_with_cookie(app, first, uid)).status_code == 401
    assert (await self_with_cookie(app, second.value, uid)).status_code == 200


async def test_password_login_can_be_switched_off(app: Running) -> None:
    root = await root_client(app)
    await add_user(app.state, "alice")
    off = await root.put("/api/option/", json={"key": "PasswordLoginEnabled", "value": False})
    assert off.status_code == 200, off.text
    refused = await app.client().login("alice", PASSWORD)
    assert refused.status_code == 403
    assert refused.json() == {"success": False, "message": "password login is disabled"}
    assert session_set_cookie(refused) is None
    await app.state.options.put("PasswordLoginEnabled", True)
    assert (await app.client().login("alice", PASSWORD)).status_code == 200


# ---- logout -----------------------------------------------------------------------------------------

async def test_logout_deletes_the_session_and_clears_the_cookie(app: Running) -> None:
    uid = await add_user(app.state, "alice")
    api, raw = await login_cookie(app, "alice")
    response = await api.get("/api/user/logout")
    assert response.status_code == 200, response.text
    assert response.json()["success"] is True
    cleared = session_set_cookie(response)
    assert cleared is not None
    assert cleared.value == "" and cleared.attrs.get("max-age") == "0" and cleared.attrs.get("path") == "/"
    assert await app.state.sessions.get(raw) is None
    assert (await self_with_cookie(app, raw, uid)).status_code == 401
    assert (await api.get("/api/user/self")).status_code == 401


@pytest.mark.parametrize("cookie", [None, "no-such-session"])
async def test_logout_without_a_session_still_succeeds(app: Running, cookie: str | None) -> None:
    headers = {"Cookie": f"session={cookie}"} if cookie else {}
    response = await app.client().get("/api/user/logout", headers=headers)
    assert response.status_code == 200, response.text
    assert response.json()["success"] is True
    cleared = session_set_cookie(response)
    assert cleared is not None and cleared.attrs.get("max-age") == "0"


# ---- registration -----------------------------------------------------------------------------------

async def test_register_creates_a_common_user_without_logging_in(app: Running) -> None:
    api = app.client()
    response = await api.post("/api/user/register", json={
        "username": " dave ", "password": PASSWORD, "email": "  Dave@Example.com ",
    })
    assert response.status_code == 200, response.text
    assert response.json()["success"] is True
    assert session_set_cookie(response) is None
    [dave] = await users_named(app.state, "dave")
    assert (dave.role, dave.status, dave.group, dave.display_name, dave.email, dave.quota, dave.inviter_id) \
        == (1, 1, "default", "dave", "dave@example.com", 0, 0)
    assert dave.aff_code is not None and re.fullmatch(r"[A-Za-z0-9]{8}", dave.aff_code)
    assert dave.password.startswith("$argon2id$")
    assert (await api.get("/api/user/self", headers={"New-Api-User": str(dave.id)})).status_code == 401
    assert (await app.client().login("dave", PASSWORD)).status_code == 200


async def test_register_accepts_the_boundary_lengths(embedded_app: Running) -> None:
    for body in ({"username": "u", "password": "p" * 8}, {"username": "u" * 20, "password": "p" * 64}):
        response = await embedded_app.client().post("/api/user/register", json=body)
        assert response.status_code == 200, (body, response.text)
        assert len(await users_named(embedded_app.state, body["username"])) == 1


REGISTER_INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("missing username", {"password": PASSWORD}, "username"),
    ("blank username", {"username": "  ", "password": PASSWORD}, "username"),
    ("username too long", {"username": "u" * 21, "password": PASSWORD}, "username"),
    ("username with a control character", {"username": "da\x00ve", "password": PASSWORD}, "username"),
    ("username with a newline inside", {"username": "da\nve", "password": PASSWORD}, "username"),
    ("username with a C1 control", {"username": "da\x85ve", "password": PASSWORD}, "username"),
    ("username not a string", {"username": ["dave"], "password": PASSWORD}, "username"),
    ("missing password", {"username": "dave"}, "password"),
    ("password too short", {"username": "dave", "password": "p" * 7}, "password"),
    ("password too long", {"username": "dave", "password": "p" * 65}, "password"),
    ("password not a string", {"username": "dave", "password": 123456789}, "password"),
    ("e-mail without @", {"username": "dave", "password": PASSWORD, "email": "dave.example.com"}, "email"),
    ("e-mail without a dotted domain", {"username": "dave", "password": PASSWORD, "email": "dave@local"},
     "email"),
    ("e-mail with two @", {"username": "dave", "password": PASSWORD, "email": "a@b@example.com"}, "email"),
    ("e-mail with an empty label", {"username": "dave", "password": PASSWORD, "email": "a@example..com"},
     "email"),
    ("e-mail with a space", {"username": "dave", "password": PASSWORD, "email": "da ve@example.com"},
     "email"),
    ("e-mail with a control character",
     {"username": "dave", "password": PASSWORD, "email": "da\tve@example.com"}, "email"),
    ("e-mail too long", {"username": "dave", "password": PASSWORD, "email": "d" * 39 + "@example.com"},
     "email"),
    ("e-mail not a string", {"username": "dave", "password": PASSWORD, "email": 5}, "email"),
    ("aff_code not a string", {"username": "dave", "password": PASSWORD, "aff_code": 12345678}, "aff_code"),
]


@pytest.mark.parametrize(("body", "field"), [(b, f) for _, b, f in REGISTER_INVALID],
                         ids=[name for name, _, _ in REGISTER_INVALID])
async def test_register_rejects_an_invalid_field(embedded_app: Running, body: dict[str, Any],
                                                 field: str) -> None:
    response = await embedded_app.client().post("/api/user/register", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["success"] is False
    assert response.json()["message"].startswith(f"{field}: "), response.json()["message"]
    assert await user_count(embedded_app.state) == 0


async def test_register_accepts_a_fifty_character_email(embedded_app: Running) -> None:
    email = "d" * 38 + "@example.com"
    assert len(email) == 50
    response = await embedded_app.client().post("/api/user/register",
                                                json={"username": "dave", "password": PASSWORD,
                                                      "email": email})
    assert response.status_code == 200, response.text
    assert (await users_named(embedded_app.state, "dave"))[0].email == email


async def test_register_refuses_a_taken_username(app: Running) -> None:
    await add_user(app.state, "alice")
    carol = await add_user(app.state, "carol")
    await soft_delete(app.state, carol)
    before = await user_count(app.state)
    for name in ("alice", " alice ", "carol"):
        response = await app.client().post("/api/user/register",
                                           json={"username": name, "password": PASSWORD})
        assert response.status_code == 409, (name, response.text)
        assert response.json() == {"success": False, "message": "username is already taken"}
    assert await user_count(app.state) == before


async def test_register_refuses_a_taken_email(app: Running) -> None:
    first = await app.client().post("/api/user/register", json={
        "username": "dave", "password": PASSWORD, "email": "dave@example.com"})
    assert first.status_code == 200, first.text
    gone = await add_user(app.state, "gone")
    await set_fields(app.state, gone, email="gone@example.com")
    await soft_delete(app.state, gone)
    before = await user_count(app.state)
    for email in ("DAVE@example.com", "gone@example.com"):
        response = await app.client().post("/api/user/register", json={
            "username": "other", "password": PASSWORD, "email": email})
        assert response.status_code == 409, (email, response.text)
        assert response.json() == {"success": False, "message": "email is already used"}
    assert await user_count(app.state) == before
    assert await users_named(app.state, "other") == []


@pytest.mark.parametrize("switch", ["RegisterEnabled", "PasswordRegisterEnabled"])
async def test_register_can_be_switched_off(app: Running, switch: str) -> None:
    await app.state.options.put(switch, False)
    response = await app.client().post("/api/user/register", json={"username": "dave", "password": PASSWORD})
    assert response.status_code == 403, response.text
    assert response.json() == {"success": False, "message": "registration is disabled"}
    assert await users_named(app.state, "dave") == []


async def test_register_pays_the_invitation_rewards(app: Running) -> None:
    for key, value in (("QuotaForNewUser", 100), ("QuotaForInvitee", 50), ("QuotaForInviter", 30)):
        await app.state.options.put(key, value)
    inviter_id = await add_user(app.state, "alice", quota=7)
    code = (await user_row(app.state, inviter_id)).aff_code
    assert code

    async def register(username: str, aff_code: str) -> User:
        response = await app.client().post("/api/user/register", json={
            "username": username, "password": PASSWORD, "aff_code": aff_code})
        assert response.status_code == 200, response.text
        [user] = await users_named(app.state, username)
        return user

    bob = await register("bob", code)
    assert (bob.quota, bob.inviter_id) == (150, inviter_id)
    alice = await user_row(app.state, inviter_id)
    assert (alice.quota, alice.aff_count, alice.aff_quota, alice.aff_history_quota) == (7, 1, 30, 30)

    # Unknown codes — and codes with blanks around them, which are never trimmed — are ignored.
    for name, unknown in (("carl", "ZZZZZZZZ"), ("cleo", f" {code} ")):
        stranger = await register(name, unknown)
        assert (stranger.quota, stranger.inviter_id) == (100, 0)
    alice = await user_row(app.state, inviter_id)
    assert (alice.aff_count, alice.aff_quota, alice.aff_history_quota) == (1, 30, 30)

    # The inviter's count grows even when the inviter's reward is 0.
    await app.state.options.put("QuotaForInviter", 0)
    dan = await register("dan", code)
    assert (dan.quota, dan.inviter_id) == (150, inviter_id)
    alice = await user_row(app.state, inviter_id)
    assert (alice.quota, alice.aff_count, alice.aff_quota, alice.aff_history_quota) == (7, 2, 30, 30)

    # A deleted inviter's code is unknown.
    await soft_delete(app.state, inviter_id)
    eve = await register("eve", code)
    assert (eve.quota, eve.inviter_id) == (100, 0)
    assert (await user_row(app.state, inviter_id)).aff_count == 2


@pytest.mark.parametrize("callers", [2, 8])
async def test_concurrent_registrations_of_one_username_create_one_user(app: Running, callers: int) -> None:
    """At least two concurrent callers; eight so that some of them really meet at the unique index."""
    responses = await asyncio.gather(*(
        app.client().post("/api/user/register", json={"username": "dave", "password": f"password-{i}"})
        for i in range(callers)
    ))
    statuses = [r.status_code for r in responses]
    assert sorted(statuses) == [200] + [409] * (callers - 1), [r.text for r in responses]
    assert all(r.json() == {"success": False, "message": "username is already taken"}
               for r in responses if r.status_code == 409)
    assert len(await users_named(app.state, "dave")) == 1
    winner = f"password-{statuses.index(200)}"
    assert (await app.client().login("dave", winner)).status_code == 200


# ---- access tokens ----------------------------------------------------------------------------------

async def test_access_token_authenticates_with_and_without_bearer(app: Running) -> None:
    uid = await add_user(app.state, "alice")
    api = await logged_in(app, "alice")
    response = await api.get("/api/user/token")
    assert response.status_code == 200, response.text
    token = response.json()["data"]
    assert isinstance(token, str) and re.fullmatch(r"[A-Za-z0-9_-]{32}", token)

    for authorization in (token, f"Bearer {token}", f"bearer  {token}"):
        me = await self_with_token(app, authorization, uid)
        assert me.status_code == 200, (authorization, me.text)
        assert me.json()["data"]["id"] == uid
        assert token not in me.text  # shown once, never returned again

    stored = (await user_row(app.state, uid)).access_token
    assert stored is not None and stored != token
    assert re.fullmatch(r"[0-9a-f]{64}", stored)
    assert stored != hashlib.sha256(token.encode()).hexdigest()  # keyed, not a bare hash


async def test_a_new_access_token_kills_the_old_one(app: Running) -> None:
    uid = await add_user(app.state, "alice")
    api = await logged_in(app, "alice")
    first = (await api.get("/api/user/token")).json()["data"]
    assert (await self_with_token(app, first, uid)).status_code == 200  # now cached as valid
    second = (await api.get("/api/user/token")).json()["data"]
    assert second != first
    dead = await self_with_token(app, first, uid)
    assert dead.status_code == 401
    assert dead.json() == {"success": False, "message": "invalid access token"}
    assert (await self_with_token(app, second, uid)).status_code == 200


async def test_an_unknown_access_token_is_refused(app: Running) -> None:
    uid = await add_user(app.state, "alice")
    response = await self_with_token(app, "Bearer " + "x" * 32, uid)
    assert response.status_code == 401
    assert response.json() == {"success": False, "message": "invalid access token"}
    anonymous = await app.client().get("/api/user/self", headers={"New-Api-User": str(uid)})
    assert anonymous.status_code == 401
    assert anonymous.json() == {"success": False, "message": "not logged in"}


def arabic_indic(number: int) -> str:
    """`number` in Arabic-Indic digits ("١٢"), which `str.isdigit` accepts and `int` reads."""
    return "".join(chr(0x660 + int(d)) for d in str(number))


async def test_new_api_user_is_required_and_must_match_on_user_routes(app: Running) -> None:
    uid = await add_user(app.state, "alice")
    other = await add_user(app.state, "bob")
    api, raw = await login_cookie(app, "alice")
    token = (await api.get("/api/user/token")).json()["data"]
    cookie = {"Cookie": f"session={raw}"}
    bad_values: list[str | bytes] = [str(other), "abc", "-1", f"{uid}.0", "²".encode(),
                                     arabic_indic(uid).encode(), "1" * 5000]
    for value in bad_values:
        response = await app.client().get("/api/user/self", headers={**cookie, "New-Api-User": value})
        assert response.status_code == 401, (value[:20], response.text)
        assert response.json()["message"] == "New-Api-User does not match the logged-in user"
    missing = await app.client().get("/api/user/self", headers=cookie)
    assert missing.status_code == 401
    assert missing.json()["message"] == "New-Api-User header is required"
    assert (await self_with_token(app, token, None)).status_code == 401
    assert (await self_with_token(app, token, other)).status_code == 401
    good = await app.client().get("/api/user/self", headers={**cookie, "New-Api-User": str(uid)})
    assert good.status_code == 200

    # Public routes do not need it, logged in or not.
    status = await app.client().get("/api/status", headers=cookie)
    assert status.status_code == 200
    login = await app.client().post("/api/user/login", json={"username": "bob", "password": PASSWORD})
    assert login.status_code == 200


async def test_a_session_cookie_wins_over_authorization(app: Running) -> None:
    uid = await add_user(app.state, "alice")
    api, raw = await login_cookie(app, "alice")
    token = (await api.get("/api/user/token")).json()["data"]
    with_bad_token = await app.client().get("/api/user/self", headers={
        "Cookie": f"session={raw}", "Authorization": "Bearer not-a-token", "New-Api-User": str(uid)})
    assert with_bad_token.status_code == 200, with_bad_token.text
    assert with_bad_token.json()["data"]["id"] == uid
    # A cookie that names no session falls through to the token.
    stale_cookie = await app.client().get("/api/user/self", headers={
        "Cookie": "session=gone", "Authorization": token, "New-Api-User": str(uid)})
    assert stale_cookie.status_code == 200, stale_cookie.text


# ---- revocation and rotation ------------------------------------------------------------------------

async def test_disabling_a_user_ends_their_session_at_once(app: Running) -> None:
    root = await root_client(app)
    uid = await add_user(app.state, "alice")
    api, raw = await login_cookie(app, "alice")
    token = (await api.get("/api/user/token")).json()["data"]
    assert (await api.get("/api/user/self")).status_code == 200  # the user is now cached
    assert (await self_with_token(app, token, uid)).status_code == 200

    disable = await root.post("/api/user/manage", json={"id": uid, "action": "disable"})
    assert disable.status_code == 200, disable.text
    assert await app.state.sessions.get(raw) is None  # revoked in the store, not only refused

    after = await api.get("/api/user/self")
    assert after.status_code == 401, after.text
    refused = await self_with_token(app, token, uid)
    assert refused.status_code == 403
    assert refused.json() == {"success": False, "message": "user is disabled"}

    enable = await root.post("/api/user/manage", json={"id": uid, "action": "enable"})
    assert enable.status_code == 200, enable.text
    assert (await self_with_cookie(app, raw, uid)).status_code == 401  # stays revoked
    assert (await app.client().login("alice", PASSWORD)).status_code == 200


async def test_a_promotion_rotates_the_session_on_the_next_request(app: Running) -> None:
    root = await root_client(app)
    uid = await add_user(app.state, "alice")
    api, old = await login_cookie(app, "alice")
    assert (await api.get("/api/user/self")).status_code == 200

    promote = await root.post("/api/user/manage", json={"id": uid, "action": "promote"})
    assert promote.status_code == 200, promote.text

    response = await api.get("/api/user/self")
    assert response.status_code == 200, response.text
    assert response.json()["data"]["role"] == 10
    rotated = session_set_cookie(response)
    assert rotated is not None and rotated.value != old
    assert rotated.attrs.get("max-age") == str(SESSION_TTL) and "httponly" in rotated.attrs
    assert await app.state.sessions.get(old) is None
    record = await app.state.sessions.get(rotated.value)
    assert record is not None and record["id"] == uid and record["role"] == 10
    assert (await self_with_cookie(app, old, uid)).status_code == 401
    assert (await self_with_cookie(app, rotated.value, uid)).status_code == 200
    # Rotated once: the next request keeps the new id.
    assert session_set_cookie(await api.get("/api/user/self")) is None


async def test_a_rotated_cookie_is_sent_even_when_the_request_is_refused(app: Running) -> None:
    root = await root_client(app)
    uid = await add_user(app.state, "alice")
    api, old = await login_cookie(app, "alice")
    assert (await root.post("/api/user/manage", json={"id": uid, "action": "promote"})).status_code == 200
    refused = await api.get("/api/option/")  # root only: 403 for the new admin
    assert refused.status_code == 403
    rotated = session_set_cookie(refused)
    assert rotated is not None and rotated.value != old  # else the client would be logged out
    assert (await self_with_cookie(app, rotated.value, uid)).status_code == 200


async def test_the_session_slides_at_most_once_a_minute(app: Running) -> None:
    uid = await add_user(app.state, "alice")
    api, raw = await login_cookie(app, "alice")
    assert session_set_cookie(await api.get("/api/user/self")) is None
    app.clock.shift(61)
    response = await api.get("/api/user/self")
    assert response.status_code == 200
    slid = session_set_cookie(response)
    assert slid is not None and slid.value == raw
    assert slid.attrs.get("max-age") == str(SESSION_TTL)
    record = await app.state.sessions.get(raw)
    assert record is not None and record["pushed_at"] >= app.clock.now_s() - 1
    assert (await self_with_cookie(app, raw, uid)).status_code == 200
