"""The console's account pages in Chromium against a real `tollway serve` (embedded): first run, sign in
and out, a session ended elsewhere, a refused password, the 2FA step, registration with the mailed code,
the forgotten-password link; on the Account page, an e-mail address bound with the mailed code (a wrong
code refused at its field) and an access token made, copied, used the way the page says, and ended by
the next one. Each result is checked through the API too; each page passes axe-core at 1280 and 360 px."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyotp
import pytest
from playwright.sync_api import Page, expect

from tests.console.browser import (
    PASSWORD,
    Server,
    check_accessibility,
    set_option,
    sign_in,
    sign_out,
    tollway,
    user_client,
)
from tests.fakes.smtp import FakeSmtp
from tests.mail import from_ip

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with tollway(tmp_path_factory.mktemp("console-accounts"), set_up=True) as running:
        yield running


@pytest.fixture(scope="module")
def mail(server: Server) -> Iterator[FakeSmtp]:
    """Mail of the module's server goes to a fake SMTP server; reset links name the server's address."""
    fake = FakeSmtp().start()
    try:
        for key, value in (("ServerAddress", server.url), ("SMTPServer", fake.host), ("SMTPPort", fake.port),
                           ("SMTPFrom", "noreply@tollway.test")):
            set_option(server, key, value)
        yield fake
    finally:
        fake.stop()


def test_first_run_creates_root_then_signs_in(page: Page, tmp_path: Path) -> None:
    with tollway(tmp_path, set_up=False) as fresh:
        page.goto(f"{fresh.url}/")
        expect(page).to_have_url(f"{fresh.url}/setup")
        expect(page.get_by_role("heading", level=1, name="Set up Tollway")).to_be_visible()
        expect(page.get_by_role("navigation", name="Main").get_by_role("link")).to_have_count(0)
        check_accessibility(page, "first run")

        page.get_by_label("Username").fill("chief")
        page.get_by_label("Password", exact=True).fill(PASSWORD)
        page.get_by_label("Confirm password").fill(PASSWORD + "x")
        page.get_by_role("button", name="Create root").click()
        refusal = httpx.post(f"{fresh.url}/api/setup", json={
            "username": "chief", "password": PASSWORD, "confirmPassword": PASSWORD + "x"}).json()["message"]
        assert refusal.startswith("confirmPassword: ")
        confirm = page.get_by_label("Confirm password")
        expect(confirm).to_have_attribute("aria-invalid", "true")
        # the server's words, the field named by its label rather than by the API's name
        labelled = "Confirm password: " + refusal.removeprefix("confirmPassword: ")
        expect(confirm).to_have_accessible_description(re.compile(re.escape(labelled)))

        confirm.fill(PASSWORD)
        page.get_by_role("button", name="Create root").click()
        expect(page.get_by_role("heading", level=1, name="Dashboard")).to_be_visible()
        expect(page).to_have_url(f"{fresh.url}/")
        expect(page.get_by_role("button", name="Sign out")).to_be_visible()

        assert httpx.get(f"{fresh.url}/api/setup").json()["data"]["status"] is True
        cookie = {c["name"]: c["value"] for c in page.context.cookies()}["session"]
        user_id = page.evaluate("localStorage.getItem('tollway.user')")
        me = httpx.get(f"{fresh.url}/api/user/self", cookies={"session": cookie},
                       headers={"New-Api-User": str(user_id)})
        assert me.status_code == 200 and me.json()["data"]["username"] == "chief"
        assert me.json()["data"]["role"] == 100
        page.goto(f"{fresh.url}/setup")  # done once: the first-run page is gone
        expect(page).to_have_url(f"{fresh.url}/")


def test_sign_in_then_sign_out(page: Page, server: Server) -> None:
    name, _ = server.add_user()
    page.goto(f"{server.url}/keys")
    expect(page).to_have_url(f"{server.url}/login?next=%2Fkeys")
    expect(page.get_by_role("heading", level=1, name="Sign in")).to_be_visible()
    check_accessibility(page, "sign in")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", level=1, name="API keys")).to_be_visible()  # where it was going
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link")).to_have_text(  # a user's entries (no admin page)
        ["Dashboard", "Playground", "API keys", "Logs", "Account", "Models and prices", "Top up"])

    cookie = {c["name"]: c["value"] for c in page.context.cookies()}["session"]
    user_id = page.evaluate("localStorage.getItem('tollway.user')")
    as_page = {"cookies": {"session": cookie}, "headers": {"New-Api-User": str(user_id)}}
    assert httpx.get(f"{server.url}/api/user/self", **as_page).json()["data"]["username"] == name  # type: ignore[arg-type]

    sign_out(page)
    assert httpx.get(f"{server.url}/api/user/self", **as_page).status_code == 401  # type: ignore[arg-type]
    page.goto(f"{server.url}/")
    expect(page).to_have_url(f"{server.url}/login")


@pytest.mark.parametrize("next_page", ["%2Flogin", "%2Fsetup", "https%3A%2F%2Fexample.com%2F",
                                       "%2F%2Fexample.com", "%2F%5Cexample.com"])
def test_after_sign_in_only_a_console_page_is_next(page: Page, server: Server, next_page: str) -> None:
    """`?next=` never leads to another site, nor back to a sign-in page (which would loop)."""
    name, _ = server.add_user()
    page.goto(f"{server.url}/login?next={next_page}")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", level=1, name="Dashboard")).to_be_visible()
    expect(page).to_have_url(f"{server.url}/")


def test_a_session_ended_elsewhere_leads_back_to_sign_in(page: Page, server: Server) -> None:
    name, _ = server.add_user()
    sign_in(page, server, name)
    cookie = {c["name"]: c["value"] for c in page.context.cookies()}["session"]
    assert httpx.get(f"{server.url}/api/user/logout", cookies={"session": cookie}).status_code == 200
    page.get_by_role("navigation", name="Main").get_by_role("link", name="API keys").click()
    expect(page).to_have_url(f"{server.url}/login?next=%2Fkeys")
    ended = page.get_by_role("status").filter(has_text="Your session has ended. Sign in again.")
    expect(ended).to_be_visible()
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", level=1, name="API keys")).to_be_visible()


def test_a_wrong_password_shows_the_servers_message(page: Page, server: Server) -> None:
    name, _ = server.add_user()
    expected = httpx.post(f"{server.url}/api/user/login",
                          json={"username": name, "password": "not-the-password"}).json()["message"]
    page.goto(f"{server.url}/login")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password", exact=True).fill("not-the-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text(expected)
    assert expected and "request failed" not in page.content().lower()
    expect(page).to_have_url(f"{server.url}/login")
    assert page.evaluate("localStorage.getItem('tollway.user')") is None


def test_the_second_factor_step(page: Page, server: Server) -> None:
    name, _ = server.add_user()
    with user_client(server, name) as user:
        secret = user.post("/api/user/2fa/setup").json()["data"]["secret"]
        totp = pyotp.TOTP(secret)
        enabling = totp.now()
        assert user.post("/api/user/2fa/enable", json={"code": enabling}).status_code == 200
    page.goto(f"{server.url}/login")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", level=1, name="Two-factor authentication")).to_be_visible()
    check_accessibility(page, "2FA step")
    code = page.get_by_label("Authentication code")
    code.fill("000000" if totp.now() != "000000" else "111111")
    page.get_by_role("button", name="Verify").click()
    expect(page.get_by_role("alert")).to_have_text("invalid 2FA code")  # the server's words
    code.fill(enabling)  # its step is used up: said in the console's words
    page.get_by_role("button", name="Verify").click()
    expect(page.get_by_role("alert")).to_have_text(
        "This code was just used. Each code works once: wait for the next code of your app.")
    code.fill(totp.at(time.time() + 30))  # the next step: the enabling code's step is used up
    page.get_by_role("button", name="Verify").click()
    expect(page.get_by_role("heading", level=1, name="Dashboard")).to_be_visible()


def test_register_with_the_mailed_code(page: Page, server: Server, mail: FakeSmtp) -> None:
    page.context.set_extra_http_headers(from_ip())  # a client of its own for the per-IP e-mail limit
    set_option(server, "EmailVerificationEnabled", True)
    try:
        page.goto(f"{server.url}/register")
        expect(page.get_by_role("heading", level=1, name="Create an account")).to_be_visible()
        check_accessibility(page, "register")
        name = f"r{int(time.time() * 1000) % 10**8}"
        address = f"{name}@example.com"
        page.get_by_label("Username").fill(name)
        page.get_by_label("Password", exact=True).fill(PASSWORD)
        page.get_by_label("Confirm password").fill(PASSWORD)
        page.get_by_label("E-mail").fill(address)
        page.get_by_role("button", name="Send code").click()
        expect(page.get_by_role("status").filter(has_text=f"A code was sent to {address}.")).to_be_visible()
        page.get_by_label("Verification code").fill(mail.code_for(address))
        page.get_by_role("button", name="Create account").click()
        expect(page.get_by_role("heading", level=1, name="Sign in")).to_be_visible()
        expect(page.get_by_role("status").filter(has_text="Your account is ready. Sign in.")).to_be_visible()
    finally:
        set_option(server, "EmailVerificationEnabled", False)
    sign_in(page, server, name)
    with user_client(server, name) as user:
        assert user.get("/api/user/self").json()["data"]["email"] == address


def test_forgotten_password_and_the_reset_link(page: Page, server: Server, mail: FakeSmtp) -> None:
    page.context.set_extra_http_headers(from_ip())  # a client of its own for the per-IP e-mail limit
    name = f"f{int(time.time() * 1000) % 10**8}"
    address = f"{name}@example.com"
    registered = httpx.post(f"{server.url}/api/user/register",
                            json={"username": name, "password": PASSWORD, "email": address})
    assert registered.status_code == 200, registered.text
    page.goto(f"{server.url}/login")
    page.get_by_role("link", name="Forgotten password?").click()
    expect(page.get_by_role("heading", level=1, name="Forgotten password")).to_be_visible()
    check_accessibility(page, "forgotten password")
    page.get_by_label("E-mail").fill(address)
    page.get_by_role("button", name="Send reset link").click()
    expect(page.get_by_text(f"If an account uses {address}, a link")).to_be_visible()

    link = re.search(r"https?://\S+/user/reset\?\S+", mail.to(address)[-1].text)
    assert link is not None and link.group(0).startswith(f"{server.url}/user/reset?")
    page.goto(link.group(0))
    expect(page.get_by_role("heading", level=1, name="Choose a new password")).to_be_visible()
    expect(page).to_have_url(f"{server.url}/user/reset")  # the token left the address bar
    check_accessibility(page, "reset link")
    page.get_by_label("New password", exact=True).fill("short")
    page.get_by_label("Confirm password").fill("short")
    page.get_by_role("button", name="Change password").click()
    new_password = page.get_by_label("New password", exact=True)
    expect(new_password).to_have_attribute("aria-invalid", "true")
    expect(new_password).to_have_accessible_description(re.compile(r"New password: must be 8–64 characters"))
    new_password.fill("a-new-password-1")
    page.get_by_label("Confirm password").fill("a-new-password-1")
    page.get_by_role("button", name="Change password").click()
    expect(page.get_by_role("status").filter(has_text="Your password is changed.")).to_be_visible()
    sign_in(page, server, name, "a-new-password-1")
    login = httpx.post(f"{server.url}/api/user/login", json={"username": name, "password": PASSWORD})
    assert login.status_code == 401  # the old password is gone


def test_an_email_address_is_bound_on_the_account_page_with_the_mailed_code(
        page: Page, server: Server, mail: FakeSmtp) -> None:
    page.context.set_extra_http_headers(from_ip())  # a client of its own for the per-IP e-mail limit
    name, _ = server.add_user()
    address = f"{name}@example.com"
    sign_in(page, server, name)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Account").click()
    expect(page.get_by_role("heading", level=1, name="Account")).to_be_visible()
    email = page.get_by_role("form", name="E-mail address")
    email.get_by_label("E-mail address").fill(address)
    email.get_by_label("E-mail address").press("Enter")  # Enter with no code yet asks for one
    expect(page.get_by_role("status").filter(has_text=f"A code was sent to {address}.")).to_be_visible()
    code = mail.code_for(address)
    expect(email.get_by_label("Code from the e-mail")).not_to_have_attribute("aria-invalid", "true")

    wrong = email.get_by_label("Code from the e-mail")
    wrong.fill("000000" if code != "000000" else "111111")
    email.get_by_role("button", name="Bind address").click()
    expect(wrong).to_have_attribute("aria-invalid", "true")  # the server's refusal names the field
    expect(wrong).to_have_accessible_description(re.compile("^Code from the e-mail: is wrong or has expired"))
    check_accessibility(page, "account with a refused e-mail code")
    with user_client(server, name) as user:
        assert user.get("/api/user/self").json()["data"]["email"] == ""  # not bound by a wrong code

    email.get_by_label("Code from the e-mail").fill(code)
    email.get_by_role("button", name="Bind address").click()
    expect(page.get_by_role("status").filter(has_text=f"E-mail address {address} bound to your account.")
           ).to_be_visible()
    check_accessibility(page, "account with an e-mail address bound")
    with user_client(server, name) as user:
        assert user.get("/api/user/self").json()["data"]["email"] == address
    page.reload()  # the page reads the bound address back from the server
    bound = page.get_by_role("form", name="E-mail address").get_by_label("E-mail address")
    expect(bound).to_have_value(address)


def test_an_access_token_made_on_the_account_page_works_until_the_next_one(page: Page,
                                                                          server: Server) -> None:
    name, _ = server.add_user()
    sign_in(page, server, name)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Account").click()
    area = page.get_by_role("region", name="Access token")

    area.get_by_role("button", name="Make a new access token").click()
    confirm = page.get_by_role("dialog", name="Make a new access token?")
    expect(confirm.get_by_role("button", name="Cancel")).to_be_focused()
    check_accessibility(page, "access token confirmation")
    confirm.get_by_role("button", name="Make a new token").click()
    shown = area.get_by_label("Your new access token")
    expect(shown).to_have_value(re.compile(r"^\S{16,}$"))
    first = shown.input_value()
    area.get_by_role("button", name="Copy").click()
    expect(area.get_by_text("Copied to the clipboard.")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == first
    check_accessibility(page, "account with a new access token")

    # the page says how to send it: Authorization, and New-Api-User with the id it shows
    said = re.search(r"New-Api-User: (\d+)", area.inner_text())
    assert said is not None, area.inner_text()
    header = {"New-Api-User": said.group(1)}
    me = httpx.get(f"{server.url}/api/user/self", headers={"Authorization": f"Bearer {first}", **header})
    assert me.status_code == 200, me.text
    assert me.json()["data"]["username"] == name

    area.get_by_role("button", name="Make a new access token").click()
    page.get_by_role("dialog", name="Make a new access token?").get_by_role(
        "button", name="Make a new token").click()
    expect(shown).not_to_have_value(first)
    second = shown.input_value()
    old = httpx.get(f"{server.url}/api/user/self", headers={"Authorization": f"Bearer {first}", **header})
    assert old.status_code == 401  # making a new one ended the old one
    new = httpx.get(f"{server.url}/api/user/self", headers={"Authorization": f"Bearer {second}", **header})
    assert new.status_code == 200 and new.json()["data"]["username"] == name

    page.reload()  # shown once: not after the page is left
    expect(page.get_by_role("heading", level=1, name="Account")).to_be_visible()
    again = page.get_by_role("region", name="Access token")
    expect(again.get_by_label("Your new access token")).to_have_count(0)
