"""The operator's part of the dashboard in Chromium against a real `tollway serve` (embedded): after real
calls through the gateway (the official openai SDK, a fake OpenAI upstream on two channels, one with a key
the upstream refuses), root sees the users, API keys and models that spent most — with the spend each one's
consume logs add up to — and each channel's calls and errors; the range of days is sent as the browser's
own midnights, a range with no calls says so, a range ending before it starts is refused at its field; a
common user has no such section and makes no such call. axe-core finds nothing serious on it at 1280 and
360 px, light and dark."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from urllib.parse import parse_qs, urlparse
from zoneinfo import ZoneInfo

import openai
import pytest
from playwright.sync_api import Page, expect

from tests.console.browser import (
    Server,
    check_accessibility,
    data,
    on_thread,
    set_option,
    sign_in,
    tollway,
    user_client,
)
from tests.console.conftest import TIMEZONE
from tests.fakes.openai import FakeOpenAI
from tests.test_e2e_serve import ROOT_PASSWORD

pytestmark = pytest.mark.slow

GOOD_MODEL = "omni-moderation-latest"
BAD_MODEL = "text-moderation-latest"  # served only by the channel whose key the upstream refuses


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with tollway(tmp_path_factory.mktemp("console-top"), set_up=True) as running:
        set_option(running, "DisplayInCurrencyEnabled", False)  # spend shown as points: compared as integers
        set_option(running, "ModelPrice", json.dumps({GOOD_MODEL: 0.01}))  # moderation is free by default
        yield running


@pytest.fixture(scope="module")
def calls(server: Server) -> Iterator[dict[str, int]]:
    """alice calls twice with her key `laptop`, bob once with `phone` and once on the refused channel;
    the consume logs' quota per user (what the dashboard must add up to)."""
    with on_thread(FakeOpenAI(valid_keys=["good-key"])) as fake:
        for name, key, models in (("openai-good", "good-key", GOOD_MODEL),
                                  ("openai-bad", "bad-key", BAD_MODEL)):
            channel = {"name": name, "type": 1, "key": key, "base_url": fake.url, "models": models,
                       "group": "default"}
            data(server.admin().post("/api/channel/", json={"mode": "single", "channel": channel}))
        for user, key_name, times in (("alice", "laptop", 2), ("bob", "phone", 1)):
            server.add_user(quota=50_000_000, name=user)
            with user_client(server, user) as client:
                made = client.post("/api/token/", json={"name": key_name, "unlimited_quota": True})
                key = data(made)["key"]
            with openai.OpenAI(api_key=key, base_url=f"{server.url}/v1", max_retries=0) as sdk:
                for _ in range(times):
                    sdk.moderations.create(model=GOOD_MODEL, input="hello")
                if user == "bob":
                    with pytest.raises(openai.APIStatusError):
                        sdk.moderations.create(model=BAD_MODEL, input="hello")
        spent: dict[str, int] = {}
        for _ in range(200):  # the log rows are written after the replies
            consumed = data(server.admin().get("/api/log/", params={"type": 2, "page_size": 100}))["items"]
            errors = data(server.admin().get("/api/log/", params={"type": 5, "page_size": 100}))["items"]
            if len(consumed) == 3 and errors:
                break
            time.sleep(0.05)
        assert len(consumed) == 3 and len(errors) == 1, (consumed, errors)
        for row in consumed:
            spent[row["username"]] = spent.get(row["username"], 0) + row["quota"]
        assert spent["alice"] > spent["bob"] > 0
        yield spent


def points(quota: int) -> str:
    return f"{quota:,}"  # en-US, as the page formats points


def test_root_sees_who_and_what_spent_most_and_each_channels_errors(page: Page, server: Server,
                                                                     calls: dict[str, int]) -> None:
    """The lists hold what the logs hold: alice above bob with her consume logs' sum, her key with its
    owner, the one model, and the refused channel's error beside the good channel's three calls."""
    with page.expect_request(lambda r: "/api/data/top?" in r.url) as asked:
        sign_in(page, server, "root", ROOT_PASSWORD)
    query = parse_qs(urlparse(asked.value.url).query)
    zone = ZoneInfo(TIMEZONE)
    today = datetime.now(zone).date()
    start = datetime.fromtimestamp(int(query["start_timestamp"][0]), zone)
    end = datetime.fromtimestamp(int(query["end_timestamp"][0]), zone)
    assert (start.hour, start.minute, start.second) == (0, 0, 0) and (today - start.date()).days == 6
    assert end.date() == today and (end.hour, end.minute, end.second) == (23, 59, 59)

    section = page.get_by_role("region", name="Across the site")
    users = section.get_by_role("table", name="Top users by spend").locator("tbody tr")
    expect(users).to_have_count(2)
    expect(users.nth(0)).to_contain_text("alice")
    expect(users.nth(0).get_by_role("cell").first).to_have_text(points(calls["alice"]))
    expect(users.nth(0).get_by_role("cell").nth(1)).to_have_text("2")
    expect(users.nth(1)).to_contain_text("bob")
    expect(users.nth(1).get_by_role("cell").first).to_have_text(points(calls["bob"]))

    keys = section.get_by_role("table", name="Top API keys by spend").locator("tbody tr")
    expect(keys.nth(0).get_by_role("rowheader")).to_have_text("laptop")
    expect(keys.nth(0).get_by_role("cell").first).to_have_text("alice")
    expect(keys.nth(1).get_by_role("rowheader")).to_have_text("phone")

    models = section.get_by_role("table", name="Top models by spend").locator("tbody tr")
    expect(models).to_have_count(1)
    expect(models.nth(0).get_by_role("rowheader")).to_have_text(GOOD_MODEL)
    expect(models.nth(0).get_by_role("cell").first).to_have_text(points(calls["alice"] + calls["bob"]))

    channels = section.get_by_role("table", name="Channels: calls and errors")
    good = channels.get_by_role("row").filter(has=page.get_by_role("rowheader", name="openai-good"))
    bad = channels.get_by_role("row").filter(has=page.get_by_role("rowheader", name="openai-bad"))
    total = points(calls["alice"] + calls["bob"])
    expect(good.get_by_role("cell")).to_have_text(["OpenAI", "3", "0", "0%", total, ""])
    expect(bad.get_by_role("cell")).to_have_text(["OpenAI", "0", "1", "100%", "0", ""])
    check_accessibility(page, "dashboard with the operator's section")


def test_the_range_is_chosen_and_refused_at_its_field(page: Page, server: Server,
                                                      calls: dict[str, int]) -> None:
    """Days long past hold no call; a range whose end is before its start asks nothing of the server."""
    sign_in(page, server, "root", ROOT_PASSWORD)
    section = page.get_by_role("region", name="Across the site")
    expect(section.get_by_role("table", name="Top users by spend").locator("tbody tr")).to_have_count(2)
    section.get_by_label("From").fill("2020-01-01")
    section.get_by_label("To").fill("2020-01-02")
    with page.expect_request(lambda r: "/api/data/top?" in r.url) as asked:
        section.get_by_role("button", name="Show").click()
    query = parse_qs(urlparse(asked.value.url).query)
    zone = ZoneInfo(TIMEZONE)
    assert int(query["start_timestamp"][0]) == int(datetime(2020, 1, 1, tzinfo=zone).timestamp())
    assert int(query["end_timestamp"][0]) == int(datetime(2020, 1, 3, tzinfo=zone).timestamp()) - 1
    expect(section.get_by_role("table", name="Top users by spend")).to_contain_text("No calls in these days.")
    expect(section.get_by_role("table", name="Channels: calls and errors")).to_contain_text(
        "No channel served or failed a call in these days.")

    asked_again: list[str] = []
    page.on("request", lambda r: asked_again.append(r.url) if "/api/data/top" in r.url else None)
    section.get_by_label("From").fill("2020-01-05")
    section.get_by_role("button", name="Show").click()
    expect(section.get_by_text("To: must not be before the start")).to_be_visible()
    expect(section.get_by_label("To")).to_have_attribute("aria-invalid", "true")
    assert asked_again == []


def test_a_common_user_has_no_operators_section(page: Page, server: Server, calls: dict[str, int]) -> None:
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/api/data/top" in r.url else None)
    sign_in(page, server, "alice")
    expect(page.get_by_role("heading", name="Usage by model")).to_be_visible()
    expect(page.get_by_role("region", name="Across the site")).to_have_count(0)
    assert asked == []
