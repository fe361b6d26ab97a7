"""The console's admin pages in Chromium against a real `tollway serve` (embedded): a channel made and
edited in the page (its models fetched from the fake OpenAI upstream) that routes the next model call of
the official openai SDK, tested from the page, copied, filtered, deleted in a batch, its key's reveal
asking for a verification; redemption codes made
in the page (shown once, copied and downloaded as a file) that redeem exactly once; a pending top-up
order completed by hand that credits its owner; users created, searched, filtered by group, given and
refused quota, disabled, promoted, demoted and deleted, with the role hierarchy's refusal shown as the
server words it. Each result is checked through the API; each page and dialog passes axe-core at 1280
and 360 px."""

from __future__ import annotations

import asyncio
import re
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pyotp
import pytest
from playwright.sync_api import Page, expect

from core.enums import TopUpStatus
from models.db import Database
from models.topups import TopUp, TopUpRepository
from tests.console.browser import (
    PASSWORD,
    Server,
    as_root,
    check_accessibility,
    data,
    on_thread,
    row_action,
    row_offers,
    sign_in,
    sign_out,
    tollway,
    user_client,
)
from tests.fakes.openai import FakeOpenAI
from tests.test_e2e_serve import ROOT_PASSWORD

pytestmark = pytest.mark.slow

CODE = re.compile(r"^[0-9a-f]{32}$")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console-admin")


@pytest.fixture(scope="module")
def server(data_dir: Path) -> Iterator[Server]:
    with tollway(data_dir, set_up=True) as running:
        yield running


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAI]:
    with on_thread(FakeOpenAI()) as fake:
        yield fake  # type: ignore[misc]


def moderate(server: Server, key: str, model: str) -> bool:
    """One moderation call with the official SDK; whether the text was flagged."""
    with openai.OpenAI(api_key=key, base_url=f"{server.url}/v1", max_retries=0) as client:
        return client.moderations.create(model=model, input="I will kill the bug").results[0].flagged


def test_a_channel_made_and_edited_in_the_page_routes_the_next_call(page: Page, server: Server,
                                                                    upstream: FakeOpenAI) -> None:
    name, _ = server.add_user(quota=10_000_000)
    with user_client(server, name) as user:
        key = data(user.post("/api/token/", json={"name": "sdk", "unlimited_quota": True}))["key"]
    as_root(page, server, "/channels", "Channels")
    expect(page.get_by_text("No channels yet. Create one to serve model calls.")).to_be_visible()
    check_accessibility(page, "channels")

    page.get_by_role("button", name="Create channel").click()
    form = page.get_by_role("dialog", name="Create a channel")
    form.get_by_label("Name").fill("fake openai")
    form.get_by_label("Type").select_option(label="OpenAI")
    form.get_by_label("Key", exact=True).fill("o-key")
    form.get_by_label("Base URL").fill(upstream.url)
    form.get_by_role("button", name="Fetch the upstream's models").click()  # root: settings not saved yet
    models = form.get_by_label("Models")
    expect(models).to_have_value("omni-moderation-latest,text-moderation-latest")
    models.fill("omni-moderation-latest")
    form.get_by_label("Model mapping").fill("[1]")
    check_accessibility(page, "channel form")
    form.get_by_role("button", name="Create channel").click()
    mapping = form.get_by_label("Model mapping")
    expect(mapping).to_have_attribute("aria-invalid", "true")  # the server's refusal, at its field
    mapping.fill("")
    form.get_by_role("button", name="Create channel").click()
    expect(page.locator(".notice")).to_have_text("1 channel created.")
    row = page.locator("tbody tr", has_text="fake openai")
    expect(row).to_contain_text("Enabled")

    assert moderate(server, key, "omni-moderation-latest") is True
    with pytest.raises(openai.APIStatusError):
        moderate(server, key, "text-moderation-latest")  # no channel serves it yet

    row.get_by_role("button", name="Edit fake openai").click()
    edit = page.get_by_role("dialog", name="Edit channel “fake openai”")
    edit.get_by_role("button", name="Fetch the upstream's models").click()  # the saved channel's own key
    expect(edit.get_by_label("Models")).to_have_value("omni-moderation-latest,text-moderation-latest")
    edit.get_by_role("button", name="Save").click()
    expect(edit).to_be_hidden()
    assert moderate(server, key, "text-moderation-latest") is True  # the edit routes the next call
    assert upstream.received[-1].json["model"] == "text-moderation-latest"
    assert upstream.received[-1].headers["authorization"] == "Bearer o-key"  # the key was kept

    row_action(page, "fake openai", "Test")
    answered = re.compile(r"^Channel “fake openai” answered in \d+\.\d\d s\.$")
    expect(page.locator(".notice")).to_have_text(answered)
    expect(row).to_contain_text(" ms")
    page.get_by_role("button", name="Test all channels").click()
    expect(page.locator(".notice")).to_have_text("Testing every channel ended; the list shows each channel's "
                                                 "last test.")
    expect(page.get_by_role("status").filter(has_text="Every channel tested")).to_have_text(
        "Every channel tested: 1 passed, 0 failed, of 1.")

    row_action(page, "fake openai", "Copy")
    copy = page.locator("tbody tr", has=page.get_by_label("Select fake openai_copy"))
    expect(copy).to_be_visible()
    page.get_by_label("Status").select_option("disabled")
    expect(page.get_by_text("No channel matches these filters.")).to_be_visible()
    page.get_by_label("Status").select_option("")
    copy.get_by_label("Select fake openai_copy").check()
    page.get_by_role("button", name="Delete the selected").click()
    confirm = page.get_by_role("dialog", name="Delete the selected channels?")
    expect(confirm.get_by_role("button", name="Cancel")).to_be_focused()
    check_accessibility(page, "delete selected channels confirmation")
    confirm.get_by_role("button", name="Delete selected").click()
    expect(page.locator(".notice")).to_have_text("1 channel deleted.")
    expect(copy).to_have_count(0)
    listed = data(server.admin().get("/api/channel/"))
    assert [c["name"] for c in listed["items"]] == ["fake openai"]

    row_action(page, "fake openai", "Reveal key")  # root without a verification
    # root has neither 2FA nor a passkey: no prompt for a code root cannot have, but what to set up first
    setup = page.get_by_role("dialog", name="Set up two-factor authentication first")
    expect(setup).to_contain_text("Your account has neither yet.")
    expect(setup.get_by_label("Authenticator code")).to_have_count(0)
    check_accessibility(page, "what to set up before revealing a key")
    setup.get_by_role("link", name="Open the Account page").click()
    expect(page.get_by_role("heading", level=1, name="Account")).to_be_visible()
    expect(setup).to_be_hidden()
    refused = server.admin().post("/api/verify", json={"method": "2fa", "code": "123456"})
    assert refused.status_code == 400  # what the server says to a code from root, who has no 2FA


def test_codes_made_in_the_page_are_shown_once_and_redeem_exactly_once(page: Page, server: Server) -> None:
    per_unit = server.status()["quota_per_unit"]
    name, _ = server.add_user()
    as_root(page, server, "/redemptions", "Redemption codes")
    expect(page.get_by_text("No redemption codes yet.")).to_be_visible()
    check_accessibility(page, "redemption codes")

    page.get_by_role("button", name="Create codes").click()
    form = page.get_by_role("dialog", name="Create redemption codes")
    form.get_by_label("Name").fill("launch")
    form.get_by_label("Quota of each code ($)").fill("2")
    form.get_by_label("How many codes").fill("101")
    check_accessibility(page, "redemption code form")
    form.get_by_role("button", name="Create codes").click()
    count = form.get_by_label("How many codes")
    expect(count).to_have_attribute("aria-invalid", "true")  # the server's refusal, at its field
    expect(count).to_have_accessible_description(re.compile(r"How many codes: must be at most 100"))
    count.fill("2")
    form.get_by_role("button", name="Create codes").click()
    shown = form.get_by_label("The 2 new codes")
    expect(shown).to_be_visible()
    keys = shown.input_value().split("\n")
    assert len(keys) == 2 and all(CODE.match(k) for k in keys)
    check_accessibility(page, "new codes shown once")
    form.get_by_role("button", name="Copy").click()
    expect(form.get_by_text("Copied to the clipboard.")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == "\n".join(keys)
    with page.expect_download() as download:
        form.get_by_role("link", name="Download").click()
    assert download.value.suggested_filename == "redemption-codes-launch.txt"
    assert Path(download.value.path()).read_text() == "".join(f"{k}\n" for k in keys)
    form.get_by_role("button", name="Done").click()
    expect(page.locator("tbody tr", has_text="launch")).to_have_count(2)
    stored = data(server.admin().get("/api/redemption/search", params={"keyword": "launch"}))
    assert sorted(c["key"] for c in stored["items"]) == sorted(keys)
    assert {c["quota"] for c in stored["items"]} == {2 * per_unit}

    with user_client(server, name) as user:
        first = user.post("/api/user/topup", json={"key": keys[0]})
        again = user.post("/api/user/topup", json={"key": keys[0]})
        assert (first.status_code, first.json()["data"]) == (200, 2 * per_unit)
        assert (again.status_code, again.json()["message"]) == (409, "redemption code already used")
        assert data(user.get("/api/user/self"))["quota"] == 2 * per_unit

    page.reload()
    used = page.locator("tbody tr", has_text=keys[0])
    expect(used).to_contain_text("Used")
    expect(used).to_contain_text(f"{name}, ")  # who redeemed it, by name (not "User #2")
    page.set_viewport_size({"width": 360, "height": 800})
    shown = used.locator("code")  # the whole code fits a phone's width: wrapped, not cut off
    assert shown.evaluate("e => e.scrollWidth <= e.clientWidth + 1 && e.getBoundingClientRect().right <= 360")
    page.set_viewport_size({"width": 1280, "height": 800})
    unused = page.locator("tbody tr", has_text=keys[1])
    row_action(page, str(unused.get_by_role("rowheader").text_content()), "Disable")
    expect(unused).to_contain_text("Disabled")
    with user_client(server, name) as user:
        refused = user.post("/api/user/topup", json={"key": keys[1]})
        assert (refused.status_code, refused.json()["message"]) == (400, "redemption code is disabled")

    search = page.get_by_role("search", name="Search by id, whole code or name")
    search.get_by_label("Search by id, whole code or name").fill(keys[1])
    search.get_by_role("button", name="Search").click()
    expect(page.locator("tbody tr")).to_have_count(1)

    page.get_by_role("button", name="Delete invalid codes").click()
    confirm = page.get_by_role("dialog", name="Delete every invalid code?")
    expect(confirm.get_by_role("button", name="Cancel")).to_be_focused()
    check_accessibility(page, "delete invalid codes confirmation")
    confirm.get_by_role("button", name="Delete invalid codes").click()
    expect(page.locator(".notice")).to_have_text("2 invalid redemption codes deleted.")
    expect(page.get_by_text(f"Nothing matches “{keys[1]}”.")).to_be_visible()
    assert data(server.admin().get("/api/redemption/"))["total"] == 0


def seed_order(data_dir: Path, user_id: int, trade_no: str, amount: int) -> None:
    """A pending order in the server's SQLite database, written through the repository (on a thread of
    its own: Playwright's synchronous API keeps an event loop running on this one)."""
    async def add() -> None:
        db = Database(f"sqlite+aiosqlite:///{(data_dir / 'data' / 'tollway.db').resolve()}", pool_size=1)
        try:
            async with db.transaction() as tx:
                await TopUpRepository(tx).add(TopUp(
                    user_id=user_id, amount=amount, money=amount * 7.0, trade_no=trade_no,
                    payment_method="card", payment_provider="stripe", create_time=1_700_000_000,
                    complete_time=0, status=TopUpStatus.PENDING))
        finally:
            await db.dispose()

    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(add())
        except BaseException as exc:  # handed back to the test's thread
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert not failure, failure


def test_a_pending_order_completed_by_hand_credits_its_owner_once(page: Page, server: Server,
                                                                  data_dir: Path) -> None:
    per_unit = server.status()["quota_per_unit"]
    name, user_id = server.add_user()
    trade_no = f"ref_{secrets.token_hex(6)}"
    seed_order(data_dir, user_id, trade_no, 3)
    seed_order(data_dir, user_id, f"ref_other_{secrets.token_hex(4)}", 1)
    as_root(page, server, "/orders", "Orders")
    search = page.get_by_role("search", name="Search by trade number")
    search.get_by_label("Search by trade number").fill(trade_no[4:])
    search.get_by_role("button", name="Search").click()
    row = page.locator("tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text(trade_no)
    expect(row).to_contain_text("Pending")
    expect(row.locator("td").first).to_have_text(name)  # the owner by username, not "#id"
    check_accessibility(page, "orders")
    row.get_by_role("button", name=f"Complete {trade_no}").click()
    confirm = page.get_by_role("dialog", name="Complete this order by hand?")
    expect(confirm).to_contain_text(f"user {name} is credited $3.00")
    check_accessibility(page, "complete order confirmation")
    confirm.get_by_role("button", name="Complete order").click()
    expect(row).to_contain_text("Completed")
    expect(row.get_by_role("button", name=re.compile("^Complete"))).to_have_count(0)
    with user_client(server, name) as user:
        assert data(user.get("/api/user/self"))["quota"] == 3 * per_unit
        mine = data(user.get("/api/user/topup/self"))
    assert {o["trade_no"]: o["status"] for o in mine["items"]}[trade_no] == "success"


def test_users_are_managed_in_the_page_and_refusals_show_the_servers_message(page: Page,
                                                                             server: Server) -> None:
    per_unit = server.status()["quota_per_unit"]
    as_root(page, server, "/users", "Users")
    check_accessibility(page, "users")
    name = f"ann{secrets.token_hex(3)}"
    page.get_by_role("button", name="Create user").click()
    form = page.get_by_role("dialog", name="Create a user")
    form.get_by_label("Username").fill(name)
    form.get_by_label("Password").fill("short")
    check_accessibility(page, "user form")
    form.get_by_role("button", name="Create user").click()
    expect(form.get_by_label("Password")).to_have_attribute("aria-invalid", "true")
    form.get_by_label("Password").fill(PASSWORD)
    form.get_by_role("button", name="Create user").click()
    expect(form).to_be_hidden()
    expect(page.locator(".notice")).to_have_text(f"User {name} created.")  # a confirmation, not silence

    search = page.get_by_role("search", name=re.compile("^Search by id"))
    search.get_by_role("searchbox").fill(name)
    search.get_by_role("button", name="Search").click()
    row = page.locator("tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text(name)
    found = data(server.admin().get("/api/user/search", params={"keyword": name}))
    user_id = found["items"][0]["id"]

    row.get_by_role("button", name=f"Edit {name}").click()
    edit = page.get_by_role("dialog", name=f"Edit user “{name}”")
    edit.get_by_label("Display name").fill("Ann")
    edit.get_by_label("Group").fill("vip")
    edit.get_by_role("button", name="Save").click()
    expect(page.locator(".notice")).to_have_text(f"User {name} saved.")
    expect(row).to_contain_text("vip")
    page.get_by_label("Group", exact=True).select_option("vip")
    expect(page.locator("tbody tr", has_text=name)).to_be_visible()
    expect(page.locator("tbody tr", has_text="root")).to_have_count(0)  # root is in group default
    page.get_by_label("Group", exact=True).select_option("")

    row = page.locator("tbody tr", has_text=name)
    row_action(page, name, "Change balance")
    quota = page.get_by_role("dialog", name=f"Balance of “{name}”")
    quota.get_by_label("Amount ($)").fill("5")
    check_accessibility(page, "balance form")
    quota.get_by_role("button", name="Apply").click()
    expect(page.locator(".notice")).to_have_text(f"{name}'s balance is now $5.00.")
    row_action(page, name, "Change balance")
    quota = page.get_by_role("dialog", name=f"Balance of “{name}”")
    quota.get_by_label("Change", exact=True).select_option("subtract")
    quota.get_by_label("Amount ($)").fill("6")
    quota.get_by_role("button", name="Apply").click()
    expect(quota.get_by_role("alert")).to_have_text(re.compile(r"\S"))  # the server's 409, in the form
    refused = quota.get_by_role("alert").text_content()
    quota.get_by_label("Change", exact=True).select_option("override")
    quota.get_by_label("Amount ($)").fill("1.5")
    quota.get_by_role("button", name="Apply").click()
    replace = page.get_by_role("dialog", name="Replace this balance?")
    replace.get_by_role("button", name="Replace balance").click()
    expect(page.locator(".notice")).to_have_text(f"{name}'s balance is now $1.50.")
    target = data(server.admin().get(f"/api/user/{user_id}"))
    assert target["quota"] == round(1.5 * per_unit) and target["display_name"] == "Ann"
    subtract = server.admin().post("/api/user/manage", json={"id": user_id, "action": "add_quota",
                                                             "mode": "subtract", "value": 10 * per_unit})
    assert subtract.status_code == 409 and subtract.json()["message"] == refused

    row_action(page, name, "Disable")
    page.get_by_role("dialog", name="Disable this user?").get_by_role("button", name="Disable").click()
    expect(row).to_contain_text("Disabled")
    login = httpx.post(f"{server.url}/api/user/login", json={"username": name, "password": PASSWORD})
    assert login.status_code != 200
    row_action(page, name, "Enable")
    expect(row).to_contain_text("Enabled")
    row_action(page, name, "Promote")
    expect(row).to_contain_text("Admin")
    assert data(server.admin().get(f"/api/user/{user_id}"))["role"] == 10

    assert "Reset 2FA" not in row_offers(page, name)  # 2FA is off: nothing to turn off (the server's 404)
    with user_client(server, name) as user:  # the user turns 2FA on
        totp = pyotp.TOTP(data(user.post("/api/user/2fa/setup"))["secret"])
        data(user.post("/api/user/2fa/enable", json={"code": totp.now()}))
        assert data(user.get("/api/user/2fa/status"))["enabled"] is True
    page.reload()
    row_action(page, name, "Reset 2FA")
    turn_off = page.get_by_role("dialog", name="Turn off this user's 2FA?")
    turn_off.get_by_role("button", name="Turn off 2FA").click()
    expect(page.locator(".notice")).to_have_text(f"{name}: 2FA turned off.")
    assert "Reset 2FA" not in row_offers(page, name)
    with user_client(server, name) as user:
        assert data(user.get("/api/user/2fa/status"))["enabled"] is False

    # the new admin, signed in: root's row and their own offer nothing (the server refuses an admin every
    # action on an equal or higher role); a refusal the list could not foresee (a user promoted since it
    # was read) shows the server's 403 message, as it words it
    other, other_id = server.add_user()
    sign_out(page)
    sign_in(page, server, name)
    page.goto(f"{server.url}/users")
    assert row_offers(page, "root") == [] and row_offers(page, name) == []
    assert "Promote" not in row_offers(page, other)
    data(server.admin().post("/api/user/manage", json={"id": other_id, "action": "promote"}))
    row_action(page, other, "Disable")
    page.get_by_role("dialog", name="Disable this user?").get_by_role("button", name="Disable").click()
    with user_client(server, name) as admin:
        forbidden = admin.post("/api/user/manage", json={"id": other_id, "action": "disable"})
    assert forbidden.status_code == 403
    expect(page.locator(".notice")).to_have_text(forbidden.json()["message"])
    expect(page.locator("tbody tr", has_text=other)).to_contain_text("Enabled")
    sign_out(page)

    as_root(page, server, "/users", "Users")
    row = page.locator("tbody tr", has_text=name)
    row_action(page, name, "Demote")
    page.get_by_role("dialog", name="Demote this admin?").get_by_role("button", name="Demote").click()
    expect(row).to_contain_text("User")
    row_action(page, name, "Delete")
    confirm = page.get_by_role("dialog", name="Delete this user?")
    expect(confirm.get_by_role("button", name="Cancel")).to_be_focused()
    confirm.get_by_role("button", name="Delete").click()
    expect(page.locator("tbody tr", has_text=name)).to_have_count(0)
    assert server.admin().get(f"/api/user/{user_id}").status_code == 404


def test_each_admin_page_makes_few_api_calls_at_load_and_none_later(page: Page, server: Server) -> None:
    """The numbers docs/CONSOLE.md gives for the admin pages; ten minutes of their timers add none."""
    page.clock.install()
    seen: list[str] = []
    page.on("request", lambda r: seen.append(httpx.URL(r.url).path)
            if httpx.URL(r.url).path.startswith("/api/") else None)
    # the dashboard's own calls are done: its operator's section asks last (a load may go quiet before)
    with page.expect_response(lambda r: httpx.URL(r.url).path == "/api/data/top"):
        sign_in(page, server, "root", ROOT_PASSWORD)
    page.wait_for_load_state("networkidle")
    for path, heading, own in (("/users", "Users", {"/api/user/", "/api/group/"}),
                               ("/channels", "Channels", {"/api/channel/"}),
                               ("/redemptions", "Redemption codes", {"/api/redemption/"}),
                               ("/orders", "Orders", {"/api/user/topup"})):
        seen.clear()
        page.goto(f"{server.url}{path}")
        expect(page.get_by_role("heading", level=1, name=heading)).to_be_visible()
        page.wait_for_load_state("networkidle")
        own = {*own, "/api/notice"}  # a full load also reads the site's notice, once
        assert seen[:2] == ["/api/status", "/api/user/self"] and sorted(seen[2:]) == sorted(own), (path, seen)
        seen.clear()
        page.clock.run_for("10:00")
        page.wait_for_load_state("networkidle")
        assert seen == [], (path, seen)
