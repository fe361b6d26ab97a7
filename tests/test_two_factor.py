"""TOTP two-factor authentication over HTTP (docs/api/auth.md#two-factor-authentication), on every stack
(SQLite with SQL sessions and the in-process backend; MariaDB and PostgreSQL with Redis).

Proves:
- setup shows a 32-character secret, its percent-encoded `otpauth://` URI and 10 `XXXX-XXXX` backup codes
  once; nothing changes until `enable` with a code of that secret (a wrong one is a 400 that does not count
  toward the lock); 404 / 409 where the state says so;
- a password login of a 2FA user answers `require_2fa` with a pending session only; step 2 with a TOTP
  code (±1 step, `pyotp.TOTP.at` at the window's edges) or a backup code (lower-case, no dash) answers and
  sets the cookie like a password login, `auth_method` `password+2fa`; a used code (TOTP step or backup
  code) is refused afterwards, including the code that enabled 2FA; the pending login expires after 5 min;
  a user disabled meanwhile gets the password login's 401; concurrent uses of one TOTP code or one backup
  code let exactly one caller in;
- 5 consecutive failed checks lock every 2FA check (login step 2, disable, backup codes, `/api/verify`)
  with 429 + `Retry-After` for 300 s on the injectable clock, failures of all of them count together, a
  success resets the count, and the password step still works while locked; of 12 concurrent wrong codes
  at most 5 are checked;
- disable (TOTP or backup code) and new backup codes (TOTP only) do what they say;
- admins see the stats and reset another user's 2FA under the role hierarchy, with a manage log;
- at rest the secret is encrypted and backup codes are keyed digests (read from the raw rows), and
  neither appears in any reply after setup, in the logs or in an error message.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pyotp
from sqlalchemy import select, text

from models.logs import Log
from models.two_factor import BackupCode, TwoFactor
from server.auth.qr import qr_svg
from server.auth.totp import backup_digest_input
from tests.harness import Api, Running, add_user, data_of, fails, logged_in
from tests.test_auth import session_set_cookie, set_fields

PASSWORD = "password123"
LOGIN_EXPIRED = "login expired, please log in again"
BACKUP_SHAPE = re.compile(r"[A-Z0-9]{4}-[A-Z0-9]{4}")


# ---- helpers -------------------------------------------------------------------------------------------

def mid_step(app: Running) -> None:
    """Move the clock to the middle of a fresh 30-second step, so a code computed now is still of the
    same step when the server checks it (and the replay guard sees a newer step than any used before)."""
    now = app.clock.now()
    app.clock.shift(30 - now % 30 + 15)


def code_now(app: Running, secret: str, offset: float = 0) -> str:
    return pyotp.TOTP(secret).at(app.clock.now() + offset)


async def set_up(api: Api) -> dict[str, Any]:
    setup = data_of(await api.post("/api/user/2fa/setup"))
    assert isinstance(setup, dict)
    return setup


async def enable(app: Running, api: Api) -> tuple[str, list[str]]:
    """Set up and enable 2FA for the logged-in `api`; (secret, backup codes)."""
    setup = await set_up(api)
    mid_step(app)
    data_of(await api.post("/api/user/2fa/enable", json={"code": code_now(app, setup["secret"])}))
    return setup["secret"], setup["backup_codes"]


async def first_step(app: Running, username: str) -> Api:
    """A client that passed the password step of a 2FA user (it holds the pending session cookie)."""
    api = app.client()
    response = await api.post("/api/user/login", json={"username": username, "password": PASSWORD})
    assert response.json() == {"success": True, "message": "2FA code required", "data": {"require_2fa": True}}
    return api


async def second_step(api: Api, code: str) -> httpx.Response:
    response = await api.post("/api/user/login/2fa", json={"code": code})
    if response.status_code == 200:
        api.user_id = response.json()["data"]["id"]
    return response


async def two_factor_user(app: Running, username: str = "alice") -> tuple[int, Api, str, list[str]]:
    """A user with 2FA on: (id, a session logged in before it was enabled, secret, backup codes)."""
    uid = await add_user(app.state, username)
    api = await logged_in(app, username)
    secret, codes = await enable(app, api)
    return uid, api, secret, codes


async def status_of(api: Api) -> dict[str, Any]:
    status = data_of(await api.get("/api/user/2fa/status"))
    assert isinstance(status, dict)
    return status


def session_of(api: Api) -> str:
    raw = api.http.cookies.get("session")
    assert raw
    return raw


# ---- setup and enable -----------------------------------------------------------------------------------

async def test_setup_shows_the_secret_once_and_enable_turns_it_on(app: Running) -> None:
    await add_user(app.state, "alice b")
    api = await logged_in(app, "alice b")
    assert await status_of(api) == {"enabled": False, "locked": False, "backup_codes_remaining": 0}
    fails(await api.post("/api/user/2fa/enable", json={"code": "123456"}), 404, "no 2FA setup is pending")

    first = await set_up(api)
    setup = await set_up(api)  # replaces the pending one
    secret = setup["secret"]
    assert secret != first["secret"] and re.fullmatch(r"[A-Z2-7]{32}", secret)
    assert setup["qr_code_data"] == f"otpauth://totp/Tollway:alice%20b?secret={secret}&issuer=Tollway"
    codes = setup["backup_codes"]
    assert len(codes) == 10 and len(set(codes)) == 10 and all(BACKUP_SHAPE.fullmatch(c) for c in codes)
    assert await status_of(api) == {"enabled": False, "locked": False, "backup_codes_remaining": 0}
    # a pending setup changes nothing for logins
    assert "id" in data_of(await app.client().post("/api/user/login", json={"username": "alice b",
                                                                            "password": PASSWORD}))

    mid_step(app)
    fails(await api.post("/api/user/2fa/enable", json={"code": code_now(app, first["secret"])}), 400,
          "code: invalid 2FA code", prefix=True)  # the replaced secret is dead
    for _ in range(6):  # enable failures do not count toward the lock
        fails(await api.post("/api/user/2fa/enable", json={"code": "000000"}), 400, "code:", prefix=True)
    data_of(await api.post("/api/user/2fa/enable", json={"code": code_now(app, secret)}))
    assert await status_of(api) == {"enabled": True, "locked": False, "backup_codes_remaining": 10}
    fails(await api.post("/api/user/2fa/setup"), 409, "already enabled")
    fails(await api.post("/api/user/2fa/enable", json={"code": code_now(app, secret)}), 409,
          "already enabled")
    await first_step(app, "alice b")  # the password login now asks for the code


async def test_the_qr_code_is_the_pending_secrets_uri_as_svg(app: Running) -> None:
    """`GET /api/user/2fa/qr`: the `otpauth://` URI `setup` showed, drawn as an SVG QR code (the same
    drawing as `qr_svg` of that URI, so an app scanning it reads that URI); of the latest setup; never
    cached; 404 before a setup and 409 once 2FA is on."""
    await add_user(app.state, "qr user")
    api = await logged_in(app, "qr user")
    fails(await api.get("/api/user/2fa/qr"), 404, "no 2FA setup is pending")
    await set_up(api)
    setup = await set_up(api)  # the latest setup's secret is the one drawn
    response = await api.get("/api/user/2fa/qr")
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/svg+xml"
    assert response.headers["cache-control"] == "no-store"
    assert response.content.startswith(b"<?xml") and b"<svg" in response.content
    assert response.content == qr_svg(setup["qr_code_data"])
    assert setup["secret"].encode() not in response.content  # drawn, not written as text
    mid_step(app)
    data_of(await api.post("/api/user/2fa/enable", json={"code": code_now(app, setup["secret"])}))
    fails(await api.get("/api/user/2fa/qr"), 409, "2FA is already enabled")


async def test_a_code_must_be_sent_and_bounded(embedded_app: Running) -> None:
    await add_user(embedded_app.state, "alice")
    api = await logged_in(embedded_app, "alice")
    for body, message in (({}, "code: is required"), ({"code": 123456}, "code: must be a string"),
                          ({"code": "1" * 33}, "code: must be 1–32 characters")):
        for path in ("/api/user/2fa/enable", "/api/user/2fa/disable", "/api/user/2fa/backup_codes",
                     "/api/user/login/2fa"):
            fails(await api.post(path, json=body), 400, message, prefix=True)


# ---- login step 2 ---------------------------------------------------------------------------------------

async def test_login_with_a_totp_code(app: Running) -> None:
    uid, _, secret, _ = await two_factor_user(app)
    api = await first_step(app, "alice")
    pending = session_of(api)
    record = await app.state.sessions.get(pending)
    assert record is not None and "id" not in record and record["pending_user_id"] == uid
    assert 0 <= app.clock.now_s() + 300 - record["pending_expires_at"] <= 2
    fails(await api.get("/api/user/self", headers={"New-Api-User": str(uid)}), 401)  # not logged in yet

    app.clock.shift(30)  # the enabling code's step is used up
    response = await second_step(api, code_now(app, secret))
    assert response.json() == {"success": True, "message": "", "data": {
        "id": uid, "username": "alice", "display_name": "alice", "role": 1, "status": 1, "group": "default"}}
    cookie = session_set_cookie(response)
    assert cookie is not None and cookie.value == session_of(api)
    assert (cookie.attrs.get("path"), cookie.attrs.get("max-age"), cookie.attrs.get("samesite")) == (
        "/", "2592000", "Strict")
    assert "httponly" in cookie.attrs and "secure" not in cookie.attrs
    fresh = cookie.value
    assert fresh != pending and await app.state.sessions.get(pending) is None
    record = await app.state.sessions.get(fresh)
    assert record is not None and record["id"] == uid and record["auth_method"] == "password+2fa"
    assert data_of(await api.get("/api/user/self"))["id"] == uid


async def test_login_with_a_backup_code_spends_it(app: Running) -> None:
    _, owner, _, codes = await two_factor_user(app)
    typed = codes[3].lower().replace("-", "")  # `abcd1234` is `ABCD-1234`
    api = await first_step(app, "alice")
    assert (await second_step(api, f"  {typed} ")).status_code == 200
    assert (await status_of(owner))["backup_codes_remaining"] == 9
    again = await first_step(app, "alice")
    fails(await second_step(again, codes[3]), 401, "invalid 2FA code")
    assert (await second_step(again, codes[4].replace("-", " "))).status_code == 200


async def test_a_used_code_is_refused_and_said_to_be_used(app: Running) -> None:
    """A valid code of a step already used is refused with its own words and code (the person should wait
    for the app's next code), a wrong one as invalid; both count toward the lock."""
    _, owner, secret, _ = await two_factor_user(app)
    enabling = code_now(app, secret)
    api = await first_step(app, "alice")
    used = await second_step(api, enabling)  # enable took this step
    fails(used, 401, "this code was just used")
    assert used.json().get("code") == "TOTP_CODE_REUSED"
    app.clock.shift(30)
    code = code_now(app, secret)
    assert (await second_step(api, code)).status_code == 200
    replay = await first_step(app, "alice")
    fails(await second_step(replay, code), 401, "this code was just used")
    fails(await second_step(replay, code_now(app, secret, -30)), 401, "just used")  # an older step too
    wrong = await second_step(replay, "000000" if code != "000000" else "111111")
    fails(wrong, 401, "invalid 2FA code")
    assert wrong.json().get("code") in (None, "")
    # the same words where a code confirms an action (disabling 2FA with the code just used to sign in)
    refused = await owner.post("/api/user/2fa/disable", json={"code": code})
    fails(refused, 400, "code: this code was just used", prefix=True)
    assert refused.json().get("code") == "TOTP_CODE_REUSED"


async def test_concurrent_uses_of_one_code_let_one_in(app: Running) -> None:
    _, _, secret, codes = await two_factor_user(app)
    app.clock.shift(30)
    code = code_now(app, secret)
    callers = [await first_step(app, "alice") for _ in range(5)]
    statuses = [r.status_code for r in await asyncio.gather(*(second_step(api, code) for api in callers))]
    # one caller gets in; the replays are failed checks (the one counted 5th locks, even if the success
    # ran meanwhile: attempts count when they start)
    assert statuses.count(200) == 1 and set(statuses) <= {200, 401, 429}, statuses
    app.clock.shift(301)  # past any lock; a sequential success then resets the count
    assert (await second_step(await first_step(app, "alice"), code_now(app, secret))).status_code == 200
    callers = [await first_step(app, "alice") for _ in range(4)]
    statuses = [r.status_code for r in await asyncio.gather(*(second_step(api, codes[0]) for api in callers))]
    assert sorted(statuses) == [200, 401, 401, 401], statuses


async def test_one_pending_login_opens_one_session_whatever_valid_codes_race(app: Running) -> None:
    """Step 2 sent several times at once on one pending login, each with another valid backup code: one
    session is opened; the others find the pending login gone."""
    _, _, _, codes = await two_factor_user(app)
    api = await first_step(app, "alice")
    pending = session_of(api)
    async with httpx.AsyncClient(base_url=app.url, timeout=20) as http:  # no cookie jar: each sends it
        responses = await asyncio.gather(*(
            http.post("/api/user/login/2fa", json={"code": code}, headers={"Cookie": f"session={pending}"})
            for code in codes[:4]))
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200, 401, 401, 401], [r.text for r in responses]
    assert all(r.json()["message"] == LOGIN_EXPIRED for r in responses if r.status_code == 401)
    opened = {r.cookies["session"] for r in responses if r.status_code == 200}
    assert len(opened) == 1 and pending not in opened


async def test_concurrent_wrong_codes_check_at_most_five(app: Running) -> None:
    await two_factor_user(app)
    callers = [await first_step(app, "alice") for _ in range(12)]
    statuses = [r.status_code for r in await asyncio.gather(*(second_step(api, "000000") for api in callers))]
    assert statuses.count(401) <= 5 and statuses.count(401) + statuses.count(429) == 12, statuses
    fails(await second_step(callers[0], "000000"), 429)


async def test_the_window_is_one_step_either_side(app: Running) -> None:
    _, _, secret, _ = await two_factor_user(app)
    app.clock.shift(300)
    mid_step(app)
    api = await first_step(app, "alice")
    fails(await second_step(api, code_now(app, secret, -60)), 401)
    assert (await second_step(api, code_now(app, secret, -30))).status_code == 200
    api = await first_step(app, "alice")
    fails(await second_step(api, code_now(app, secret, 60)), 401)
    assert (await second_step(api, code_now(app, secret, 30))).status_code == 200
    api = await first_step(app, "alice")  # the current step is older than the one just used
    fails(await second_step(api, code_now(app, secret)), 401)


async def test_the_pending_login_expires_after_five_minutes(app: Running) -> None:
    _, _, secret, _ = await two_factor_user(app)
    fails(await app.client().post("/api/user/login/2fa", json={"code": "123456"}), 401, LOGIN_EXPIRED)
    stranger = app.client(cookies={"session": "A" * 43})
    fails(await stranger.post("/api/user/login/2fa", json={"code": "123456"}), 401, LOGIN_EXPIRED)
    api = await first_step(app, "alice")
    app.clock.shift(301)
    fails(await second_step(api, code_now(app, secret)), 401, LOGIN_EXPIRED)
    assert await app.state.sessions.get(session_of(api)) is None  # the stale pending session is gone
    api = await first_step(app, "alice")
    assert (await second_step(api, code_now(app, secret))).status_code == 200


async def test_a_user_disabled_meanwhile_cannot_finish(app: Running) -> None:
    uid, _, secret, _ = await two_factor_user(app)
    api = await first_step(app, "alice")
    await set_fields(app.state, uid, status=2)
    app.clock.shift(30)
    fails(await second_step(api, code_now(app, secret)), 401, "invalid username or password")


# ---- the lock -------------------------------------------------------------------------------------------

async def test_five_failures_lock_every_2fa_check(app: Running) -> None:
    _, owner, secret, codes = await two_factor_user(app)
    api = await first_step(app, "alice")
    for _ in range(5):
        fails(await second_step(api, "000000"), 401, "invalid 2FA code")
    right = code_now(app, secret, 30)  # valid (next step, in the window) but not looked at while locked
    locked = await second_step(api, right)
    fails(locked, 429, "too many failed 2FA attempts")
    assert 295 <= int(locked.headers["retry-after"]) <= 300
    assert (await status_of(owner))["locked"] is True
    for path, body in (("/api/user/2fa/disable", {"code": right}),
                       ("/api/user/2fa/backup_codes", {"code": right}),
                       ("/api/verify", {"method": "2fa", "code": right})):
        refused = await owner.post(path, json=body)
        fails(refused, 429)
        assert int(refused.headers["retry-after"]) > 0
    fails(await second_step(api, codes[0]), 429)
    await first_step(app, "alice")  # the password step still works
    assert (await status_of(owner))["enabled"] is True

    app.clock.shift(301)
    assert (await status_of(owner))["locked"] is False
    api = await first_step(app, "alice")
    assert (await second_step(api, code_now(app, secret))).status_code == 200
    assert (await status_of(owner))["backup_codes_remaining"] == 10  # nothing was checked while locked


async def test_failures_count_across_routes_and_a_success_resets_them(app: Running) -> None:
    _, owner, secret, _ = await two_factor_user(app)
    for _ in range(4):
        fails(await owner.post("/api/user/2fa/disable", json={"code": "WRONG-CODE"}), 400, "code:",
              prefix=True)
    app.clock.shift(30)
    data_of(await owner.post("/api/verify", json={"method": "2fa", "code": code_now(app, secret)}))
    for _ in range(2):  # 4 + 2 would lock; the success in between reset the count
        fails(await owner.post("/api/verify", json={"method": "2fa", "code": "999999"}), 400)
    for _ in range(2):
        fails(await owner.post("/api/user/2fa/backup_codes", json={"code": "123123"}), 400)
    api = await first_step(app, "alice")
    fails(await second_step(api, "111111"), 401)  # the 5th in a row, on a third route
    app.clock.shift(30)
    fails(await second_step(api, code_now(app, secret)), 429)


# ---- disable and backup codes ---------------------------------------------------------------------------

async def test_disable_with_a_backup_code_deletes_everything(app: Running) -> None:
    uid, owner, _, codes = await two_factor_user(app)
    fails(await owner.post("/api/user/2fa/disable", json={"code": "ZZZZ-ZZZZ"}), 400, "code:", prefix=True)
    data_of(await owner.post("/api/user/2fa/disable", json={"code": codes[9].lower()}))
    assert await status_of(owner) == {"enabled": False, "locked": False, "backup_codes_remaining": 0}
    async with app.state.db.transaction() as tx:
        assert await tx.get(TwoFactor, uid) is None
        assert (await tx.scalars(select(BackupCode).where(BackupCode.user_id == uid))).all() == []
    fails(await owner.post("/api/user/2fa/disable", json={"code": codes[0]}), 404, "2FA is not enabled")
    fails(await owner.post("/api/user/2fa/backup_codes", json={"code": "123456"}), 404, "2FA is not enabled")
    assert "id" in data_of(await app.client().post("/api/user/login", json={"username": "alice",
                                                                            "password": PASSWORD}))


async def test_disable_with_a_totp_code(app: Running) -> None:
    _, owner, secret, _ = await two_factor_user(app)
    app.clock.shift(30)
    data_of(await owner.post("/api/user/2fa/disable", json={"code": code_now(app, secret)}))
    assert (await status_of(owner))["enabled"] is False


async def test_new_backup_codes_take_a_totp_code_and_replace_all(app: Running) -> None:
    _, owner, secret, old = await two_factor_user(app)
    fails(await owner.post("/api/user/2fa/backup_codes", json={"code": old[0]}), 400, "code:", prefix=True)
    app.clock.shift(30)
    fresh = data_of(await owner.post("/api/user/2fa/backup_codes", json={"code": code_now(app, secret)}))
    codes = fresh["backup_codes"]
    assert len(codes) == 10 and all(BACKUP_SHAPE.fullmatch(c) for c in codes) and not set(codes) & set(old)
    api = await first_step(app, "alice")
    fails(await second_step(api, old[1]), 401)
    assert (await second_step(api, codes[1])).status_code == 200
    assert (await status_of(owner))["backup_codes_remaining"] == 9


# ---- admin ----------------------------------------------------------------------------------------------

async def test_admin_stats_count_live_users(app: Running) -> None:
    await two_factor_user(app, "alice")
    await add_user(app.state, "bob")
    gone = await add_user(app.state, "carol")
    await add_user(app.state, "admin", role=10)
    admin = await logged_in(app, "admin")
    assert data_of(await admin.get("/api/user/2fa/stats")) == {
        "total_users": 4, "enabled_users": 1, "enabled_rate": "25.0%"}
    await set_fields(app.state, gone, deleted_at=app.clock.now_s())
    assert data_of(await admin.get("/api/user/2fa/stats"))["enabled_rate"] == "33.3%"


async def test_admin_reset_follows_the_hierarchy_and_is_logged(app: Running) -> None:
    uid, owner, _, _ = await two_factor_user(app, "alice")
    other_admin_id, other_admin, _, _ = await two_factor_user(app, "second")
    await set_fields(app.state, other_admin_id, role=10)
    await add_user(app.state, "admin", role=10)
    root_id, _, _, _ = await two_factor_user(app, "root")
    await set_fields(app.state, root_id, role=100)
    admin = await logged_in(app, "admin")

    fails(await admin.delete(f"/api/user/{other_admin_id}/2fa"), 403, "role is equal to or above yours")
    fails(await admin.delete(f"/api/user/{root_id}/2fa"), 403)
    fails(await admin.delete("/api/user/999999/2fa"), 404, "user not found")
    fails(await admin.delete("/api/user/abc/2fa"), 400, "id:", prefix=True)
    data_of(await admin.delete(f"/api/user/{uid}/2fa"))
    fails(await admin.delete(f"/api/user/{uid}/2fa"), 404, "2FA is not enabled")
    assert (await status_of(owner))["enabled"] is False
    assert "id" in data_of(await app.client().post("/api/user/login", json={"username": "alice",
                                                                            "password": PASSWORD}))
    async with app.state.db.transaction() as tx:
        [log] = (await tx.scalars(select(Log).where(Log.user_id == uid))).all()
    assert (log.type, log.username, log.content) == (3, "alice", "admin admin reset the 2FA of user alice")
    assert '"admin_username":"admin"' in log.other
    assert (await status_of(other_admin))["enabled"] is True


# ---- secrets --------------------------------------------------------------------------------------------

async def test_secrets_at_rest_are_encrypted_and_digested(app: Running) -> None:
    uid, _, secret, codes = await two_factor_user(app)
    async with app.state.db.transaction() as tx:
        stored = (await tx.execute(text("SELECT secret FROM two_factor WHERE user_id = :u"),
                                   {"u": uid})).scalar()
        digests = (await tx.execute(text("SELECT digest FROM two_factor_backup_codes WHERE user_id = :u"),
                                    {"u": uid})).scalars().all()
    box = app.state.box
    assert isinstance(stored, str) and stored.startswith("v1:") and secret not in stored
    assert box.decrypt(stored) == secret
    assert sorted(digests) == sorted(box.digest(backup_digest_input(uid, c)) for c in codes)
    for digest in digests:
        assert re.fullmatch(r"[0-9a-f]{64}", digest)
        assert not any(c.replace("-", "") in digest.upper() for c in codes)


async def test_nothing_secret_after_setup(app: Running) -> None:
    uid = await add_user(app.state, "alice")
    owner = await logged_in(app, "alice")
    setup = await set_up(owner)
    secret, codes = setup["secret"], setup["backup_codes"]
    await add_user(app.state, "root", role=100)
    root = await logged_in(app, "root")
    mid_step(app)
    replies: list[httpx.Response] = [
        await owner.post("/api/user/2fa/enable", json={"code": "000000"}),
        await owner.post("/api/user/2fa/enable", json={"code": code_now(app, secret)}),
        await owner.get("/api/user/2fa/status"),
        await owner.get("/api/user/self"),
        await owner.post("/api/user/2fa/disable", json={"code": codes[0] + "X"}),
        await owner.post("/api/verify", json={"method": "2fa", "code": "123456"}),
        await owner.get("/api/verify/status"),
        await root.get("/api/user/2fa/stats"),
        await root.get(f"/api/user/{uid}"),
        await root.get("/api/log/?p=1"),
    ]
    api = await first_step(app, "alice")
    replies.append(await second_step(api, codes[0].lower()))
    replies.append(await owner.post("/api/user/2fa/backup_codes", json={"code": codes[1]}))
    replies.append(await root.delete(f"/api/user/{uid}/2fa"))
    for response in replies:
        assert response.status_code < 500, response.text
        seen = response.text + str(response.headers)
        for value in (secret, *codes, *(c.replace("-", "") for c in codes)):
            assert value not in seen and value.lower() not in seen, response.text
    async with app.state.db.transaction() as tx:
        logs = (await tx.scalars(select(Log))).all()
    assert logs and not any(secret in log.content + log.other for log in logs)
