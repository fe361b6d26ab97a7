"""The console's dense tables in Chromium against a real `tollway serve` (embedded): each row's one primary
action and its "More" menu (`widgets/row-menu.js`), worked by keyboard (Enter opens on the first item,
the arrows, Home and End move, Escape closes and gives the focus back to the button, Tab closes) and by
pointer (a click outside closes), never clipped by the table's scroll box at 1280 or 360 px; the actions
a row offers are exactly those the server takes for that row and viewer (channels by type, status, keys,
tag and role; users by role, status, 2FA and passkeys; keys by status, expiry and quota; redemption codes
by status), and those offered work (a code's Copy puts it on the clipboard); a channel's seven models are
three chips and "+4", which shows the rest; a channel's balance is shown in US dollars. axe-core finds
nothing serious with a menu open and with "+N" expanded, at both widths. The console's lists of channel
types (which can be tested, which have a balance) are the server's."""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pyotp
import pytest
from playwright.sync_api import Page, expect

from core.enums import ChannelType
from server.upstream.providers import SERVED_TYPES
from server.upstream.providers.balances import BALANCE_TYPES
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
    tollway,
    user_client,
)
from tests.fakes.openai import FakeOpenAI

pytestmark = pytest.mark.slow

JS = Path(__file__).resolve().parents[2] / "server" / "console" / "static" / "js"
ON_TOP = """e => { const r = e.getBoundingClientRect();
  return document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2) === e; }"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with tollway(tmp_path_factory.mktemp("console-row-menus"), set_up=True) as running:
        yield running


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAI]:
    with on_thread(FakeOpenAI()) as fake:
        yield fake  # type: ignore[misc]


def add_channel(server: Server, upstream: FakeOpenAI, name: str, *, kind: int = ChannelType.OPENAI,
                models: str = "gpt-4o-mini", keys: int = 1, **fields: object) -> int:
    """A channel on the fake upstream, made through the API (`keys` > 1: one channel with that many)."""
    key = "\n".join(f"sk-{name}-{i}" for i in range(keys))
    body = {"mode": "multi_to_single" if keys > 1 else "single",
            "channel": {"name": name, "type": kind, "key": key, "models": models, "group": "default",
                        "base_url": upstream.url, **fields}}
    if keys > 1:
        body["multi_key_mode"] = "random"
    return int(data(server.admin().post("/api/channel/", json=body))[0])


def js_numbers(module: str, name: str) -> set[int]:
    """The numbers of a constant of a console module: `[1, 8]` or an object's number keys."""
    text = (JS / module).read_text()
    body = text[text.index(f"export const {name} ="):]
    body = body[:body.index(";")]
    return {int(n) for n in re.findall(r"(?<![\w.])(\d+)(?=[,:\]\s])", body.split("=", 1)[1])}


def test_the_consoles_channel_type_lists_are_the_servers() -> None:
    """The Channels page's types (and which it may test and query) come from js/generated/enums.js."""
    assert js_numbers("generated/enums.js", "CHANNEL_TYPE_NAME") == set(SERVED_TYPES)  # TESTABLE_TYPES
    assert js_numbers("generated/enums.js", "BALANCE_TYPES") == set(BALANCE_TYPES)
    form = (JS / "pages" / "channel-form.js").read_text()
    assert "new Set(Object.keys(CHANNEL_TYPE_NAME)" in form and "new Set(BALANCED)" in form


def test_the_row_menu_works_by_keyboard_and_pointer_and_is_never_clipped(
        page: Page, server: Server, upstream: FakeOpenAI) -> None:
    name = f"menu-{secrets.token_hex(3)}"
    channel_id = add_channel(server, upstream, name)
    as_root(page, server, "/channels", "Channels")
    more = page.get_by_role("button", name=f"More {name}", exact=True)
    expect(more).to_have_attribute("aria-haspopup", "menu")
    expect(more).to_have_attribute("aria-expanded", "false")
    menu = page.get_by_role("menu", name=f"More {name}")
    items = menu.get_by_role("menuitem")

    more.focus()
    page.keyboard.press("Enter")
    expect(menu).to_be_visible()
    expect(more).to_have_attribute("aria-expanded", "true")
    expect(items.first).to_be_focused()
    expect(items).to_have_text(["Test", "Disable", "Update balance", "Copy", "Reveal key", "Delete"])
    expect(items.last).to_have_class(re.compile(r"\bdanger-item\b"))  # the destructive one looks it
    page.keyboard.press("ArrowDown")
    expect(items.nth(1)).to_be_focused()
    page.keyboard.press("End")
    expect(items.last).to_be_focused()
    page.keyboard.press("ArrowDown")  # wraps
    expect(items.first).to_be_focused()
    page.keyboard.press("ArrowUp")
    expect(items.last).to_be_focused()
    page.keyboard.press("Home")
    expect(items.first).to_be_focused()
    page.keyboard.press("r")  # the next item starting with the letter
    expect(menu.get_by_role("menuitem", name="Reveal key")).to_be_focused()
    check_accessibility(page, "channels with a row menu open")
    expect(menu).to_be_visible()
    page.keyboard.press("Escape")
    expect(menu).to_have_count(0)
    expect(more).to_be_focused()
    expect(more).to_have_attribute("aria-expanded", "false")

    page.keyboard.press("ArrowUp")  # from the button: open on the last item
    expect(items.last).to_be_focused()
    page.keyboard.press("Tab")  # closes, and the focus moves on
    expect(menu).to_have_count(0)
    assert page.evaluate("document.activeElement.closest('[role=menu]') === null")

    for width in (1280, 360):  # never clipped: the whole menu is on screen and on top
        page.set_viewport_size({"width": width, "height": 800})
        more.scroll_into_view_if_needed()
        more.click()
        expect(menu).to_be_visible()
        box = menu.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width
        assert box["y"] >= 0 and box["y"] + box["height"] <= 800
        for item in items.all():
            assert item.evaluate(ON_TOP)
        page.get_by_role("heading", level=1).click()  # a click outside closes
        expect(menu).to_have_count(0)
    page.set_viewport_size({"width": 1280, "height": 800})

    more.focus()  # an item chosen by keyboard runs; the focus and the result come back to the row
    page.keyboard.press("Enter")
    page.keyboard.press("ArrowDown")
    expect(menu.get_by_role("menuitem", name="Disable")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator(".notice")).to_have_text(f"Channel “{name}” disabled.")
    expect(more).to_be_focused()
    row = page.locator("tbody tr", has=more)
    expect(row.locator(".row-note")).to_have_text(f"Channel “{name}” disabled.")
    assert data(server.admin().get(f"/api/channel/{channel_id}"))["status"] == 2
    assert "Enable" in row_offers(page, name) and "Disable" not in row_offers(page, name)
    server.admin().delete(f"/api/channel/{channel_id}")


def test_a_channels_actions_follow_its_type_status_keys_tag_and_the_viewers_role(
        page: Page, server: Server, upstream: FakeOpenAI) -> None:
    suffix = secrets.token_hex(3)
    plain, claude, azure, multi, tagged = (f"{what}-{suffix}" for what in
                                           ("plain", "claude", "azure", "multi", "tagged"))
    ids = [add_channel(server, upstream, plain),
           add_channel(server, upstream, claude, kind=ChannelType.ANTHROPIC, models="claude-x", status=2),
           add_channel(server, upstream, azure, kind=ChannelType.AZURE, other="2024-02-01"),
           add_channel(server, upstream, multi, keys=2),
           add_channel(server, upstream, tagged, tag=f"team-{suffix}")]
    try:
        as_root(page, server, "/channels", "Channels")
        both = ["Copy", "Reveal key", "Delete"]
        assert row_offers(page, plain) == ["Edit", "Test", "Disable", "Update balance", *both]
        assert row_offers(page, claude) == ["Edit", "Test", "Enable", *both]  # disabled; no balance API
        assert row_offers(page, azure) == ["Edit", "Disable", *both]  # not served: no test, no balance
        assert row_offers(page, multi) == ["Edit", "Test", "Disable", "Copy", "Keys", "Reveal key", "Delete"]
        assert row_offers(page, tagged) == ["Edit", "Test", "Disable", "Update balance", "Copy", "Tag",
                                            "Reveal key", "Delete"]

        row_action(page, claude, "Enable")  # each offered action works
        expect(page.locator(".notice")).to_have_text(f"Channel “{claude}” enabled.")
        assert data(server.admin().get(f"/api/channel/{ids[1]}"))["status"] == 1
        upstream.balance, upstream.used = 1234.5, 0.0
        row_action(page, plain, "Update balance")
        expect(page.locator(".notice")).to_have_text(f"Channel “{plain}” balance: $1,234.50.")
        balance = page.locator("tbody tr", has=page.get_by_role("button", name=f"More {plain}", exact=True)
                               ).locator("td[data-label='Balance']")
        expect(balance).to_have_text("$1,234.50")  # with its currency (the server stores USD)
        assert balance.evaluate("e => getComputedStyle(e).textAlign") == "right"

        admin = f"adm{secrets.token_hex(3)}"  # an admin, not root: no key revealed
        data(server.admin().post("/api/user/", json={"username": admin, "password": PASSWORD, "role": 10}))
        page.context.clear_cookies()
        sign_in(page, server, admin)
        page.goto(f"{server.url}/channels")
        assert row_offers(page, plain) == ["Edit", "Test", "Disable", "Update balance", "Copy", "Delete"]
    finally:
        for channel_id in ids:
            server.admin().delete(f"/api/channel/{channel_id}")


def test_a_channels_seven_models_are_three_chips_and_plus_four(page: Page, server: Server,
                                                               upstream: FakeOpenAI) -> None:
    name = f"seven-{secrets.token_hex(3)}"
    models = [f"model-{i}" for i in range(7)]
    channel_id = add_channel(server, upstream, name, models=",".join(models))
    try:
        as_root(page, server, "/channels", "Channels")
        chips = page.get_by_role("list", name=f"Models of {name}")
        expect(chips.get_by_role("listitem")).to_have_text(models[:3])
        more = page.get_by_role("button", name=f"Show all 7 models of {name}")
        expect(more).to_have_text("+4")
        expect(more).to_have_attribute("aria-expanded", "false")
        more.focus()
        page.keyboard.press("Enter")
        expect(chips.get_by_role("listitem")).to_have_text(models)
        fewer = page.get_by_role("button", name=f"Show fewer models of {name}")
        expect(fewer).to_have_attribute("aria-expanded", "true")
        expect(fewer).to_be_focused()
        check_accessibility(page, "channels with +N expanded")
        fewer.click()
        expect(chips.get_by_role("listitem")).to_have_text(models[:3])
    finally:
        server.admin().delete(f"/api/channel/{channel_id}")


def test_a_users_actions_follow_the_roles_and_the_status(page: Page, server: Server) -> None:
    suffix = secrets.token_hex(3)
    common, off, admin = f"com{suffix}", f"off{suffix}", f"adm{suffix}"
    ids = {name: server.add_user(name=name)[1] for name in (common, off)}
    ids[admin] = int(data(server.admin().post("/api/user/", json={"username": admin, "password": PASSWORD,
                                                                   "role": 10}))["id"])
    data(server.admin().post("/api/user/manage", json={"id": ids[off], "action": "disable"}))
    with user_client(server, common) as user:  # 2FA on: it may be turned off (no passkey: none removed)
        totp = pyotp.TOTP(data(user.post("/api/user/2fa/setup"))["secret"])
        data(user.post("/api/user/2fa/enable", json={"code": totp.now()}))
    as_root(page, server, "/users", "Users")
    expect(page.locator("td[data-label='Balance']").first).to_have_text(re.compile(r"^\$\d"))  # as money
    assert row_offers(page, common) == ["Edit", "Change balance", "Disable", "Promote", "Reset 2FA", "Delete"]
    assert row_offers(page, off) == ["Edit", "Change balance", "Enable", "Promote", "Delete"]
    assert row_offers(page, admin) == ["Edit", "Change balance", "Disable", "Demote", "Delete"]
    assert row_offers(page, "root") == ["Edit", "Change balance"]  # never disabled, demoted nor deleted
    check_accessibility(page, "users")

    page.context.clear_cookies()  # an admin: nothing on root or on another admin, no Promote anywhere
    sign_in(page, server, admin)
    page.goto(f"{server.url}/users")
    assert row_offers(page, "root") == [] and row_offers(page, admin) == []
    assert row_offers(page, common) == ["Edit", "Change balance", "Disable", "Reset 2FA", "Delete"]
    assert row_offers(page, off) == ["Edit", "Change balance", "Enable", "Delete"]
    row_action(page, off, "Enable")  # offered, so it works
    expect(page.locator(".notice")).to_have_text(f"{off} enabled.")
    with user_client(server, off) as user:
        assert data(user.get("/api/user/self"))["username"] == off


def test_a_keys_actions_follow_its_status_expiry_and_quota(page: Page, server: Server) -> None:
    name, _ = server.add_user()
    past = int(time.time()) + 2
    with user_client(server, name) as user:
        for key in ({"name": "spare", "unlimited_quota": True},
                    {"name": "spent", "remain_quota": 0},
                    {"name": "ageing", "unlimited_quota": True, "expired_time": past},
                    {"name": "limited", "unlimited_quota": True, "model_limits_enabled": True,
                     "model_limits": "m-1,m-2,m-3,m-4,m-5"}):
            made = data(user.post("/api/token/", json=key))
            if key["name"] != "limited":
                data(user.put("/api/token/", params={"status_only": 1}, json={"id": made["id"], "status": 2}))
    time.sleep(max(0.0, past + 1 - time.time()))  # "ageing" has expired
    sign_in(page, server, name)
    page.goto(f"{server.url}/keys")
    assert row_offers(page, "spare") == ["Edit", "Reveal", "Enable", "Delete"]
    assert row_offers(page, "spent") == ["Edit", "Reveal", "Delete"]  # no quota left: enabling is refused
    assert row_offers(page, "ageing") == ["Edit", "Reveal", "Delete"]  # expired: enabling is refused
    assert row_offers(page, "limited") == ["Edit", "Reveal", "Disable", "Delete"]
    limits = page.get_by_role("list", name="Models API key “limited” may call")
    expect(limits.get_by_role("listitem")).to_have_text(["m-1", "m-2", "m-3"])
    page.get_by_role("button", name="Show all 5 models of API key “limited”").click()
    expect(limits.get_by_role("listitem")).to_have_text([f"m-{i}" for i in range(1, 6)])
    row_action(page, "spare", "Enable")
    expect(page.locator(".notice")).to_have_text("API key “spare” enabled.")
    with user_client(server, name) as user:
        listed = data(user.get("/api/token/", params={"page_size": 10}))["items"]
    assert {k["name"]: k["status"] for k in listed}["spare"] == 1


def test_a_codes_actions_follow_its_status_and_copy_puts_it_on_the_clipboard(page: Page,
                                                                             server: Server) -> None:
    name = f"batch{secrets.token_hex(3)}"
    keys = data(server.admin().post("/api/redemption/", json={"name": name, "quota": 1000, "count": 3}))
    listed = data(server.admin().get("/api/redemption/search", params={"keyword": name}))["items"]
    label = {c["key"]: f"{name} #{c['id']}" for c in listed}
    ids = {c["key"]: c["id"] for c in listed}
    off = {"id": ids[keys[1]], "status": 2}
    data(server.admin().put("/api/redemption/", params={"status_only": 1}, json=off))
    user, _ = server.add_user()
    with user_client(server, user) as client:
        data(client.post("/api/user/topup", json={"key": keys[2]}))
    as_root(page, server, "/redemptions", "Redemption codes")
    assert row_offers(page, label[keys[0]]) == ["Copy", "Disable", "Delete"]
    assert row_offers(page, label[keys[1]]) == ["Enable", "Delete"]
    assert row_offers(page, label[keys[2]]) == ["Delete"]  # used: never enabled or disabled again
    row_action(page, label[keys[0]], "Copy")
    expect(page.locator(".notice")).to_have_text(f"Code {label[keys[0]]} copied to the clipboard.")
    assert page.evaluate("navigator.clipboard.readText()") == keys[0]
