"""E-mail verification codes (docs/api/auth.md#e-mail-codes-and-password-reset) over HTTP, with a real SMTP
server (tests/fakes/smtp.py), on every stack.

Proves: the code read from the mail completes a registration when `EmailVerificationEnabled` is on, once;
email and code are then required and the code is checked last; five wrong tries delete a code; a code
expires after 10 minutes of the service clock and is replaced by a newer one; two registrations racing
with one code create one user; an address in use gets 409 and no mail; unconfigured sending is a 400;
a refusing server is a 500 that stores nothing (the refused code never works); the per-IP and per-address
limits answer 429 with `Retry-After`, across both sending routes; the domain whitelist and the alias rule;
binding an address to one's account (409 when taken); AUTH only with account and token; and no code or
SMTP token in any reply or log line.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

import pytest
from sqlalchemy import select

from models.tables import User
from models.users import UserRepository
from server.components.email_codes import EmailCodes
from tests.conftest import Stack
from tests.fakes.smtp import CODE, FakeSmtp
from tests.harness import Api, Running, add_user, data_of, fails, logged_in, make_config, serve
from tests.mail import (
    PASSWORD,
    SENDER,
    configure,
    from_ip,
    logged_text,
    mail_server,
    new_ip,
    request_code,
    request_reset,
)

NOT_CONFIGURED = "e-mail sending is not configured (SMTPServer, SMTPFrom)"


async def register(api: Api, username: str, email: str, code: str | None) -> int:
    body = {"username": username, "password": PASSWORD, "email": email}
    if code is not None:
        body["verification_code"] = code
    response = await api.post("/api/user/register", json=body)
    return response.status_code


async def users_with_email(app: Running, email: str) -> list[User]:
    async with app.state.db.transaction() as tx:
        return list((await tx.scalars(select(User).where(User.email == email))).all())


async def verifying(app: Running) -> None:
    await configure(app, None, EmailVerificationEnabled=True)


async def stored_code(app: Running, email: str) -> str | None:
    return await app.state.kv.get_text(EmailCodes.key(email))


# ---- codes and registration --------------------------------------------------------------------------------

async def test_the_mailed_code_completes_a_registration_once(mail_app: Running, smtp: FakeSmtp) -> None:
    await verifying(mail_app)
    api = mail_app.client()
    response = await request_code(api, "  Alice@Example.COM ")
    assert response.status_code == 200, response.text
    assert response.json() == {"success": True, "message": "", "data": None}
    [mail] = smtp.to("alice@example.com")  # trimmed and lower-cased, mailed once
    assert mail.sender == SENDER and "verification code" in mail.message["Subject"]
    assert mail.message.get_content_type() == "text/plain"
    code = smtp.code_for("alice@example.com")
    assert await register(api, "alice", "alice@example.com", code) == 200
    [user] = await users_with_email(mail_app, "alice@example.com")
    assert user.username == "alice"
    assert await stored_code(mail_app, "alice@example.com") is None
    # used up: the same code cannot make a second account (its address is taken anyway: 409 first)
    assert await register(api, "alice2", "alice@example.com", code) == 409


async def test_registration_needs_email_and_code_and_checks_the_code_last(mail_app: Running,
                                                                          smtp: FakeSmtp) -> None:
    await verifying(mail_app)
    await add_user(mail_app.state, "taken")
    api = mail_app.client()
    body = {"username": "bob", "password": PASSWORD}
    fails(await api.post("/api/user/register", json=body), 400, "email:", prefix=True)
    fails(await api.post("/api/user/register", json=body | {"email": "bob@example.com"}), 400,
          "verification_code:", prefix=True)
    assert (await request_code(api, "bob@example.com")).status_code == 200
    code = smtp.code_for("bob@example.com")
    wrong = f"{(int(code) + 1) % 10**6:06d}"
    fails(await api.post("/api/user/register", json=body | {"email": "bob@example.com",
                                                            "verification_code": wrong}),
          400, "verification_code:", prefix=True)
    # a taken username is reported before the code is looked at, and the code survives it
    assert await register(api, "taken", "bob@example.com", code) == 409
    assert await register(api, "bob", "bob@example.com", code) == 200


async def test_five_wrong_tries_delete_the_code(mail_app: Running, smtp: FakeSmtp) -> None:
    await verifying(mail_app)
    api = mail_app.client()
    for address in ("carol@example.com", "dave@example.com"):
        assert (await request_code(api, address)).status_code == 200
    carol = smtp.code_for("carol@example.com")
    wrong = f"{(int(carol) + 1) % 10**6:06d}"
    for _ in range(5):
        assert await register(api, "carol", "carol@example.com", wrong) == 400
    assert await stored_code(mail_app, "carol@example.com") is None
    assert await register(api, "carol", "carol@example.com", carol) == 400

    dave = smtp.code_for("dave@example.com")  # four wrong tries leave the code usable
    wrong = f"{(int(dave) + 1) % 10**6:06d}"
    for _ in range(4):
        assert await register(api, "dave", "dave@example.com", wrong) == 400
    assert await register(api, "dave", "dave@example.com", dave) == 200


async def test_a_code_expires_after_ten_minutes(mail_app: Running, smtp: FakeSmtp) -> None:
    await verifying(mail_app)
    api = mail_app.client()
    assert (await request_code(api, "erin@example.com")).status_code == 200
    mail_app.clock.shift(599)
    assert (await request_code(api, "frank@example.com")).status_code == 200
    mail_app.clock.shift(2)  # erin's code is 601 s old, frank's 2 s
    assert await register(api, "erin", "erin@example.com", smtp.code_for("erin@example.com")) == 400
    assert await register(api, "frank", "frank@example.com", smtp.code_for("frank@example.com")) == 200


async def test_a_new_code_replaces_the_older_one(mail_app: Running, smtp: FakeSmtp) -> None:
    await verifying(mail_app)
    api = mail_app.client()
    assert (await request_code(api, "gina@example.com")).status_code == 200
    first = smtp.code_for("gina@example.com")
    assert (await request_code(api, "gina@example.com")).status_code == 200
    second = smtp.code_for("gina@example.com")
    if first != second:  # (one chance in a million that both draws are the same)
        assert await register(api, "gina", "gina@example.com", first) == 400
    assert await register(api, "gina", "gina@example.com", second) == 200


async def test_two_registrations_racing_with_one_code_make_one_user(mail_app: Running,
                                                                     smtp: FakeSmtp) -> None:
    await verifying(mail_app)
    api = mail_app.client()
    assert (await request_code(api, "hank@example.com")).status_code == 200
    code = smtp.code_for("hank@example.com")
    statuses = await asyncio.gather(*(register(api, f"hank{i}", "hank@example.com", code) for i in range(4)))
    assert sorted(statuses).count(200) == 1, statuses
    assert set(statuses) <= {200, 400, 409}, statuses
    assert len(await users_with_email(mail_app, "hank@example.com")) == 1


async def test_an_address_in_use_gets_409_and_no_mail(mail_app: Running, smtp: FakeSmtp) -> None:
    uid = await add_user(mail_app.state, "ivy")
    async with mail_app.state.db.transaction() as tx:
        await UserRepository(tx).update_fields(uid, email="ivy@example.com")
    fails(await request_code(mail_app.client(), "IVY@example.com"), 409, "email is already used")
    assert smtp.to("ivy@example.com") == []


# ---- configuration and failures ----------------------------------------------------------------------------

async def test_sending_without_configuration_is_400(app: Running) -> None:
    api = app.client()
    assert fails(await api.get("/api/verification", params={"email": "a@example.com"}), 400) == NOT_CONFIGURED
    assert fails(await api.get("/api/reset_password", params={"email": "a@example.com"}),
                 400) == NOT_CONFIGURED


async def test_a_refusing_mail_server_is_500_and_stores_nothing(mail_app: Running, smtp: FakeSmtp,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    await verifying(mail_app)
    smtp.refuse = True
    api = mail_app.client()
    response = await request_code(api, "jack@example.com")
    assert fails(response, 500) == "could not send the e-mail"
    [refused] = smtp.refused
    [code] = CODE.findall(refused.text)
    assert code not in response.text
    assert await stored_code(mail_app, "jack@example.com") is None
    assert "sending an e-mail" in logged_text(caplog.records)  # the failure is logged ...
    assert code not in logged_text(caplog.records)  # ... without the code the server quoted back
    smtp.refuse = False
    assert await register(api, "jack", "jack@example.com", code) == 400  # the refused code never works


async def test_an_unreachable_mail_server_is_500(mail_app: Running) -> None:
    await verifying(mail_app)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    await configure(mail_app, None, SMTPPort=closed_port)
    response = await request_code(mail_app.client(), "kate@example.com")
    assert fails(response, 500) == "could not send the e-mail"
    assert await stored_code(mail_app, "kate@example.com") is None


async def test_ssl_on_speaks_tls_from_the_first_byte(mail_app: Running, smtp: FakeSmtp) -> None:
    """`SMTPSSLEnabled`: implicit TLS, which the plain-text test server cannot answer: nothing delivered."""
    await configure(mail_app, None, SMTPSSLEnabled=True)
    fails(await request_code(mail_app.client(), "lee@example.com"), 500, "could not send the e-mail")
    assert smtp.mails == [] and smtp.refused == []
    await configure(mail_app, None, SMTPSSLEnabled=False)
    assert (await request_code(mail_app.client(), "lee@example.com")).status_code == 200


# ---- limits and address rules ------------------------------------------------------------------------------

async def test_two_mails_per_30_seconds_per_client_ip_across_both_routes(mail_app: Running,
                                                                         smtp: FakeSmtp) -> None:
    api = mail_app.client()
    ip = new_ip()
    assert (await request_code(api, "l1@example.com", ip)).status_code == 200
    assert (await request_reset(api, "l2@example.com", ip)).status_code == 200
    for refused in (await request_code(api, "l3@example.com", ip),
                    await request_reset(api, "l4@example.com", ip)):
        fails(refused, 429)
        assert int(refused.headers["Retry-After"]) >= 1
    assert smtp.to("l3@example.com") == []
    assert (await request_code(api, "l3@example.com")).status_code == 200  # another client is not held


async def test_five_mails_per_hour_per_address_across_both_routes(mail_app: Running, smtp: FakeSmtp) -> None:
    api = mail_app.client()
    for i in range(5):
        send = request_code if i % 2 == 0 else request_reset
        assert (await send(api, "mia@example.com")).status_code == 200
    for refused in (await request_code(api, "mia@example.com"), await request_reset(api, "mia@example.com")):
        fails(refused, 429)
        assert int(refused.headers["Retry-After"]) >= 1
    assert len(smtp.to("mia@example.com")) == 3  # the unknown address gets no reset mail
    assert (await request_code(api, "other@example.com")).status_code == 200


@pytest.mark.parametrize("address", ["not-an-address", "a@b", "two@@example.com", "x" * 39 + "@example.com",
                                     "sp ace@example.com"])
async def test_a_malformed_or_long_address_is_400_naming_email(embedded_app: Running, smtp: FakeSmtp,
                                                               address: str) -> None:
    await configure(embedded_app, smtp)
    api = embedded_app.client()
    for path in ("/api/verification", "/api/reset_password"):
        fails(await api.get(path, params={"email": address}), 400, "email:", prefix=True)
    assert smtp.mails == []


async def test_the_domain_whitelist_and_the_alias_rule(mail_app: Running, smtp: FakeSmtp) -> None:
    api = mail_app.client()
    await configure(mail_app, None, EmailDomainRestrictionEnabled=True,
                    EmailDomainWhitelist="example.com, Tollway.TEST")
    fails(await request_code(api, "nina@elsewhere.org"), 400, "email:", prefix=True)
    fails(await request_reset(api, "nina@elsewhere.org"), 400, "email:", prefix=True)
    assert (await request_code(api, "nina@tollway.test")).status_code == 200
    assert (await request_code(api, "nina.x+y@example.com")).status_code == 200  # aliases allowed: off
    await configure(mail_app, None, EmailAliasRestrictionEnabled=True)
    for alias in ("nina+news@example.com", "ni.na@example.com"):
        fails(await request_code(api, alias), 400, "email:", prefix=True)
    assert (await request_code(api, "nina@example.com")).status_code == 200
    assert {m.recipients[0] for m in smtp.mails} == {"nina@tollway.test", "nina.x+y@example.com",
                                                     "nina@example.com"}


# ---- binding -----------------------------------------------------------------------------------------------

async def test_binding_an_address_to_ones_account(mail_app: Running, smtp: FakeSmtp) -> None:
    await add_user(mail_app.state, "olga")
    api = await logged_in(mail_app, "olga")
    assert (await request_code(api, "olga@example.com")).status_code == 200
    code = smtp.code_for("olga@example.com")
    wrong = f"{(int(code) + 1) % 10**6:06d}"
    fails(await api.get("/api/oauth/email/bind", params={"email": "olga@example.com", "code": wrong}),
          400, "code:", prefix=True)
    fails(await api.get("/api/oauth/email/bind", params={"email": "olga@example.com"}), 400, "code:",
          prefix=True)
    response = await api.get("/api/oauth/email/bind", params={"email": " Olga@Example.com", "code": code})
    assert response.json() == {"success": True, "message": "", "data": None}
    assert data_of(await api.get("/api/user/self"))["email"] == "olga@example.com"
    # single use: binding again with the same code fails (409 first: the address is now taken)
    fails(await api.get("/api/oauth/email/bind", params={"email": "olga@example.com", "code": code}), 409)


async def test_binding_an_address_another_account_took_meanwhile_is_409(mail_app: Running,
                                                                        smtp: FakeSmtp) -> None:
    await add_user(mail_app.state, "pat")
    other = await add_user(mail_app.state, "quinn")
    api = await logged_in(mail_app, "pat")
    assert (await request_code(api, "pq@example.com")).status_code == 200
    async with mail_app.state.db.transaction() as tx:
        await UserRepository(tx).update_fields(other, email="pq@example.com")
    fails(await api.get("/api/oauth/email/bind", params={"email": "pq@example.com",
                                                         "code": smtp.code_for("pq@example.com")}),
          409, "email is already used")
    assert data_of(await api.get("/api/user/self"))["email"] == ""


async def test_binding_needs_a_login(mail_app: Running) -> None:
    fails(await mail_app.client().get("/api/oauth/email/bind", params={"email": "r@example.com",
                                                                       "code": "123456"}), 401)


# ---- SMTP AUTH and secrets ---------------------------------------------------------------------------------

async def test_auth_is_used_only_with_account_and_token(embedded_stack: Stack, tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fake = FakeSmtp(credentials=("mailer", "smtp-secret-token-123")).start()
    try:
        async with mail_server(embedded_stack, tmp_path, fake) as embedded_app:
            await _auth_cases(embedded_app, fake, caplog)
    finally:
        fake.stop()


async def _auth_cases(embedded_app: Running, fake: FakeSmtp, caplog: pytest.LogCaptureFixture) -> None:
    await configure(embedded_app, fake, SMTPAccount="mailer")
    api = embedded_app.client()
    fails(await request_code(api, "s1@example.com"), 500)  # no token: no AUTH, the server refuses
    await configure(embedded_app, None, SMTPToken="wrong-smtp-token-456")
    wrong = await request_code(api, "s2@example.com")
    fails(wrong, 500)
    await configure(embedded_app, None, SMTPToken="smtp-secret-token-123")
    assert (await request_code(api, "s3@example.com")).status_code == 200
    assert len(fake.to("s3@example.com")) == 1 and fake.to("s1@example.com") == []
    options = data_of(await (await _root(embedded_app)).get("/api/option/"))
    assert "SMTPToken" not in {o["key"] for o in options}
    logs = logged_text(caplog.records)
    assert "wrong-smtp-token-456" not in logs + wrong.text
    assert "smtp-secret-token-123" not in logs


async def _root(app: Running) -> Api:
    await add_user(app.state, "root", role=100)
    return await logged_in(app, "root")


async def test_no_code_in_any_reply_or_log(mail_app: Running, smtp: FakeSmtp,
                                           caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    await verifying(mail_app)
    api = mail_app.client()
    replies = [await request_code(api, "tess@example.com")]
    code = smtp.code_for("tess@example.com")
    wrong = f"{(int(code) + 1) % 10**6:06d}"
    replies.append(await api.post("/api/user/register", json={
        "username": "tess", "password": PASSWORD, "email": "tess@example.com", "verification_code": wrong}))
    replies.append(await api.post("/api/user/register", json={
        "username": "tess", "password": PASSWORD, "email": "tess@example.com", "verification_code": code}))
    for response in replies:
        assert code not in response.text and wrong not in response.text
    assert code not in logged_text(caplog.records)
    assert await stored_code(mail_app, "tess@example.com") is None  # taken


async def test_a_stored_code_is_a_keyed_digest(mail_app: Running, smtp: FakeSmtp) -> None:
    assert (await request_code(mail_app.client(), "uma@example.com")).status_code == 200
    raw = await stored_code(mail_app, "uma@example.com")
    assert raw is not None and smtp.code_for("uma@example.com") not in raw


async def test_the_e_mail_limits_work_without_a_proxy(tmp_path: Path, smtp: FakeSmtp,
                                                      sqlite_url: str) -> None:
    """Without a trusted proxy the peer address is the client: the third mail in 30 s is refused."""
    async with serve(make_config(sqlite_url, tmp_path)) as running:
        await configure(running, smtp)
        api = running.client()
        assert (await api.get("/api/verification", params={"email": "v1@example.com"})).status_code == 200
        assert (await api.get("/api/verification", params={"email": "v2@example.com"})).status_code == 200
        fails(await api.get("/api/verification", params={"email": "v3@example.com"},
                            headers=from_ip()), 429)  # an untrusted X-Forwarded-For changes nothing
