"""Passkeys in the console, in Chromium with its virtual authenticator (a CTAP2 platform authenticator
that verifies the user) against a real `tollway serve`: with passkeys off the sign-in page offers none;
root switches them on through the API; a user adds a passkey on the Account page (checked through
`GET /api/user/passkey`), signs out, signs in with the passkey alone (the session is that user's:
`GET /api/user/self`), and removes it on the Account page — the server's 403 VERIFICATION_REQUIRED opens
the verification prompt, answered with the same passkey; with 2FA on, adding one first asks for a
verification made with 2FA, which the prompt takes as a code before the passkey is added. An admin
removes a user's passkeys on the Users page: the API lists none, and the passkey the browser still holds
no longer signs in. With the limit of 10 passkeys reached, adding another in the page shows the server's
refusal beside the button and stores nothing (on the server or in the authenticator). axe-core on the
changed pages and dialogs at 1280 and 360 px.

The browser opens the server as `http://localhost:<port>`: WebAuthn refuses an IP address as the relying
party id, and `localhost` is a secure context over plain http, so the server's own resolution (the
request's `Host`) gives the RP id `localhost` and the origin the browser reports."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pyotp
import pytest
from playwright.sync_api import Page, expect

from server.auth.passkeys import LOGIN_FAILED, MAX_PER_USER
from tests.console.browser import (
    PASSWORD,
    Server,
    check_accessibility,
    row_action,
    set_option,
    sign_in,
    sign_out,
    tollway,
    user_client,
)
from tests.fakes.passkey import SoftPasskey
from tests.test_e2e_serve import ROOT_PASSWORD

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with tollway(tmp_path_factory.mktemp("console-passkeys"), set_up=True) as running:
        yield running


def at_localhost(server: Server) -> Server:
    """The same server, addressed by the name a browser accepts as a relying party."""
    return Server(server.url.replace("://127.0.0.1:", "://localhost:"), server.root)


def add_authenticator(page: Page) -> tuple[Any, str]:
    """Chromium's virtual authenticator on this page (the CDP session that holds it, and its id)."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    added = cdp.send("WebAuthn.addVirtualAuthenticator", {"options": {
        "protocol": "ctap2", "transport": "internal", "hasResidentKey": True, "hasUserVerification": True,
        "isUserVerified": True}})
    return cdp, str(added["authenticatorId"])


def test_a_passkey_added_in_the_page_signs_in_and_is_removed_after_a_passkey_verification(
        page: Page, server: Server) -> None:
    site = at_localhost(server)
    page.goto(f"{site.url}/login")
    expect(page.get_by_role("heading", level=1, name="Sign in")).to_be_visible()
    expect(page.get_by_role("button", name="Sign in with a passkey")).to_have_count(0)  # passkeys are off

    set_option(server, "passkey.enabled", True)
    assert server.status()["passkey_login"] is True
    name, user_id = server.add_user()
    cdp, authenticator = add_authenticator(page)
    sign_in(page, site, name)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Account").click()
    expect(page.get_by_role("heading", level=1, name="Account")).to_be_visible()
    passkeys = page.get_by_role("region", name="Passkeys", exact=True)
    expect(passkeys).to_contain_text("You have no passkey.")

    passkeys.get_by_role("button", name="Add a passkey").click()
    expect(page.get_by_role("status").filter(has_text="Passkey added")).to_be_visible()
    with user_client(server, name) as user:
        status = user.get("/api/user/passkey").json()["data"]
    assert status["count"] == 1, status
    credential_id = status["credentials"][0]["credential_id"]
    held = cdp.send("WebAuthn.getCredentials", {"authenticatorId": authenticator})["credentials"]
    assert [c["isResidentCredential"] for c in held] == [True]  # the page asked for a discoverable passkey
    table = passkeys.get_by_role("table")
    expect(table.locator("tbody tr")).to_have_count(1)
    expect(table).to_contain_text(credential_id[:12])
    expect(table).to_contain_text("Never")  # not used yet
    check_accessibility(page, "account with a passkey")

    sign_out(page)
    check_accessibility(page, "sign-in with passkeys on")
    page.get_by_role("button", name="Sign in with a passkey").click()
    expect(page.get_by_role("heading", level=1, name="Dashboard")).to_be_visible()
    me = page.request.get(f"{site.url}/api/user/self", headers={"New-Api-User": str(user_id)})
    assert me.ok, me.text()
    assert me.json()["data"]["username"] == name  # the session the passkey opened is the user's
    with user_client(server, name) as user:
        assert user.get("/api/user/passkey").json()["data"]["last_used_at"] > 0

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Account").click()
    passkeys.get_by_role("button", name=f"Remove passkey {credential_id[:12]}").click()
    confirm = page.get_by_role("dialog", name="Remove this passkey?")
    expect(confirm.get_by_role("button", name="Cancel")).to_be_focused()
    confirm.get_by_role("button", name="Remove passkey").click()
    prompt = page.get_by_role("dialog", name="Confirm it is you")  # the server's 403: no verification yet
    expect(prompt).to_contain_text("secure verification required")
    expect(prompt.get_by_label("Authenticator code")).to_have_count(0)  # no 2FA: a passkey is the way
    check_accessibility(page, "the verification prompt")
    with user_client(server, name) as user:
        assert user.get("/api/user/passkey").json()["data"]["count"] == 1  # nothing removed before it
    prompt.get_by_role("button", name="Use a passkey").click()
    expect(page.get_by_role("status").filter(has_text="removed")).to_be_visible()
    expect(passkeys).to_contain_text("You have no passkey.")
    with user_client(server, name) as user:
        assert user.get("/api/user/passkey").json()["data"]["count"] == 0


def test_with_two_factor_on_adding_a_passkey_asks_for_a_code_first(page: Page, server: Server) -> None:
    site = at_localhost(server)
    set_option(server, "passkey.enabled", True)
    name, _ = server.add_user()
    with user_client(server, name) as user:  # signed in before 2FA is on: no second step
        setup = user.post("/api/user/2fa/setup").json()["data"]
        enabled = user.post("/api/user/2fa/enable", json={"code": pyotp.TOTP(setup["secret"]).now()})
        assert enabled.status_code == 200, enabled.text
        backup = setup["backup_codes"]  # each works once: no TOTP step is reused
        add_authenticator(page)
        page.goto(f"{site.url}/login")
        page.get_by_label("Username").fill(name)
        page.get_by_label("Password", exact=True).fill(PASSWORD)
        page.get_by_role("button", name="Sign in", exact=True).click()
        page.get_by_label("Authentication code").fill(backup[0])
        page.get_by_role("button", name="Verify").click()
        expect(page.get_by_role("heading", level=1, name="Dashboard")).to_be_visible()
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Account").click()

        passkeys = page.get_by_role("region", name="Passkeys", exact=True)
        passkeys.get_by_role("button", name="Add a passkey").click()
        prompt = page.get_by_role("dialog", name="Confirm it is you")  # 2FA on: register/begin's 403
        expect(prompt.get_by_label("Authenticator code")).to_be_visible()
        expect(prompt.get_by_role("button", name="Use a passkey")).to_have_count(0)  # only a 2FA one will do
        check_accessibility(page, "the verification prompt with 2FA")
        assert user.get("/api/user/passkey").json()["data"]["count"] == 0  # nothing added before it
        prompt.get_by_label("Authenticator code").fill(backup[1])
        prompt.get_by_role("button", name="Verify").click()
        expect(page.get_by_role("status").filter(has_text="Passkey added")).to_be_visible()
        assert user.get("/api/user/passkey").json()["data"]["count"] == 1


def test_an_admin_resets_a_users_passkeys_on_the_users_page(page: Page, server: Server) -> None:
    site = at_localhost(server)
    set_option(server, "passkey.enabled", True)
    name, _ = server.add_user()
    cdp, authenticator = add_authenticator(page)
    sign_in(page, site, name)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Account").click()
    passkeys = page.get_by_role("region", name="Passkeys", exact=True)
    passkeys.get_by_role("button", name="Add a passkey").click()
    expect(page.get_by_role("status").filter(has_text="Passkey added")).to_be_visible()
    with user_client(server, name) as user:
        assert user.get("/api/user/passkey").json()["data"]["count"] == 1
    sign_out(page)

    sign_in(page, site, "root", ROOT_PASSWORD)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Users").click()
    search = page.get_by_role("search", name=re.compile("^Search by id"))
    search.get_by_role("searchbox").fill(name)
    search.get_by_role("button", name="Search").click()
    row_action(page, name, "Reset passkeys")
    confirm = page.get_by_role("dialog", name="Remove this user's passkeys?")
    expect(confirm.get_by_role("button", name="Cancel")).to_be_focused()
    check_accessibility(page, "reset passkeys confirmation")
    confirm.get_by_role("button", name="Remove passkeys").click()
    expect(page.get_by_role("status").filter(has_text=f"{name}: passkeys removed.")).to_be_visible()
    check_accessibility(page, "users after a passkey reset")
    with user_client(server, name) as user:
        status = user.get("/api/user/passkey").json()["data"]
    assert status["count"] == 0 and status["credentials"] == [], status
    sign_out(page)

    # the browser still holds the passkey; the server no longer knows it
    assert len(cdp.send("WebAuthn.getCredentials", {"authenticatorId": authenticator})["credentials"]) == 1
    page.get_by_role("button", name="Sign in with a passkey").click()
    expect(page.get_by_role("alert")).to_have_text(LOGIN_FAILED)  # the server's words
    expect(page.get_by_role("heading", level=1, name="Sign in")).to_be_visible()
    assert page.evaluate("localStorage.getItem('tollway.user')") is None
    check_accessibility(page, "a refused passkey sign-in")


def test_an_eleventh_passkey_is_refused_beside_the_button_and_nothing_is_stored(
        page: Page, server: Server) -> None:
    site = at_localhost(server)
    set_option(server, "passkey.enabled", True)
    name, user_id = server.add_user()
    with user_client(site, name) as user:  # the limit's worth of passkeys, made over the API
        for _ in range(MAX_PER_USER):
            begun = user.post("/api/user/passkey/register/begin")
            assert begun.status_code == 200, begun.text
            answer = SoftPasskey("localhost", site.url, user_id).register(begun.json()["data"]["options"])
            finished = user.post("/api/user/passkey/register/finish", json=answer)
            assert finished.status_code == 200, finished.text
        refused = user.post("/api/user/passkey/register/begin")
    assert refused.status_code == 409, refused.text
    cdp, authenticator = add_authenticator(page)
    sign_in(page, site, name)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Account").click()
    passkeys = page.get_by_role("region", name="Passkeys", exact=True)
    expect(passkeys.get_by_role("table").locator("tbody tr")).to_have_count(MAX_PER_USER)

    passkeys.get_by_role("button", name="Add a passkey").click()
    expect(passkeys.get_by_role("alert")).to_have_text(refused.json()["message"])  # beside the button
    check_accessibility(page, "account with the passkey limit's refusal")
    assert cdp.send("WebAuthn.getCredentials", {"authenticatorId": authenticator})["credentials"] == []
    with user_client(server, name) as user:
        assert user.get("/api/user/passkey").json()["data"]["count"] == MAX_PER_USER
    expect(passkeys.get_by_role("table").locator("tbody tr")).to_have_count(MAX_PER_USER)
