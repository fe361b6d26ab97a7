"""Passkeys: deletion, the admin reset, the on/off switch, the relying party's resolution and the options
(docs/api/auth.md#passkeys).

Proves:
- deleting passkeys needs a session and a fresh secure verification (403 `VERIFICATION_REQUIRED` without);
  after `POST /api/verify` with method `passkey` one or all are deleted, and nothing left is a 404;
- the admin reset deletes every passkey of a user below the actor's role, logs a manage entry, and is a 403
  up the hierarchy, a 404 for an unknown user or one without passkeys;
- with passkeys switched off the ceremonies are 403s while status, delete and the admin reset still answer;
- `/api/status` shows the relying party as resolved: options, else `ServerAddress`, else `Host` +
  `X-Forwarded-Proto`; plain http is refused off localhost unless insecure origins are allowed, and a
  passkey made for the request's own local origin works end to end;
- the passkey options are checked when set.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from core.enums import LogType
from core.relying_party import PasskeyPolicy, RelyingParty, RequestSite, resolve
from models.logs import Log
from tests.fakes.passkey import SoftPasskey
from tests.harness import Running, add_user, data_of, logged_in
from tests.passkey_flows import begin, enable_passkeys, new_passkey, refused, register, try_login, verify

REQUIRED = {"success": False, "message": "secure verification required", "code": "VERIFICATION_REQUIRED"}


async def test_deleting_needs_a_session_and_a_secure_verification(app: Running) -> None:
    await enable_passkeys(app)
    uid = await add_user(app.state, "alice")
    alice = await logged_in(app, "alice")
    passkey = new_passkey(uid)
    await register(alice, passkey)

    assert (await alice.delete("/api/user/passkey")).json() == REQUIRED
    response = await alice.delete("/api/user/passkey", params={"credential_id": passkey.id})
    assert response.status_code == 403 and response.json() == REQUIRED
    assert await app.app.ctx.services.passkeys.count(uid) == 1

    by_token = app.client()
    by_token.token = data_of(await alice.get("/api/user/token"))
    by_token.user_id = uid
    refused(await by_token.delete("/api/user/passkey"), 403, "this action requires a login session")
    assert data_of(await by_token.get("/api/user/passkey"))["count"] == 1  # reading needs no session


async def test_deleting_after_a_passkey_verification(app: Running) -> None:
    """Needs `POST /api/verify` (method `passkey`) and the session verifier of the 2FA work."""
    await enable_passkeys(app)
    uid = await add_user(app.state, "bob")
    bob = await logged_in(app, "bob")
    first, second = new_passkey(uid), new_passkey(uid)
    await register(bob, first)
    await register(bob, second)

    data_of(await verify(bob, first))
    assert data_of(await bob.post("/api/verify", json={"method": "passkey"}))["verified"] is True
    deleted = await bob.delete("/api/user/passkey", params={"credential_id": first.id})
    assert data_of(deleted) == {"deleted": 1}
    refused(await bob.delete("/api/user/passkey", params={"credential_id": first.id}), 404)
    assert data_of(await bob.delete("/api/user/passkey")) == {"deleted": 1}
    refused(await bob.delete("/api/user/passkey"), 404, "you have no passkeys")
    assert data_of(await bob.get("/api/user/passkey"))["count"] == 0


async def test_the_admin_reset_follows_the_role_hierarchy(app: Running) -> None:
    await enable_passkeys(app)
    root_id = await add_user(app.state, "root", role=100)
    await add_user(app.state, "admin1", role=10)
    admin2 = await add_user(app.state, "admin2", role=10)
    uid = await add_user(app.state, "carol")
    carol = await logged_in(app, "carol")
    await register(carol, new_passkey(uid))
    await register(carol, new_passkey(uid))
    await register(await logged_in(app, "admin2"), new_passkey(admin2))
    admin = await logged_in(app, "admin1")
    root = await logged_in(app, "root")

    refused(await carol.delete(f"/api/user/{uid}/reset_passkey"), 403, "permission denied")
    refused(await admin.delete(f"/api/user/{admin2}/reset_passkey"), 403)
    refused(await admin.delete(f"/api/user/{root_id}/reset_passkey"), 403)
    assert data_of(await admin.delete(f"/api/user/{uid}/reset_passkey")) == {"deleted": 2}
    refused(await admin.delete(f"/api/user/{uid}/reset_passkey"), 404, "the user has no passkeys")
    refused(await admin.delete("/api/user/999999/reset_passkey"), 404, "user not found")
    assert data_of(await root.delete(f"/api/user/{admin2}/reset_passkey")) == {"deleted": 1}
    assert data_of(await carol.get("/api/user/passkey"))["count"] == 0

    async with app.state.db.transaction() as tx:
        logs = (await tx.scalars(select(Log).where(Log.type == LogType.MANAGE).order_by(Log.id))).all()
    assert [(log.user_id, log.content) for log in logs] == [
        (uid, "admin admin1 reset the passkeys of user carol (2 deleted)"),
        (admin2, "admin root reset the passkeys of user admin2 (1 deleted)")]


async def test_switched_off_only_the_ceremonies_are_refused(app: Running) -> None:
    await enable_passkeys(app)
    await add_user(app.state, "root", role=100)
    uid = await add_user(app.state, "dave")
    dave = await logged_in(app, "dave")
    passkey = new_passkey(uid)
    await register(dave, passkey)
    options = await begin(dave, "verify")
    await app.state.options.put("passkey.enabled", False)

    anonymous = app.client()
    for path in ("register/begin", "login/begin", "verify/begin"):
        caller = anonymous if path.startswith("login") else dave
        refused(await caller.post(f"/api/user/passkey/{path}"), 403, "passkeys are disabled")
    refused(await dave.post("/api/user/passkey/verify/finish", json=passkey.assert_(options)), 403,
            "passkeys are disabled")
    refused(await anonymous.post("/api/user/passkey/login/finish", json=passkey.assert_(options)), 403,
            "passkeys are disabled")
    assert data_of(await app.client().get("/api/status"))["passkey_login"] is False

    assert data_of(await dave.get("/api/user/passkey"))["count"] == 1
    assert (await dave.delete("/api/user/passkey")).json() == REQUIRED  # refused for its own reason
    root = await logged_in(app, "root")
    assert data_of(await root.delete(f"/api/user/{uid}/reset_passkey")) == {"deleted": 1}


async def test_the_status_shows_the_resolved_relying_party(embedded_app: Running) -> None:
    app = embedded_app
    api = app.client()
    port = app.url.rsplit(":", 1)[1]
    status = data_of(await api.get("/api/status"))
    assert {k: v for k, v in status.items() if k.startswith("passkey_")} == {
        "passkey_login": False, "passkey_display_name": "Tollway", "passkey_rp_id": "127.0.0.1",
        "passkey_origins": f"http://127.0.0.1:{port}", "passkey_allow_insecure": False,
        "passkey_user_verification": "preferred", "passkey_attachment": ""}

    proxied = data_of(await api.get("/api/status", headers={"Host": "Gate.Example.com",
                                                             "X-Forwarded-Proto": "https"}))
    assert (proxied["passkey_rp_id"], proxied["passkey_origins"]) == ("gate.example.com",
                                                                      "https://gate.example.com")

    await app.state.options.put("ServerAddress", "https://gw.example.org:8443")
    status = data_of(await api.get("/api/status", headers={"Host": "other.example.com"}))
    assert (status["passkey_rp_id"], status["passkey_origins"]) == ("gw.example.org",
                                                                    "https://gw.example.org:8443")

    for key, value in {"passkey.rp_id": "example.org", "passkey.rp_display_name": "Gate",
                       "passkey.origins": "https://a.example.org, https://b.example.org",
                       "passkey.user_verification": "required", "passkey.attachment_preference": "platform",
                       "passkey.allow_insecure_origin": True, "passkey.enabled": True}.items():
        await app.state.options.put(key, value)
    status = data_of(await api.get("/api/status"))
    assert {k: v for k, v in status.items() if k.startswith("passkey_")} == {
        "passkey_login": True, "passkey_display_name": "Gate", "passkey_rp_id": "example.org",
        "passkey_origins": "https://a.example.org,https://b.example.org", "passkey_allow_insecure": True,
        "passkey_user_verification": "required", "passkey_attachment": "platform"}
    options = await begin(api, "login")
    assert options["publicKey"]["rpId"] == "example.org"
    assert options["publicKey"]["userVerification"] == "required"


async def test_plain_http_is_refused_off_localhost_unless_allowed(embedded_app: Running) -> None:
    app = embedded_app
    await app.state.options.put("passkey.enabled", True)
    api = app.client()
    refused(await api.post("/api/user/passkey/login/begin", headers={"Host": "gate.example.com"}), 400)
    over_tls = await api.post("/api/user/passkey/login/begin",
                              headers={"Host": "gate.example.com", "X-Forwarded-Proto": "https"})
    assert data_of(over_tls)["options"]["publicKey"]["rpId"] == "gate.example.com"
    refused(await api.post("/api/user/passkey/login/begin", headers={"Host": "bad_host.example"}), 400)
    await app.state.options.put("passkey.allow_insecure_origin", True)
    insecure = await api.post("/api/user/passkey/login/begin", headers={"Host": "gate.example.com"})
    assert data_of(insecure)["options"]["publicKey"]["rpId"] == "gate.example.com"

    # a passkey made for the request's own local origin (no option names one) works end to end
    await app.state.options.put("passkey.allow_insecure_origin", False)
    uid = await add_user(app.state, "erin")
    passkey = SoftPasskey("127.0.0.1", app.url, uid)
    await register(await logged_in(app, "erin"), passkey)
    data_of((await try_login(app, passkey))[1])


async def test_the_passkey_options_are_checked(embedded_app: Running) -> None:
    await add_user(embedded_app.state, "root", role=100)
    root = await logged_in(embedded_app, "root")

    async def put(key: str, value: object) -> int:
        response = await root.put("/api/option/", json={"key": key, "value": value})
        if response.status_code != 200:
            assert response.json()["message"].startswith(f"{key}: "), response.text
        return response.status_code

    assert await put("passkey.origins", "ftp://a.example.org") == 400
    assert await put("passkey.origins", "https://a.example.org/login") == 400
    assert await put("passkey.origins", "https://a.example.org:99999") == 400
    assert await put("passkey.origins", "https://a.example.org, http://localhost:3000") == 200
    assert await put("passkey.rp_id", "https://example.org") == 400
    assert await put("passkey.rp_id", "example.org") == 200
    assert await put("passkey.user_verification", "sometimes") == 400
    assert await put("passkey.attachment_preference", "usb") == 400
    assert await put("passkey.enabled", "yes") == 400
    assert await put("passkey.enabled", True) == 200


def test_the_relying_party_resolution_rules() -> None:
    def rp(server_address: str = "", host: str = "", scheme: str = "http", **policy: object) -> RelyingParty:
        fields: dict[str, Any] = {"rp_id": "", "rp_display_name": "", "origins": "",
                                     "user_verification": "preferred", "attachment": "",
                                     "allow_insecure_origin": False, **policy}
        return resolve(PasskeyPolicy(**fields), server_address, "Tollway", RequestSite(host, scheme))

    assert rp("https://user:pw@Gate.Example.com:443/base", "ignored.example") == RelyingParty(
        "gate.example.com", "Tollway", ("https://gate.example.com",), ())
    assert rp(host="[::1]:8080").origins == ("http://[::1]:8080",)
    assert rp(host="app.localhost:3000").insecure == ()
    assert rp(host="intranet:8080").insecure == ("http://intranet:8080",)
    assert rp(host="intranet:8080", allow_insecure_origin=True).insecure == ()
    assert rp("http://intranet").insecure == ("http://intranet",)  # a ServerAddress is held to the rule too
    assert rp(host="gate.example.com", scheme="https").origins == ("https://gate.example.com",)
    assert rp(host="a b").rp_id == "" and rp(host="").origins == ()
    listed = rp(host="x.example", rp_id="Example.com", origins="https://a.example.com/, https://b.example.com")
    assert (listed.rp_id, listed.origins) == ("example.com", ("https://a.example.com", "https://b.example.com"))
    assert rp(rp_display_name=" Gate ").name == "Gate"
