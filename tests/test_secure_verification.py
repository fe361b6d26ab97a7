"""Secure verification over HTTP (docs/api/auth.md#secure-verification), on every stack.

Proves:
- `POST /api/verify` with `2fa` and a right code marks the calling session (and only it) verified for
  300 s: `GET /api/verify/status` shows method and expiry, on the injectable clock; every refusal of the
  reference is a 400 naming the field (no second factor, unknown method, no code, a wrong code); an access
  token is refused (session only);
- with `passkey` it takes the mark a passkey assertion left in the session record: accepted when under
  60 s old, consumed whether or not it was, and by one of several concurrent requests only;
- the channel key reveal works after a verification and answers 403 `VERIFICATION_REQUIRED` before one and
  `VERIFICATION_EXPIRED` 301 s after it;
- `SessionVerifier` refuses a verification made with another method than the one required, and a caller
  without a session.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from core.identity import Principal, UserState
from server.auth.verify import VerificationService
from server.clock import Clock
from server.components.verification import VERIFICATION_EXPIRED, VERIFICATION_REQUIRED, SessionVerifier
from server.errors import BadRequest, Forbidden
from tests.harness import Running, add_user, data_of, fails, logged_in
from tests.test_channels import admin_of, create
from tests.test_two_factor import code_now, enable, session_of, two_factor_user

NOT_VERIFIED = {"verified": False, "method": "", "expires_at": 0}


def refusal(code: str) -> dict[str, Any]:
    return {"success": False, "message": "secure verification required", "code": code}


def move_to(app: Running, second: int) -> None:
    """Set the clock to the start of `second` (the next requests then run within it)."""
    app.clock.shift(second - app.clock.now())


async def mark_passkey_ready(app: Running, raw: str, at: int) -> None:
    """What a successful passkey `verify/finish` leaves in the session record."""
    record = await app.state.sessions.get(raw)
    assert record is not None
    await app.state.sessions.save(raw, {**record, "secure_passkey_ready_at": at})


async def test_verify_with_2fa_marks_this_session_for_five_minutes(app: Running) -> None:
    uid, api, secret, codes = await two_factor_user(app)
    assert data_of(await api.get("/api/verify/status")) == NOT_VERIFIED
    fails(await api.post("/api/verify", json={"method": "sms", "code": "123456"}), 400,
          "method: must be 2fa or passkey")
    fails(await api.post("/api/verify", json={"method": "2fa"}), 400, "code: is required")
    fails(await api.post("/api/verify", json={"method": "2fa", "code": "000000"}), 400,
          "code: invalid 2FA code")
    fails(await api.post("/api/verify", json={"method": "passkey"}), 400, "method:", prefix=True)
    fails(await api.post("/api/verify", json={"code": "1"}), 400, "method: is required")

    app.clock.shift(30)
    move_to(app, app.clock.now_s() + 1)
    at = app.clock.now_s()
    assert data_of(await api.post("/api/verify", json={"method": "2fa", "code": code_now(app, secret)})) == {
        "verified": True, "expires_at": at + 300}
    assert data_of(await api.get("/api/verify/status")) == {"verified": True, "method": "2fa",
                                                            "expires_at": at + 300}
    record = await app.state.sessions.get(session_of(api))
    assert record is not None
    assert (record["secure_verified_at"], record["secure_verified_method"]) == (at, "2fa")
    move_to(app, at + 299)
    assert data_of(await api.get("/api/verify/status"))["verified"] is True  # not consumed by reading
    move_to(app, at + 300)
    assert data_of(await api.get("/api/verify/status")) == NOT_VERIFIED
    # a backup code verifies too; another session of the same user stays unverified
    data_of(await api.post("/api/verify", json={"method": "2fa", "code": codes[0]}))
    assert data_of(await api.get("/api/verify/status"))["verified"] is True
    other = "F" * 43
    await app.state.sessions.save(other, {"id": uid, "role": 1, "auth_method": "password+2fa",
                                          "pushed_at": app.clock.now_s()})
    elsewhere = app.client(cookies={"session": other})
    elsewhere.user_id = uid
    assert data_of(await elsewhere.get("/api/verify/status")) == NOT_VERIFIED


async def test_verify_needs_a_second_factor_and_a_session(app: Running) -> None:
    uid = await add_user(app.state, "bob")
    api = await logged_in(app, "bob")
    for method in ("2fa", "passkey"):
        fails(await api.post("/api/verify", json={"method": method, "code": "123456"}), 400,
              "method: no second factor", prefix=True)
    token = data_of(await api.get("/api/user/token"))
    scripted = app.client()
    scripted.user_id, scripted.token = uid, token
    fails(await scripted.post("/api/verify", json={"method": "2fa", "code": "123456"}), 403,
          "this action requires a login session")
    assert data_of(await scripted.get("/api/verify/status")) == NOT_VERIFIED


async def test_verify_with_a_fresh_passkey_mark_consumes_it(app: Running) -> None:
    _, api, _, _ = await two_factor_user(app)
    raw = session_of(api)
    move_to(app, app.clock.now_s() + 1)
    now = app.clock.now_s()
    await mark_passkey_ready(app, raw, now - 59)
    assert data_of(await api.post("/api/verify", json={"method": "passkey"})) == {
        "verified": True, "expires_at": now + 300}
    assert data_of(await api.get("/api/verify/status"))["method"] == "passkey"
    record = await app.state.sessions.get(raw)
    assert record is not None and "secure_passkey_ready_at" not in record
    fails(await api.post("/api/verify", json={"method": "passkey"}), 400, "method:", prefix=True)

    await mark_passkey_ready(app, raw, app.clock.now_s() - 60)  # too old: refused, and consumed anyway
    fails(await api.post("/api/verify", json={"method": "passkey"}), 400, "method:", prefix=True)
    record = await app.state.sessions.get(raw)
    assert record is not None and "secure_passkey_ready_at" not in record


async def test_a_passkey_mark_verifies_once_however_many_requests_race_for_it(app: Running) -> None:
    _, api, _, _ = await two_factor_user(app)
    raw = session_of(api)
    move_to(app, app.clock.now_s() + 1)
    await mark_passkey_ready(app, raw, app.clock.now_s())
    answers = await asyncio.gather(*(api.post("/api/verify", json={"method": "passkey"}) for _ in range(8)))
    assert sorted(a.status_code for a in answers) == [200] + [400] * 7
    record = await app.state.sessions.get(raw)
    assert record is not None and "secure_passkey_ready_at" not in record
    assert record["secure_verified_method"] == "passkey"


async def test_the_key_reveal_works_within_five_minutes_of_a_verification(app: Running) -> None:
    admin = await admin_of(app)
    [cid] = await create(admin, key="AIza-revealed-secret")
    await add_user(app.state, "root", role=100)
    root = await logged_in(app, "root")
    secret, _ = await enable(app, root)

    refused = await root.post(f"/api/channel/{cid}/key")
    assert refused.status_code == 403 and refused.json() == refusal(VERIFICATION_REQUIRED)
    app.clock.shift(30)
    verified = data_of(await root.post("/api/verify", json={"method": "2fa", "code": code_now(app, secret)}))
    at = verified["expires_at"] - 300
    assert data_of(await root.post(f"/api/channel/{cid}/key")) == {"key": "AIza-revealed-secret"}
    move_to(app, at + 299)
    assert data_of(await root.post(f"/api/channel/{cid}/key")) == {"key": "AIza-revealed-secret"}
    move_to(app, at + 301)  # 301 s after the verification
    expired = await root.post(f"/api/channel/{cid}/key")
    assert expired.status_code == 403 and expired.json() == refusal(VERIFICATION_EXPIRED)


def principal_with(session: dict[str, Any] | None, user_id: int = 1, session_id: str | None = None
                   ) -> Principal:
    user = UserState(id=user_id, username="root", display_name="root", role=100, status=1, group="default",
                     token_digest=None, deleted=False)
    return Principal(user=user, via="session" if session is not None else "token", session_id=session_id,
                     session=session)


async def test_the_verifier_checks_method_age_and_session() -> None:
    clock = Clock()
    verifier = SessionVerifier(clock)
    now = clock.now_s()
    by_passkey = principal_with({"id": 1, "secure_verified_at": now, "secure_verified_method": "passkey"})
    await verifier.require(by_passkey)
    await verifier.require(by_passkey, "passkey")
    for principal, method, code in ((by_passkey, "2fa", VERIFICATION_REQUIRED),
                                    (principal_with(None), None, VERIFICATION_REQUIRED),
                                    (principal_with({"id": 1}), None, VERIFICATION_REQUIRED)):
        with pytest.raises(Forbidden) as refused:
            await verifier.require(principal, method)  # type: ignore[arg-type]
        assert refused.value.code == code
    clock.shift(300)
    with pytest.raises(Forbidden) as refused:
        await verifier.require(by_passkey)
    assert refused.value.code == VERIFICATION_EXPIRED


class OnePasskey:
    """A user with one passkey (the passkey store is another part of the work)."""

    async def count(self, user_id: int) -> int:
        return 1


async def test_2fa_without_2fa_is_refused_when_a_passkey_exists(app: Running) -> None:
    uid = await add_user(app.state, "bob")
    api = await logged_in(app, "bob")
    current: VerificationService = app.app.ctx.services.verification
    service = VerificationService(factor=current.factor, passkeys=OnePasskey(), sessions=current.sessions,
                                  clock=current.clock)
    record = await app.state.sessions.get(session_of(api))
    principal = principal_with(record, uid, session_of(api))
    with pytest.raises(BadRequest, match="method: 2FA is not enabled"):
        await service.verify(principal, "2fa", "123456")
