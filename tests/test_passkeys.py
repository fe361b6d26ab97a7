"""Passkeys over HTTP with a software authenticator (tests/fakes/passkey.py), on every stack
(docs/api/auth.md#passkeys).

Proves:
- registration answers the credential id, the status lists it, and a passkey login opens a session with
  `auth_method` `passkey` and no TOTP step; verification marks the session `secure_passkey_ready_at`;
- a replayed assertion, a wrong origin, a wrong RP id, a user handle that is not the owner's, a missing
  user verification when it is required, and a challenge older than 120 s (moved clock) are refused;
- a signature counter that goes backwards is refused, flags `clone_warning` and logs a warning that
  carries no challenge, signature or key;
- the 11th passkey and a passkey registered twice are 409s; a disabled account's login is a 403;
- two finishes of one challenge at once: exactly one wins (login: shared backend; verify: the session).
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from fido2.utils import websafe_encode

from server.auth.passkeys import READY_MARK
from tests.fakes.passkey import Flag, SoftPasskey
from tests.harness import Running, add_user, data_of, logged_in
from tests.passkey_flows import (
    ORIGIN,
    RP_ID,
    begin,
    enable_passkeys,
    new_passkey,
    refused,
    register,
    session_of,
    stored,
    try_login,
)

LOGIN_FAILED = "passkey login failed"


async def test_register_list_and_log_in_without_a_totp_step(app: Running) -> None:
    await enable_passkeys(app)
    uid = await add_user(app.state, "alice")
    alice = await logged_in(app, "alice")
    empty = data_of(await alice.get("/api/user/passkey"))
    assert empty == {"enabled": False, "count": 0, "last_used_at": 0, "credentials": []}

    passkey = new_passkey(uid)
    options = await begin(alice, "register")
    public_key = options["publicKey"]
    assert public_key["rp"] == {"id": RP_ID, "name": "Tollway"}
    assert public_key["user"] == {"id": websafe_encode(str(uid).encode()), "name": "alice",
                                  "displayName": "alice"}
    assert public_key["timeout"] == 120000 and public_key["attestation"] == "none"
    assert public_key["authenticatorSelection"]["residentKey"] == "required"
    before = app.clock.now_s()
    finished = await alice.post("/api/user/passkey/register/finish", json=passkey.register(options))
    assert data_of(finished) == {"credential_id": passkey.id}

    status = data_of(await alice.get("/api/user/passkey"))
    assert status["enabled"] is True and status["count"] == 1
    [item] = status["credentials"]
    assert before <= item.pop("created_at") <= app.clock.now_s()
    assert item == {"credential_id": passkey.id, "attachment": "cross-platform", "last_used_at": 0}

    before = app.clock.now_s()
    api, response = await try_login(app, passkey)
    login = data_of(response)
    assert login["id"] == uid and login["username"] == "alice" and "require_2fa" not in login
    record = await app.state.sessions.get(session_of(api))
    assert record is not None and record["id"] == uid and record["auth_method"] == "passkey"
    assert data_of(await api.get("/api/user/self"))["username"] == "alice"
    row = await stored(app, passkey.id)
    assert row is not None and row.sign_count == 1 and before <= row.last_used_at <= app.clock.now_s()
    assert data_of(await api.get("/api/user/passkey"))["last_used_at"] == row.last_used_at


async def test_verification_marks_the_session_passkey_ready(app: Running) -> None:
    await enable_passkeys(app)
    uid = await add_user(app.state, "bob")
    bob = await logged_in(app, "bob")
    refused(await bob.post("/api/user/passkey/verify/begin"), 404, "you have no passkeys")
    passkey = new_passkey(uid)
    await register(bob, passkey)

    options = await begin(bob, "verify")
    assert [c["id"] for c in options["publicKey"]["allowCredentials"]] == [passkey.id]
    before = app.clock.now_s()
    assert data_of(await bob.post("/api/user/passkey/verify/finish", json=passkey.assert_(options))) == {
        "verified": True}
    record = await app.state.sessions.get(session_of(bob))
    assert record is not None and before <= record[READY_MARK] <= app.clock.now_s()
    assert "passkey_verify" not in record  # the challenge was taken

    # someone else's passkey cannot verify bob
    other = await add_user(app.state, "carol")
    carol = await logged_in(app, "carol")
    hers = new_passkey(other)
    await register(carol, hers)
    options = await begin(bob, "verify")
    refused(await bob.post("/api/user/passkey/verify/finish", json=hers.assert_(options)), 400,
            "id: not one of your passkeys")


async def test_a_replayed_assertion_is_refused(app: Running) -> None:
    await enable_passkeys(app)
    uid = await add_user(app.state, "dave")
    passkey = new_passkey(uid)
    await register(await logged_in(app, "dave"), passkey)
    api = app.client()
    body = passkey.assert_(await begin(api, "login"))
    data_of(await api.post("/api/user/passkey/login/finish", json=body))
    refused(await app.client().post("/api/user/passkey/login/finish", json=body), 401)


async def test_wrong_origin_wrong_rp_id_and_foreign_user_handle_are_refused(app: Running) -> None:
    await enable_passkeys(app)
    uid = await add_user(app.state, "erin")
    erin = await logged_in(app, "erin")
    passkey = new_passkey(uid)

    passkey.origin = "https://evil.test"
    options = await begin(erin, "register")
    refused(await erin.post("/api/user/passkey/register/finish", json=passkey.register(options)), 400,
            "passkey registration failed")
    passkey.origin = ORIGIN
    await register(erin, passkey)

    passkey.origin = "https://tollway.test.evil.test"
    refused((await try_login(app, passkey))[1], 401, LOGIN_FAILED)
    passkey.origin = ORIGIN
    passkey.rp_id = "evil.test"
    refused((await try_login(app, passkey))[1], 401, LOGIN_FAILED)
    passkey.rp_id = RP_ID
    refused((await try_login(app, passkey, user_handle=str(uid + 1).encode()))[1], 401, LOGIN_FAILED)
    data_of((await try_login(app, passkey))[1])  # and the passkey itself still works


async def test_user_verification_is_enforced_only_when_required(app: Running) -> None:
    await enable_passkeys(app)
    uid = await add_user(app.state, "fay")
    passkey = new_passkey(uid)
    await register(await logged_in(app, "fay"), passkey)
    data_of((await try_login(app, passkey, flags=Flag.UP))[1])  # "preferred": UV not needed
    await app.state.options.put("passkey.user_verification", "required")
    refused((await try_login(app, passkey, flags=Flag.UP))[1], 401, LOGIN_FAILED)
    data_of((await try_login(app, passkey))[1])


async def test_a_challenge_older_than_120_seconds_is_refused(app: Running) -> None:
    await enable_passkeys(app)
    uid = await add_user(app.state, "gus")
    gus = await logged_in(app, "gus")
    passkey = new_passkey(uid)

    options = await begin(gus, "register")
    app.clock.shift(121)
    refused(await gus.post("/api/user/passkey/register/finish", json=passkey.register(options)), 400)
    await register(gus, passkey)

    api = app.client()
    options = await begin(api, "login")
    app.clock.shift(121)
    refused(await api.post("/api/user/passkey/login/finish", json=passkey.assert_(options)), 401)

    options = await begin(gus, "verify")
    app.clock.shift(121)
    refused(await gus.post("/api/user/passkey/verify/finish", json=passkey.assert_(options)), 400)

    options = await begin(api, "login")
    app.clock.shift(119)
    data_of(await api.post("/api/user/passkey/login/finish", json=passkey.assert_(options)))


async def test_a_counter_going_backwards_is_refused_and_flags_the_passkey(
        app: Running, caplog: pytest.LogCaptureFixture) -> None:
    await enable_passkeys(app)
    uid = await add_user(app.state, "hal")
    passkey = new_passkey(uid)
    await register(await logged_in(app, "hal"), passkey)
    data_of((await try_login(app, passkey))[1])
    data_of((await try_login(app, passkey))[1])  # stored counter: 2

    clone = SoftPasskey(RP_ID, ORIGIN, uid)
    clone.key, clone.credential_id, clone.counter = passkey.key, passkey.credential_id, 1
    caplog.set_level(logging.WARNING, logger="tollway.passkeys")
    api = app.client()
    options = await begin(api, "login")
    body = clone.assert_(options)  # counter 2: not above the stored 2
    refused(await api.post("/api/user/passkey/login/finish", json=body), 401, LOGIN_FAILED)
    row = await stored(app, passkey.id)
    assert row is not None and row.clone_warning is True and row.sign_count == 2

    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "tollway.passkeys"]
    assert len(warnings) == 1
    text = warnings[0].getMessage()
    assert "counter" in text and "clone_warning" in text
    for secret in (options["publicKey"]["challenge"], body["response"]["signature"], row.public_key,
                   body["response"]["clientDataJSON"], body["response"]["authenticatorData"]):
        assert secret not in text

    data_of((await try_login(app, passkey))[1])  # the genuine authenticator (counter 3) still logs in


async def test_the_eleventh_passkey_and_a_duplicate_are_409(app: Running) -> None:
    await enable_passkeys(app)
    uid = await add_user(app.state, "ivy")
    ivy = await logged_in(app, "ivy")
    first = new_passkey(uid)
    await register(ivy, first)

    options = await begin(ivy, "register")
    assert [c["id"] for c in options["publicKey"]["excludeCredentials"]] == [first.id]
    refused(await ivy.post("/api/user/passkey/register/finish", json=first.register(options)), 409,
            "this passkey is already registered")
    other = await add_user(app.state, "jon")
    jon = await logged_in(app, "jon")
    refused(await jon.post("/api/user/passkey/register/finish",
                           json=first.register(await begin(jon, "register"))), 409)

    for _ in range(9):
        await register(ivy, new_passkey(uid))
    assert data_of(await ivy.get("/api/user/passkey"))["count"] == 10
    refused(await ivy.post("/api/user/passkey/register/begin"), 409)
    assert other != uid


async def test_a_disabled_account_cannot_log_in_with_a_passkey(app: Running) -> None:
    await enable_passkeys(app)
    await add_user(app.state, "root", role=100)
    uid = await add_user(app.state, "kim")
    passkey = new_passkey(uid)
    await register(await logged_in(app, "kim"), passkey)
    root = await logged_in(app, "root")
    data_of(await root.post("/api/user/manage", json={"id": uid, "action": "disable"}))
    api, response = await try_login(app, passkey)
    refused(response, 403, "account disabled")
    assert api.http.cookies.get("session") is None


async def test_two_finishes_of_one_challenge_at_once_one_wins(app: Running) -> None:
    await enable_passkeys(app)
    uid = await add_user(app.state, "lea")
    lea = await logged_in(app, "lea")
    passkey = new_passkey(uid)
    await register(lea, passkey)

    body = passkey.assert_(await begin(app.client(), "login"))
    answers = await asyncio.gather(*(app.client().post("/api/user/passkey/login/finish", json=body)
                                     for _ in range(2)))
    assert sorted(r.status_code for r in answers) == [200, 401]

    body = passkey.assert_(await begin(lea, "verify"))
    answers = await asyncio.gather(*(lea.post("/api/user/passkey/verify/finish", json=body)
                                     for _ in range(2)))
    assert sorted(r.status_code for r in answers) == [200, 400]


async def test_a_new_begin_replaces_the_pending_challenge(app: Running) -> None:
    await enable_passkeys(app)
    uid = await add_user(app.state, "max")
    max_ = await logged_in(app, "max")
    passkey = new_passkey(uid)
    stale = await begin(max_, "register")
    fresh = await begin(max_, "register")
    refused(await max_.post("/api/user/passkey/register/finish", json=passkey.register(stale)), 400)
    # the failed finish used up the pending challenge too
    refused(await max_.post("/api/user/passkey/register/finish", json=passkey.register(fresh)), 400)
    await register(max_, passkey)


async def test_a_malformed_answer_is_a_400_naming_the_field_and_odd_data_a_refusal(app: Running) -> None:
    await enable_passkeys(app)
    uid = await add_user(app.state, "ned")
    passkey = new_passkey(uid)
    await register(await logged_in(app, "ned"), passkey)
    api = app.client()
    body = passkey.assert_(await begin(api, "login"))
    bad_id = {**body, "id": "not base64url!"}
    assert refused(await api.post("/api/user/passkey/login/finish", json=bad_id), 400)["message"].startswith(
        "id: ")
    no_signature = {**body, "response": {k: v for k, v in body["response"].items() if k != "signature"}}
    refused(await api.post("/api/user/passkey/login/finish", json=no_signature), 400,
            "response.signature: is required")
    odd_handle = {**body, "response": {**body["response"], "userHandle": "A"}}  # not a whole byte
    refused(await api.post("/api/user/passkey/login/finish", json=odd_handle), 401, LOGIN_FAILED)
    odd_client_data = {**body, "response": {**body["response"], "clientDataJSON": "A"}}
    refused(await app.client().post("/api/user/passkey/login/finish", json=odd_client_data), 401)
