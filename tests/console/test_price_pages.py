"""The console's Models and prices page, log details and chat playground in Chromium against a real
`tollway serve` (embedded) with the fake OpenAI as the channel's upstream: root sees which models have no
price, edits one in place and the next chat call through the gateway is billed by it; a user sees only the
models they may call, at their group's price; a log opened shows the billing breakdown that gives its
charge; the playground streams a reply from the fake upstream and shows its charge. Each page and dialog
passes axe-core at 1280 and 360 px."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from playwright.sync_api import Page, expect

from tests.console.browser import (
    Server,
    as_root,
    check_accessibility,
    data,
    on_thread,
    row_menu,
    set_option,
    sign_in,
    tollway,
    user_client,
)
from tests.fakes.openai import FakeOpenAI
from tests.test_e2e_serve import ROOT_PASSWORD

pytestmark = pytest.mark.slow

CHAT, UNPRICED, VIP_ONLY = "gpt-chat", "gpt-unpriced", "gpt-vip"


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAI]:
    with on_thread(FakeOpenAI(chunk_delay=0)) as fake:
        yield fake  # type: ignore[misc]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, upstream: FakeOpenAI) -> Iterator[Server]:
    """A server whose channel `fake chat` serves the chat models from the fake OpenAI, one of them only to
    the `vip` group; nothing priced yet."""
    with tollway(tmp_path_factory.mktemp("console-prices"), set_up=True) as running:
        set_option(running, "GroupRatio", json.dumps({"default": 1, "vip": 2}))
        for name, models, group in (("fake chat", f"{CHAT},{UNPRICED}", "default"),
                                    ("vip chat", VIP_ONLY, "vip")):
            channel = {"name": name, "type": 1, "key": "o-key", "base_url": upstream.url, "models": models,
                       "group": group}
            data(running.admin().post("/api/channel/", json={"mode": "single", "channel": channel}))
        yield running


def consume_logs(server: Server, model: str, key_name: str) -> list[dict[str, Any]]:
    """The consume logs (type 2) of `model` called with the key `key_name`, newest first, once at least
    one is written (the quota sync writes them within about a second; the loop is a bound on a hang, not a
    timing check)."""
    for _ in range(200):
        rows: list[dict[str, Any]] = data(server.admin().get(
            "/api/log/", params={"type": 2, "model_name": model, "token_name": key_name}))["items"]
        if rows:
            return rows
        time.sleep(0.05)
    raise AssertionError(f"no consume log of {model}")


def test_root_sees_the_unpriced_models_and_a_price_edited_in_place_bills_the_next_call(
        page: Page, server: Server) -> None:
    name, _ = server.add_user(quota=50_000_000)
    with user_client(server, name) as user:
        key = data(user.post("/api/token/", json={"name": "sdk", "unlimited_quota": True}))["key"]
    as_root(page, server, "/models", "Models and prices")
    unpriced = "3 models have no price: every call to them is refused."
    expect(page.get_by_role("status").filter(has_text=unpriced)).to_be_visible()
    row = page.locator("tbody tr", has=page.get_by_role("rowheader", name=CHAT))
    expect(row).to_contain_text("No price: calls are refused")
    expect(row).to_contain_text("fake chat")
    check_accessibility(page, "models and prices")
    page.get_by_label("Only models without a price").check()
    expect(page.locator("tbody tr")).to_have_count(3)

    row.get_by_role("button", name=f"Edit price {CHAT}").click()
    dialog = page.get_by_role("dialog", name=f"Price of “{CHAT}”")
    dialog.get_by_label("Model ratio").fill("many")
    dialog.get_by_role("button", name="Save").click()
    expect(dialog.get_by_label("Model ratio")).to_have_accessible_description(
        "Empty removes the model's entry (the default applies again). "
        "Model ratio: must be a number of 0 or more")
    check_accessibility(page, "price dialog with a refusal")
    dialog.get_by_label("Model ratio").fill("3")
    dialog.get_by_label("Completion ratio").fill("2")
    dialog.get_by_role("button", name="Save").click()
    expect(dialog).to_be_hidden()
    # the row is redrawn where it stands, from the reply: ratio 3 is $6 per million input tokens
    expect(row).to_contain_text("$6.00")
    expect(row).to_contain_text("$12.00")
    expect(row).to_contain_text("Saved.")
    expect(row).not_to_contain_text("No price")
    expect(row.get_by_role("button", name=f"Edit price {CHAT}")).to_be_focused()
    expect(page.get_by_role("status").filter(has_text="2 models have no price")).to_be_visible()
    options = {o["key"]: o["value"] for o in data(server.admin().get("/api/option/"))}
    assert json.loads(options["ModelRatio"]) == {CHAT: 3}  # the option stays the storage

    with openai.OpenAI(api_key=key, base_url=f"{server.url}/v1", max_retries=0) as client:
        done = client.chat.completions.create(model=CHAT, messages=[{"role": "user", "content": "hi there"}])
    assert done.usage is not None
    (log,) = consume_logs(server, CHAT, "sdk")
    assert log["quota"] == math.ceil((done.usage.prompt_tokens + done.usage.completion_tokens * 2) * 3)


def test_an_admin_reads_every_models_price_and_the_unpriced_ones_but_edits_none(page: Page,
                                                                                server: Server) -> None:
    name, user_id = server.add_user()
    data(server.admin().post("/api/user/manage", json={"id": user_id, "action": "promote"}))
    unpriced = [r["model_name"] for r in data(server.admin().get("/api/pricing/models")) if not r["priced"]]
    sign_in(page, server, name)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Models and prices").click()
    expect(page.get_by_role("heading", level=1, name="Models and prices")).to_be_visible()
    expect(page.locator("p.warning")).to_contain_text(f"{len(unpriced)} model")
    expect(page.locator("tbody tr", has=page.get_by_role("rowheader", name=VIP_ONLY))).to_contain_text(
        "vip chat")  # every model, the vip group's too, with its channel
    page.get_by_label("Only models without a price").check()
    expect(page.locator("tbody tr")).to_have_count(len(unpriced))
    expect(page.get_by_role("button", name=re.compile("^Edit price"))).to_have_count(0)  # root edits


def test_a_user_sees_only_the_models_they_may_call_at_their_groups_price(page: Page, server: Server) -> None:
    data(server.admin().put("/api/pricing/models", json={"model": VIP_ONLY, "model_ratio": 1}))
    name, _ = server.add_user()
    sign_in(page, server, name)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Models and prices").click()
    expect(page.get_by_role("heading", level=1, name="Models and prices")).to_be_visible()
    models = page.locator("tbody th")
    expect(models.first).to_be_visible()
    shown = {text.split("No price")[0].strip() for text in models.all_inner_texts()}
    assert VIP_ONLY not in shown and UNPRICED in shown  # vip is not a group this user may use
    expect(page.get_by_role("button", name=f"Edit price {CHAT}")).to_have_count(0)  # read-only
    check_accessibility(page, "price list of a user")



def test_a_log_opened_shows_the_billing_breakdown_that_gives_its_charge(page: Page, server: Server,
                                                                       upstream: FakeOpenAI) -> None:
    price = {"model": CHAT, "model_ratio": 3, "completion_ratio": 2, "cache_ratio": 0.1}
    data(server.admin().put("/api/pricing/models", json=price))
    name, _ = server.add_user(quota=50_000_000)
    with user_client(server, name) as user:
        key = data(user.post("/api/token/", json={"name": "cached", "unlimited_quota": True}))["key"]
    upstream.text.cached = 3
    try:
        with openai.OpenAI(api_key=key, base_url=f"{server.url}/v1", max_retries=0) as client:
            client.chat.completions.create(model=CHAT, messages=[{"role": "user", "content": "one two"}])
    finally:
        upstream.text.cached = 0
    (log,) = consume_logs(server, CHAT, "cached")
    other = json.loads(log["other"])
    assert other["cache_read_tokens"] == 3 and log["quota"] > 0

    as_root(page, server, "/logs", "Logs")
    page.get_by_label("Model", exact=True).fill("-CH")  # a part of the name, any case
    page.get_by_role("button", name="Apply filters").click()
    calls = data(server.admin().get("/api/log/", params={"model_name": CHAT}))["total"]
    expect(page.get_by_text(f"Showing 1–{calls} of {calls}.")).to_be_visible()  # gpt-chat's, no other model's
    page.get_by_label("Request id").fill(log["request_id"])
    page.get_by_role("button", name="Apply filters").click()
    expect(page.locator("tbody tr")).to_have_count(1)
    page.locator("tbody tr").get_by_role("button", name="Open").click()
    dialog = page.get_by_role("dialog", name="Log of")
    expect(dialog).to_contain_text(log["request_id"])
    uncached = log["prompt_tokens"] - 3
    expect(dialog.locator("code.formula")).to_have_text(
        f"({uncached} + {log['completion_tokens']} × 2 + 3 × 0.1) × 3 × 1 = "
        f"{(uncached + log['completion_tokens'] * 2 + 0.3) * 3:g} → {log['quota']}")
    expect(dialog).to_contain_text(f"Charged: {log['quota']} points")
    expect(dialog).to_contain_text("as the formula gives")
    check_accessibility(page, "a log opened")
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()


def test_the_playground_streams_a_chat_reply_and_shows_its_charge(page: Page, server: Server,
                                                                  upstream: FakeOpenAI) -> None:
    data(server.admin().put("/api/pricing/models", json={"model": CHAT, "model_ratio": 2}))
    name, _ = server.add_user(quota=50_000_000)
    with user_client(server, name) as user:
        data(user.post("/api/token/", json={"name": "limited", "unlimited_quota": True,
                                            "model_limits_enabled": True, "model_limits": UNPRICED}))
        data(user.post("/api/token/", json={"name": "chat-key", "unlimited_quota": True}))
    sign_in(page, server, name)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Playground").click()
    chat = page.get_by_role("form", name="Chat")
    expect(chat.get_by_label("Model")).to_have_value(CHAT)
    expect(chat.get_by_label("API key").locator("option")).to_have_text(["chat-key"])  # the key list follows
    chat.get_by_label("Model").select_option(UNPRICED)
    expect(chat.get_by_label("API key").locator("option")).to_have_text(["chat-key", "limited"])
    chat.get_by_label("Model").select_option(CHAT)
    check_accessibility(page, "playground with the chat")

    chat.get_by_label("System prompt").fill("Be brief.")
    chat.get_by_label("Message").fill("Say hello")
    chat.get_by_role("button", name="Send").click()
    turn = page.get_by_role("log", name="Conversation").locator(".turn")
    expect(turn).to_contain_text("Hello from the fake.")
    expect(turn.locator(".turn-meta")).to_contain_text("charged")
    sent = upstream.received[-1].json
    assert sent["stream"] is True and sent["messages"][0] == {"role": "system", "content": "Be brief."}
    (log,) = consume_logs(server, CHAT, "chat-key")
    meta = turn.locator(".turn-meta")
    assert log["is_stream"] and log["request_id"] == meta.get_attribute("data-request-id")
    expect(turn.locator(".turn-meta")).to_have_text(
        f"{log['prompt_tokens']} tokens in, {log['completion_tokens']} out; charged "
        f"${log['quota'] / 500_000:.6f}".rstrip("0") + ".")
    check_accessibility(page, "playground with a reply")

    upstream.chunk_delay = 3  # a chunk every 3 s: the first words arrive, and Stop cuts the stream
    try:
        chat.get_by_label("Message").fill("And again")
        chat.get_by_role("button", name="Send").click()
        second = turn.nth(1)
        # streamed into the page as it arrives
        expect(second.locator(".turn-text")).to_have_text(re.compile(r"^Hello"), timeout=20_000)
        page.get_by_role("button", name="Stop").click()
        expect(second.locator(".turn-meta")).to_contain_text("Stopped.")
        expect(second.locator(".turn-text")).not_to_have_text("Hello from the fake.")
    finally:
        upstream.chunk_delay = 0
    assert upstream.received[-1].json["messages"][1:] == [
        {"role": "user", "content": "Say hello"}, {"role": "assistant", "content": "Hello from the fake."},
        {"role": "user", "content": "And again"}]


def test_a_row_action_keeps_the_scroll_and_the_focus_and_says_its_result_by_the_row(
        page: Page, server: Server) -> None:
    name, _ = server.add_user()
    with user_client(server, name) as user:
        for i in range(10):
            data(user.post("/api/token/", json={"name": f"key-{i}", "unlimited_quota": True}))
    page.set_viewport_size({"width": 360, "height": 700})  # rows as cards: the last one far down the page
    sign_in(page, server, name)
    page.goto(f"{server.url}/keys")
    more = page.get_by_role("button", name="More key-0")  # the oldest: the last row
    more.scroll_into_view_if_needed()
    assert page.evaluate("window.scrollY") > 0
    before = more.bounding_box()
    row_menu(page, "key-0").get_by_role("menuitem", name="Disable").click()
    row = page.locator("tbody tr", has=page.get_by_role("button", name="More key-0", exact=True))
    expect(row).to_contain_text("Disabled")
    more = page.get_by_role("button", name="More key-0")
    expect(more).to_be_focused()  # the row's More button of the redrawn row, not the page's body
    expect(row.locator(".row-note")).to_have_text("API key “key-0” disabled.")
    after = more.bounding_box()  # the row stays where it was on the screen: the page did not jump
    assert before is not None and after is not None and abs(after["y"] - before["y"]) < 2
    with user_client(server, name) as user:
        keys = data(user.get("/api/token/", params={"p": 1, "page_size": 20}))["items"]
    assert {k["name"]: k["status"] for k in keys}["key-0"] == 2


def test_a_dialog_open_when_the_session_ends_closes_with_the_page(page: Page, server: Server) -> None:
    as_root(page, server, "/models", "Models and prices")
    page.get_by_role("button", name=f"Edit price {UNPRICED}").click()
    dialog = page.get_by_role("dialog", name=f"Price of “{UNPRICED}”")
    dialog.get_by_label("Model ratio").fill("1")
    page.context.clear_cookies()  # the session ends (signed out elsewhere, or expired)
    dialog.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", level=1, name="Sign in")).to_be_visible()
    expect(dialog).to_be_hidden()
    expect(page.get_by_role("dialog")).to_have_count(0)


def test_a_models_channels_show_three_then_a_button_for_the_rest(page: Page, server: Server,
                                                                 upstream: FakeOpenAI) -> None:
    """Runs last: it adds channels. Four channels of one model (one disabled): three named, then `+1`, a
    button that shows the fourth (marked off) by keyboard and hides it again."""
    model = "many-channels-model"
    for i in range(4):
        channel = {"name": f"many {i}", "type": 1, "key": "o-key", "base_url": upstream.url, "models": model,
                   "group": "default", "status": 2 if i == 3 else 1}
        data(server.admin().post("/api/channel/", json={"mode": "single", "channel": channel}))
    sign_in(page, server, "root", ROOT_PASSWORD)
    page.goto(f"{server.url}/models")
    row = page.locator("tbody tr", has=page.get_by_role("rowheader", name=model))
    channels = row.get_by_role("list", name=f"Channels of {model}")
    expect(channels.get_by_role("listitem").locator("visible=true")).to_have_count(3)
    more = row.get_by_role("button", name=f"Show all 4 channels of {model}")
    expect(more).to_have_text("+1")
    more.focus()
    page.keyboard.press("Enter")
    expect(channels.get_by_role("listitem").locator("visible=true")).to_have_count(4)
    expect(channels.get_by_role("listitem").nth(3)).to_have_text("many 3 (disabled)")
    expect(row.get_by_role("button", name=f"Show fewer channels of {model}")).to_have_attribute(
        "aria-expanded", "true")
    check_accessibility(page, "Models and prices with a model's channels expanded")
