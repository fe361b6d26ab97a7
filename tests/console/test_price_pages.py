"""The console's Models and prices page, log details and chat playground in Chromium against a real
`tollway serve` (embedded) with the fake OpenAI as the channel's upstream: root sees which models have no
price, edits one in place and the next chat call through the gateway is billed by it; a user sees only the
models they may call, at their group's price; a log opened shows the billing breakdown that gives its
charge; the playground streams a reply from the fake upstream and shows its charge. Each page and dialog
passes axe-core at 1280 and 360 px."""

from __future__ import annotations

import json
import math
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
    set_option,
    sign_in,
    tollway,
    user_client,
)
from tests.fakes.openai import FakeOpenAI

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


def consume_logs(server: Server, model: str) -> list[dict[str, Any]]:
    """The consume logs (type 2) of `model`, newest first, once at least one is written (the quota sync
    writes them within about a second; the loop is a bound on a hang, not a timing check)."""
    for _ in range(200):
        rows: list[dict[str, Any]] = data(server.admin().get(
            "/api/log/", params={"type": 2, "model_name": model}))["items"]
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
    (log,) = consume_logs(server, CHAT)
    assert log["quota"] == math.ceil((done.usage.prompt_tokens + done.usage.completion_tokens * 2) * 3)


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

