"""The account-security work end to end, from the API alone, on every stack (SQLite; MariaDB and PostgreSQL
with Redis), with a real SMTP server (tests/fakes/smtp.py), pyotp and a software passkey
(tests/fakes/passkey.py). The injectable clock only keeps TOTP steps apart.

Proves, as one user's story:
- a new user registers with the code mailed to them, turns 2FA on and logs in with password + TOTP;
- with 2FA on, adding a passkey first needs a secure verification made with 2FA (`register/begin` is a 403
  `VERIFICATION_REQUIRED` before `POST /api/verify` method `2fa`, and works after it);
- the passkey logs in without a TOTP step, verifies the session (`verify/begin` → `verify/finish` →
  `POST /api/verify` method `passkey`), and deleting a passkey needs that verification;
- a forgotten password is reset by the mailed link: every session ends (a login pending its TOTP step too),
  the old password fails, the new one logs in through the TOTP step;
and for root: a channel key is revealed only after a verification (here with a passkey, in a session the
passkey opened: 403 then 200). Lastly, the 2FA gate on `register/begin` applies only while 2FA is on.
"""

from __future__ import annotations

from typing import Any

import httpx

from server.components.verification import VERIFICATION_REQUIRED
from tests.fakes.smtp import FakeSmtp
from tests.harness import Api, Running, add_user, data_of, fails, logged_in
from tests.mail import PASSWORD, configure, request_code, request_reset
from tests.passkey_flows import enable_passkeys, new_passkey, register, try_login, verify
from tests.test_channels import admin_of, create
from tests.test_two_factor import code_now, enable, mid_step, second_step

NEW_PASSWORD = "a-new-password-1"
EMAIL = "newcomer@example.com"


def refused_for_verification(response: httpx.Response) -> None:
    assert response.status_code == 403, response.text
    assert response.json() == {"success": False, "message": "secure verification required",
                               "code": VERIFICATION_REQUIRED}


def next_step(app: Running) -> None:
    """On to the middle of the next 30-second step: a TOTP code of a step already used is a replay."""
    app.clock.shift(30)
    mid_step(app)


async def totp_login(app: Running, username: str, secret: str, password: str = PASSWORD) -> Api:
    """Password (answered with the TOTP step), then the code of a fresh step; the logged-in client."""
    api = app.client()
    response = await api.post("/api/user/login", json={"username": username, "password": password})
    assert data_of(response) == {"require_2fa": True}
    next_step(app)
    response = await second_step(api, code_now(app, secret))
    assert response.status_code == 200, response.text
    return api


async def session_method(app: Running, api: Api) -> Any:
    raw = api.http.cookies.get("session")
    assert raw
    record = await app.state.sessions.get(raw)
    assert record is not None
    return record.get("auth_method")


async def test_the_account_security_journey(mail_app: Running, smtp: FakeSmtp) -> None:
    app = mail_app
    await configure(app, None, EmailVerificationEnabled=True)
    await enable_passkeys(app)

    # 1. register with the mailed code
    anonymous = app.client()
    assert (await request_code(anonymous, EMAIL)).status_code == 200
    registered = await anonymous.post("/api/user/register", json={
        "username": "newcomer", "password": PASSWORD, "email": EMAIL,
        "verification_code": smtp.code_for(EMAIL)})
    assert registered.status_code == 200, registered.text
    first = await logged_in(app, "newcomer")
    uid = first.user_id
    assert uid is not None and data_of(await first.get("/api/user/self"))["email"] == EMAIL

    # 2. 2FA on; a password login now needs the TOTP step
    secret, backup_codes = await enable(app, first)
    assert data_of(await first.get("/api/user/2fa/status"))["enabled"] is True
    web = await totp_login(app, "newcomer", secret)
    assert data_of(await web.get("/api/user/self"))["id"] == uid
    assert await session_method(app, web) == "password+2fa"

    # 3. a passkey: with 2FA on, register/begin needs a verification made with 2FA
    refused_for_verification(await web.post("/api/user/passkey/register/begin"))
    next_step(app)
    assert data_of(await web.post("/api/verify", json={"method": "2fa", "code": code_now(app, secret)}))[
        "verified"] is True
    passkey, spare = new_passkey(uid), new_passkey(uid)
    assert await register(web, passkey) == passkey.id
    assert await register(web, spare) == spare.id
    assert data_of(await web.get("/api/user/passkey"))["count"] == 2

    # 4. the passkey logs in: no TOTP step
    phone, response = await try_login(app, passkey)
    login = data_of(response)
    assert login["id"] == uid and "require_2fa" not in login
    assert await session_method(app, phone) == "passkey"
    assert data_of(await phone.get("/api/user/self"))["username"] == "newcomer"

    # 5. deleting a passkey needs a verification; the passkey verifies this session
    refused_for_verification(await phone.delete("/api/user/passkey", params={"credential_id": spare.id}))
    assert data_of(await verify(phone, passkey)) == {"verified": True}
    assert data_of(await phone.post("/api/verify", json={"method": "passkey"}))["verified"] is True
    assert data_of(await phone.get("/api/verify/status"))["method"] == "passkey"
    deleted = await phone.delete("/api/user/passkey", params={"credential_id": spare.id})
    assert data_of(deleted) == {"deleted": 1}
    [left] = data_of(await phone.get("/api/user/passkey"))["credentials"]
    assert left["credential_id"] == passkey.id
    fails((await try_login(app, spare))[1], 401)  # the deleted passkey no longer logs in

    # 6. forgotten password: reset by the mailed link ends every session, pending logins too
    halfway = app.client()
    assert data_of(await halfway.post("/api/user/login", json={"username": "newcomer", "password": PASSWORD})
                   ) == {"require_2fa": True}
    assert (await request_reset(app.client(), EMAIL)).status_code == 200
    done = await app.client().post("/api/user/reset", json={
        "email": EMAIL, "token": smtp.token_for(EMAIL), "password": NEW_PASSWORD})
    assert data_of(done) is None
    for api in (first, web, phone):
        fails(await api.get("/api/user/self"), 401)
    next_step(app)  # the old password's pending login cannot be finished, even with a good code
    fails(await second_step(halfway, code_now(app, secret)), 401, "login expired, please log in again")
    fails(await app.client().post("/api/user/login", json={"username": "newcomer", "password": PASSWORD}),
          401, "invalid username or password")
    again = await totp_login(app, "newcomer", secret, NEW_PASSWORD)
    assert data_of(await again.get("/api/user/self"))["id"] == uid
    assert await session_method(app, again) == "password+2fa"
    assert data_of(await again.get("/api/user/2fa/status"))["backup_codes_remaining"] == len(backup_codes)


async def test_root_reveals_a_channel_key_only_after_a_verification(app: Running) -> None:
    await enable_passkeys(app)
    [cid] = await create(await admin_of(app), key="AIza-journey-secret")
    root_id = await add_user(app.state, "root", role=100)
    root = await logged_in(app, "root")
    secret, _ = await enable(app, root)
    next_step(app)
    data_of(await root.post("/api/verify", json={"method": "2fa", "code": code_now(app, secret)}))
    passkey = new_passkey(root_id)
    await register(root, passkey)

    console, response = await try_login(app, passkey)  # a new session, opened by the passkey
    data_of(response)
    refused_for_verification(await console.post(f"/api/channel/{cid}/key"))
    data_of(await verify(console, passkey))
    refused_for_verification(await console.post(f"/api/channel/{cid}/key"))  # not confirmed yet
    data_of(await console.post("/api/verify", json={"method": "passkey"}))
    assert data_of(await console.post(f"/api/channel/{cid}/key")) == {"key": "AIza-journey-secret"}


async def test_the_register_gate_applies_only_while_2fa_is_on(app: Running) -> None:
    await enable_passkeys(app)
    uid = await add_user(app.state, "gina")
    gina = await logged_in(app, "gina")
    early = new_passkey(uid)
    assert await register(gina, early) == early.id  # no 2FA: no verification needed
    assert data_of(await gina.get("/api/verify/status"))["verified"] is False

    secret, _ = await enable(app, gina)
    refused_for_verification(await gina.post("/api/user/passkey/register/begin"))
    # a verification made with a passkey does not open it: the gate asks for 2FA
    data_of(await verify(gina, early))
    data_of(await gina.post("/api/verify", json={"method": "passkey"}))
    refused_for_verification(await gina.post("/api/user/passkey/register/begin"))
    next_step(app)
    data_of(await gina.post("/api/verify", json={"method": "2fa", "code": code_now(app, secret)}))
    assert await register(gina, new_passkey(uid))

    next_step(app)
    data_of(await gina.post("/api/user/2fa/disable", json={"code": code_now(app, secret)}))
    fresh = await logged_in(app, "gina")  # 2FA off again: a new, unverified session may add one
    assert data_of(await fresh.get("/api/verify/status"))["verified"] is False
    assert await register(fresh, new_passkey(uid))
    assert data_of(await fresh.get("/api/user/passkey"))["count"] == 3
