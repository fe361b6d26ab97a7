"""Password reset by e-mail (docs/api/auth.md#e-mail-codes-and-password-reset) over HTTP, with a real SMTP
server (tests/fakes/smtp.py), on every stack.

Proves: the mailed link (`{ServerAddress}/user/reset?email=…&token=…`) sets a new password, ends every
session and the access token of the user, and the old password stops working; an unknown or deleted
user's address gets the same 200 and no mail; a token works once — also when two resets race with it —
and for 15 minutes of the service clock; a newer link replaces the older one; a token used with another
address, a made-up token and a bad password are 400s (the latter keeps the token); a refusing mail server is
a 500 that leaves no usable token; no token appears in a reply or a log line.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from models.users import UserRepository
from server.components.email_codes import ResetTokens
from tests.fakes.smtp import TOKEN, FakeSmtp
from tests.harness import Api, Running, add_user, fails, logged_in
from tests.mail import PASSWORD, SERVER_ADDRESS, logged_text, request_reset

INVALID = "invalid or expired reset link"
NEW_PASSWORD = "a-new-password-1"


async def user_with_email(app: Running, username: str, email: str) -> int:
    uid = await add_user(app.state, username)
    async with app.state.db.transaction() as tx:
        await UserRepository(tx).update_fields(uid, email=email)
    return uid


async def reset(api: Api, email: str, token: str, password: str = NEW_PASSWORD) -> httpx.Response:
    return await api.post("/api/user/reset", json={"email": email, "token": token, "password": password})


async def mailed_token(app: Running, smtp: FakeSmtp, email: str) -> str:
    response = await request_reset(app.client(), email)
    assert response.status_code == 200, response.text
    return smtp.token_for(email)


async def test_the_mailed_link_sets_the_password_and_ends_every_session(mail_app: Running,
                                                                        smtp: FakeSmtp) -> None:
    uid = await user_with_email(mail_app, "alice", "alice@example.com")
    phone, laptop = await logged_in(mail_app, "alice"), await logged_in(mail_app, "alice")
    token_response = await phone.get("/api/user/token")
    access_token = token_response.json()["data"]

    response = await request_reset(mail_app.client(), " Alice@Example.com ")
    assert response.json() == {"success": True, "message": "", "data": None}
    [mail] = smtp.to("alice@example.com")
    [link] = [line for line in mail.text.splitlines() if line.startswith(SERVER_ADDRESS)]
    parts = urlsplit(link)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == f"{SERVER_ADDRESS}/user/reset"
    assert "email=alice%40example.com&token=" in parts.query
    query = parse_qs(parts.query)
    assert query["email"] == ["alice@example.com"] and query["token"] == [smtp.token_for("alice@example.com")]
    assert len(query["token"][0]) == 43  # 32 random bytes, base64url

    done = await reset(mail_app.client(), "alice@example.com", query["token"][0])
    assert done.json() == {"success": True, "message": "", "data": None}
    for api in (phone, laptop):
        fails(await api.get("/api/user/self"), 401)
    async with httpx.AsyncClient(base_url=mail_app.url) as client:
        by_token = await client.get("/api/user/self", headers={"Authorization": f"Bearer {access_token}",
                                                               "New-Api-User": str(uid)})
    assert by_token.status_code == 401
    fails(await mail_app.client().login("alice", PASSWORD), 401)
    assert (await mail_app.client().login("alice", NEW_PASSWORD)).status_code == 200


async def test_an_unknown_or_deleted_address_gets_200_and_no_mail(mail_app: Running, smtp: FakeSmtp) -> None:
    uid = await user_with_email(mail_app, "gone", "gone@example.com")
    async with mail_app.state.db.transaction() as tx:
        await UserRepository(tx).update_fields(uid, deleted_at=mail_app.clock.now_s())
    for address in ("nobody@example.com", "gone@example.com"):
        response = await request_reset(mail_app.client(), address)
        assert response.status_code == 200
        assert response.json() == {"success": True, "message": "", "data": None}
    assert smtp.mails == []


async def test_a_token_works_once(mail_app: Running, smtp: FakeSmtp) -> None:
    await user_with_email(mail_app, "bob", "bob@example.com")
    token = await mailed_token(mail_app, smtp, "bob@example.com")
    assert (await reset(mail_app.client(), "bob@example.com", token)).status_code == 200
    assert fails(await reset(mail_app.client(), "bob@example.com", token, "another-password-2"),
                 400) == INVALID
    assert (await mail_app.client().login("bob", NEW_PASSWORD)).status_code == 200


async def test_two_resets_racing_with_one_token_one_succeeds(mail_app: Running, smtp: FakeSmtp) -> None:
    await user_with_email(mail_app, "carol", "carol@example.com")
    token = await mailed_token(mail_app, smtp, "carol@example.com")
    passwords = [f"racing-password-{i}" for i in range(4)]
    replies = await asyncio.gather(*(reset(mail_app.client(), "carol@example.com", token, p)
                                     for p in passwords))
    statuses = [r.status_code for r in replies]
    assert statuses.count(200) == 1 and statuses.count(400) == 3, statuses
    winner = passwords[statuses.index(200)]
    assert (await mail_app.client().login("carol", winner)).status_code == 200


async def test_a_token_expires_after_fifteen_minutes(mail_app: Running, smtp: FakeSmtp) -> None:
    await user_with_email(mail_app, "dave", "dave@example.com")
    await user_with_email(mail_app, "erin", "erin@example.com")
    dave = await mailed_token(mail_app, smtp, "dave@example.com")
    mail_app.clock.shift(899)
    erin = await mailed_token(mail_app, smtp, "erin@example.com")
    mail_app.clock.shift(2)  # dave's link is 901 s old, erin's 2 s
    assert fails(await reset(mail_app.client(), "dave@example.com", dave), 400) == INVALID
    assert (await reset(mail_app.client(), "erin@example.com", erin)).status_code == 200


async def test_a_newer_link_replaces_the_older_one(mail_app: Running, smtp: FakeSmtp) -> None:
    await user_with_email(mail_app, "fay", "fay@example.com")
    first = await mailed_token(mail_app, smtp, "fay@example.com")
    second = await mailed_token(mail_app, smtp, "fay@example.com")
    assert first != second
    assert fails(await reset(mail_app.client(), "fay@example.com", first), 400) == INVALID
    assert (await reset(mail_app.client(), "fay@example.com", second)).status_code == 200


async def test_foreign_and_made_up_tokens_are_refused(mail_app: Running, smtp: FakeSmtp) -> None:
    await user_with_email(mail_app, "gus", "gus@example.com")
    await user_with_email(mail_app, "hal", "hal@example.com")
    gus = await mailed_token(mail_app, smtp, "gus@example.com")
    api = mail_app.client()
    assert fails(await reset(api, "hal@example.com", gus), 400) == INVALID  # gus's link, hal's address
    assert fails(await reset(api, "gus@example.com", "x" * 43), 400) == INVALID
    assert fails(await reset(api, "gus@example.com", ""), 400) == INVALID
    assert (await reset(api, " GUS@example.com", gus)).status_code == 200  # still good for its own address
    assert (await mail_app.client().login("hal", PASSWORD)).status_code == 200


@pytest.mark.parametrize("password", ["short", "x" * 65])
async def test_a_bad_password_is_400_and_keeps_the_token(mail_app: Running, smtp: FakeSmtp,
                                                         password: str) -> None:
    await user_with_email(mail_app, "ida", "ida@example.com")
    token = await mailed_token(mail_app, smtp, "ida@example.com")
    fails(await reset(mail_app.client(), "ida@example.com", token, password), 400, "password:", prefix=True)
    missing = await mail_app.client().post("/api/user/reset",
                                           json={"email": "ida@example.com", "token": token})
    fails(missing, 400, "password:", prefix=True)
    assert (await reset(mail_app.client(), "ida@example.com", token)).status_code == 200


async def test_a_refusing_mail_server_is_500_and_leaves_no_token(mail_app: Running, smtp: FakeSmtp,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    await user_with_email(mail_app, "jan", "jan@example.com")
    smtp.refuse = True
    response = await request_reset(mail_app.client(), "jan@example.com")
    assert fails(response, 500) == "could not send the e-mail"
    [refused] = smtp.refused
    match = TOKEN.search(refused.text)
    assert match is not None
    token = match.group(1)
    assert await mail_app.state.kv.get_text(ResetTokens.key(token)) is None
    assert token not in response.text and token not in logged_text(caplog.records)
    smtp.refuse = False
    assert fails(await reset(mail_app.client(), "jan@example.com", token), 400) == INVALID


async def test_no_token_in_any_reply_or_log(mail_app: Running, smtp: FakeSmtp,
                                            caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    await user_with_email(mail_app, "kim", "kim@example.com")
    api = mail_app.client()
    replies = [await request_reset(api, "kim@example.com")]
    token = smtp.token_for("kim@example.com")
    raw = await mail_app.state.kv.get_text(ResetTokens.key(token))
    assert raw is not None and token not in raw  # stored under its digest, the value names no token
    replies.append(await reset(api, "kim@example.com", token, "short"))
    replies.append(await reset(api, "kim@example.com", token))
    replies.append(await reset(api, "kim@example.com", token))
    assert [r.status_code for r in replies] == [200, 400, 200, 400]
    for response in replies:
        assert token not in response.text
    assert token not in logged_text(caplog.records)
