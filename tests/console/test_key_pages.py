"""The console's dashboard and API keys pages in Chromium against a real `tollway serve` (embedded), with
a channel pointing at the fake OpenAI upstream: the balance as the site displays it, a key created,
revealed and copied in the page that works with the official openai SDK until it is disabled in the page,
a key with every limit (stored as typed, in the browser's time zone), a refusal at its field, delete after
a confirmation, the list paged and searched on the server, the usage chart, and how many `/api` calls each
page makes. Each page and dialog passes axe-core at 1280 and 360 px."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import httpx
import openai
import pytest
from playwright.sync_api import Page, Request, expect

from tests.console.browser import (
    Server,
    check_accessibility,
    on_thread,
    row_action,
    set_option,
    sign_in,
    sign_out,
    tollway,
    user_client,
)
from tests.fakes.openai import FakeOpenAI
from tests.test_e2e_serve import ROOT_PASSWORD

pytestmark = pytest.mark.slow

MODEL = "omni-moderation-latest"
KEY = re.compile(r"^sk-[A-Za-z0-9]{48}$")
KOLKATA = timezone(timedelta(hours=5, minutes=30))  # tests/console/conftest.py TIMEZONE


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with tollway(tmp_path_factory.mktemp("console-keys"), set_up=True) as running:
        yield running


@pytest.fixture(scope="module")
def upstream(server: Server) -> Iterator[FakeOpenAI]:
    """The fake OpenAI upstream, and a channel of the default group serving its moderation model."""
    with on_thread(FakeOpenAI()) as fake:
        channel = {"name": "openai", "type": 1, "key": "o-key", "base_url": fake.url, "models": MODEL,
                   "group": "default"}
        created = server.admin().post("/api/channel/", json={"mode": "single", "channel": channel})
        assert created.status_code == 200, created.text
        yield fake  # type: ignore[misc]


def moderate(server: Server, key: str) -> bool:
    """One moderation call with the official SDK; whether the text was flagged."""
    with openai.OpenAI(api_key=key, base_url=f"{server.url}/v1", max_retries=0) as client:
        return client.moderations.create(model=MODEL, input="I will kill the bug").results[0].flagged


def clipboard(page: Page) -> str:
    text: str = page.evaluate("navigator.clipboard.readText()")
    return text


def test_the_dashboard_shows_the_balance_as_the_site_displays_it(page: Page, server: Server) -> None:
    name, _ = server.add_user(quota=1_234_567)
    status = server.status()
    assert status["display_in_currency"] and status["quota_display_type"] == "USD"
    sign_in(page, server, name)
    balance = page.locator(".card", has_text="Balance").locator("dd")
    expect(balance).to_have_text(f"${1_234_567 / status['quota_per_unit']:,.2f}")
    expect(page.locator(".card", has_text="Requests").locator("dd")).to_have_text("0")
    set_option(server, "DisplayInCurrencyEnabled", False)
    try:
        page.reload()
        expect(balance).to_have_text("1,234,567")  # points, as the site now shows quota
    finally:
        set_option(server, "DisplayInCurrencyEnabled", True)
    check_accessibility(page, "dashboard")


def test_a_key_made_in_the_page_calls_a_model_until_disabled(page: Page, server: Server,
                                                            upstream: FakeOpenAI) -> None:
    name, _ = server.add_user(quota=10_000_000)
    sign_in(page, server, name)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="API keys").click()
    expect(page.get_by_role("heading", level=1, name="API keys")).to_be_visible()
    expect(page.get_by_text("No API keys yet. Create one to call models.")).to_be_visible()

    page.get_by_role("button", name="Create API key").click()
    form = page.get_by_role("dialog", name="Create an API key")
    form.get_by_label("Name").fill("sdk")
    form.get_by_label("Unlimited quota").check()
    expect(form.get_by_label(re.compile(r"^Quota"))).to_be_hidden()
    check_accessibility(page, "key form")
    form.get_by_role("button", name="Create key").click()
    secret = form.get_by_label("Your new API key")
    expect(secret).to_have_value(KEY)
    check_accessibility(page, "new key shown once")
    form.get_by_role("button", name="Copy").click()
    expect(form.get_by_text("Copied to the clipboard.")).to_be_visible()
    copied = clipboard(page)
    assert copied == secret.input_value() and KEY.match(copied)
    form.get_by_role("button", name="Done").click()
    row = page.locator("tbody tr", has_text="sdk")
    expect(row).to_contain_text("Enabled")
    expect(row).to_contain_text("Unlimited")

    assert moderate(server, copied) is True  # the copied key works against the gateway
    assert upstream.received[-1].headers["authorization"] == "Bearer o-key"

    page.evaluate("navigator.clipboard.writeText('')")
    row_action(page, "sdk", "Reveal")
    revealed = page.get_by_role("dialog", name="API key “sdk”")
    expect(revealed.get_by_label("The whole key")).to_have_value(copied)
    revealed.get_by_role("button", name="Copy").click()
    expect(revealed.get_by_text("Copied to the clipboard.")).to_be_visible()
    assert clipboard(page) == copied
    revealed.get_by_role("button", name="Close").click()
    check_accessibility(page, "API keys")

    row_action(page, "sdk", "Disable")
    expect(row).to_contain_text("Disabled")
    with pytest.raises(openai.AuthenticationError) as refused:
        moderate(server, copied)
    assert refused.value.code == "token_disabled"
    row_action(page, "sdk", "Enable")
    expect(row).to_contain_text("Enabled")
    assert moderate(server, copied) is True

    with user_client(server, name) as user:  # the calls reach the usage buckets with the next sync run
        for _ in range(100):
            buckets = user.get("/api/data/self").json()["data"]
            if sum(b["count"] for b in buckets) >= 2:
                break
            page.wait_for_timeout(100)
    assert {b["model_name"] for b in buckets} == {MODEL}
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Dashboard").click()
    page.get_by_label("Show", exact=True).select_option(label="Requests")
    chart = page.get_by_role("img", name=re.compile(r"^Requests by model, last 7 days"))
    expect(chart).to_be_visible()
    expect(chart.locator("rect title").first).to_contain_text(f"{MODEL}, ")
    expect(page.get_by_role("list").filter(has_text=MODEL)).to_be_visible()  # the legend
    page.get_by_text("Show the numbers").click()
    expect(page.get_by_role("table", name="Requests by model, last 7 days")).to_contain_text(MODEL)
    check_accessibility(page, "dashboard with a chart")


def test_an_admin_chooses_everyones_usage_on_the_dashboard(page: Page, server: Server,
                                                           upstream: FakeOpenAI) -> None:
    """A user's calls show in root's dashboard only when root chooses everyone's usage (`GET /api/data/`);
    "Yours" keeps showing root's own (none); a common user is not offered the choice."""
    name, _ = server.add_user(quota=10_000_000)
    with user_client(server, name) as user:
        made = user.post("/api/token/", json={"name": "chart", "unlimited_quota": True})
        assert made.status_code == 200, made.text
        assert moderate(server, made.json()["data"]["key"]) is True
    admin = server.admin()
    for _ in range(100):  # the call reaches the usage buckets with the next sync run
        everyone = admin.get("/api/data/").json()["data"]
        if any(b["model_name"] == MODEL for b in everyone):
            break
        page.wait_for_timeout(100)
    assert admin.get("/api/data/self").json()["data"] == []  # root itself made no call

    sign_in(page, server, name)
    expect(page.get_by_role("heading", level=1, name="Dashboard")).to_be_visible()
    expect(page.get_by_label("Whose usage")).to_have_count(0)
    sign_out(page)

    sign_in(page, server, "root", ROOT_PASSWORD)
    expect(page.get_by_text("No usage in this period yet.")).to_be_visible()  # "Yours": root's own
    with page.expect_request(lambda r: "/api/data/?" in r.url) as asked:
        page.get_by_label("Whose usage").select_option(label="Everyone")
    assert "start_timestamp=" in asked.value.url
    page.get_by_label("Show", exact=True).select_option(label="Requests")
    chart = page.get_by_role("img", name=re.compile(r"^Requests by model, last 7 days"))
    expect(chart.locator("rect title").first).to_contain_text(f"{MODEL}, ")
    check_accessibility(page, "dashboard, everyone's usage")


def test_a_key_made_with_only_a_name_takes_the_forms_defaults(page: Page, server: Server) -> None:
    """The form opens with values that submit: one unit of quota ($1), never expiring; a refusal made in
    the page names the field by its label, not by the API's name (`remain_quota`)."""
    name, _ = server.add_user()
    sign_in(page, server, name)
    page.goto(f"{server.url}/keys")
    page.get_by_role("button", name="Create API key").click()
    form = page.get_by_role("dialog", name="Create an API key")
    quota = form.get_by_label("Quota ($)")
    expect(quota).to_have_value("1")
    quota.fill("")
    form.get_by_label("Name").fill("only-a-name")
    form.get_by_role("button", name="Create key").click()
    expect(quota).to_have_accessible_description(re.compile(r"Quota \(\$\): must be a number$"))
    quota.fill("1")
    form.get_by_role("button", name="Create key").click()
    expect(form.get_by_label("Your new API key")).to_have_value(re.compile(r"^sk-"))
    with user_client(server, name) as user:
        made = user.get("/api/token/search", params={"keyword": "only-a-name"}).json()["data"]["items"][0]
    per_unit = server.status()["quota_per_unit"]
    assert (made["remain_quota"], made["unlimited_quota"], made["expired_time"]) == (per_unit, False, -1)


def test_a_key_with_every_limit_then_deleted(page: Page, server: Server, upstream: FakeOpenAI) -> None:
    name, _ = server.add_user(quota=10_000_000)
    per_unit = server.status()["quota_per_unit"]
    sign_in(page, server, name)
    page.goto(f"{server.url}/keys")
    page.get_by_role("button", name="Create API key").click()
    form = page.get_by_role("dialog", name="Create an API key")
    form.get_by_label("Name").fill("limited")
    form.get_by_label("Quota ($)").fill("1.5")
    form.get_by_label("Never expires").uncheck()
    form.get_by_label("Expires at").fill("2031-02-03T04:05")
    form.get_by_label("Limit the models this key may call").check()
    form.get_by_role("group", name="Models the key may call").get_by_label(MODEL).check()
    form.get_by_label("IP allow list").fill("127.0.0.1\nnot an address")
    form.get_by_label("Group").select_option("vip")
    form.get_by_role("button", name="Create key").click()
    ips = form.get_by_label("IP allow list")
    expect(ips).to_have_attribute("aria-invalid", "true")  # the server's refusal, at its field
    expect(ips).to_have_accessible_description(re.compile(r"IP allow list: "))  # its label, not allow_ips
    ips.fill("127.0.0.1\n10.0.0.0/8")
    form.get_by_role("button", name="Create key").click()
    made = form.get_by_label("Your new API key")
    expect(made).to_have_value(KEY)
    form.get_by_role("button", name="Done").click()

    with user_client(server, name) as user:
        keys = user.get("/api/token/").json()["data"]["items"]
    assert len(keys) == 1
    stored = keys[0]
    assert stored["name"] == "limited" and stored["unlimited_quota"] is False
    assert stored["remain_quota"] == round(1.5 * per_unit)
    assert stored["expired_time"] == int(datetime(2031, 2, 3, 4, 5, tzinfo=KOLKATA).timestamp())
    assert stored["model_limits_enabled"] is True and stored["model_limits"] == MODEL
    assert stored["allow_ips"] == "127.0.0.1\n10.0.0.0/8" and stored["group"] == "vip"
    row = page.locator("tbody tr", has_text="limited")
    expect(row).to_contain_text("$1.50")
    expect(row).to_contain_text("Feb 3, 2031, 4:05")  # shown in the browser's time zone

    row.get_by_role("button", name="Edit").click()
    edit = page.get_by_role("dialog", name="Edit API key “limited”")
    expect(edit.get_by_label("Expires at")).to_have_value("2031-02-03T04:05")
    edit.get_by_label("Name").fill("limited renamed")
    edit.get_by_role("button", name="Save").click()
    expect(page.locator("tbody tr", has_text="limited renamed")).to_be_visible()
    with user_client(server, name) as user:
        edited = user.get("/api/token/").json()["data"]["items"][0]
    assert edited["name"] == "limited renamed"
    unchanged = {k: v for k, v in stored.items() if k != "name"}
    assert {k: v for k, v in edited.items() if k != "name"} == unchanged

    row = page.locator("tbody tr", has_text="limited renamed")
    row_action(page, "limited renamed", "Delete")
    confirm = page.get_by_role("dialog", name="Delete this API key?")
    expect(confirm.get_by_role("button", name="Cancel")).to_be_focused()
    check_accessibility(page, "delete confirmation")
    confirm.get_by_role("button", name="Cancel").click()
    expect(row).to_be_visible()
    expect(page.get_by_role("button", name="More limited renamed")).to_be_focused()  # the dialog gave it back
    row_action(page, "limited renamed", "Delete")
    page.get_by_role("dialog", name="Delete this API key?").get_by_role("button", name="Delete").click()
    expect(page.get_by_text("No API keys yet. Create one to call models.")).to_be_visible()
    with user_client(server, name) as user:
        assert user.get("/api/token/").json()["data"]["total"] == 0


def test_the_key_list_is_paged_and_searched_on_the_server(page: Page, server: Server) -> None:
    name, _ = server.add_user()
    with user_client(server, name) as user:
        for n in range(12):
            assert user.post("/api/token/", json={"name": f"key {n:02}"}).status_code == 200
        whole = user.post("/api/token/", json={"name": "found by key"}).json()["data"]["key"]
    asked: list[httpx.URL] = []
    page.on("request", lambda r: asked.append(httpx.URL(r.url)) if "/api/token/" in r.url else None)
    sign_in(page, server, name)
    page.goto(f"{server.url}/keys")
    expect(page.get_by_text("Showing 1–10 of 13.")).to_be_visible()
    expect(page.locator("tbody tr")).to_have_count(10)
    page.get_by_role("navigation", name="Pages").get_by_role("button", name="Next").click()
    expect(page.get_by_text("Showing 11–13 of 13.")).to_be_visible()
    expect(page.get_by_text("Page 2 of 2")).to_be_visible()
    last = asked[-1]
    assert (last.path, last.params["p"], last.params["page_size"]) == ("/api/token/", "2", "10")
    page.get_by_label("Rows per page").select_option("20")
    expect(page.locator("tbody tr")).to_have_count(13)
    search = page.get_by_role("search", name="Search by name or whole key")
    search.get_by_label("Search by name or whole key").fill("key 07")
    search.get_by_role("button", name="Search").click()
    expect(page.locator("tbody tr")).to_have_count(1)
    expect(page.locator("tbody tr")).to_contain_text("key 07")
    assert (asked[-1].path, asked[-1].params["keyword"]) == ("/api/token/search", "key 07")
    search.get_by_label("Search by name or whole key").fill(whole)
    search.get_by_role("button", name="Search").click()
    expect(page.locator("tbody tr")).to_contain_text("found by key")
    assert asked[-1].params["token"] == whole
    search.get_by_label("Search by name or whole key").fill("nothing like it")
    search.get_by_role("button", name="Search").click()
    expect(page.get_by_text("Nothing matches “nothing like it”.")).to_be_visible()


def api_calls(page: Page) -> list[str]:
    """The `/api` paths the page asks for from now on (appended as they go out)."""
    seen: list[str] = []

    def record(request: Request) -> None:
        path = httpx.URL(request.url).path
        if path.startswith("/api/"):
            seen.append(path)

    page.on("request", record)
    return seen


def test_each_page_makes_few_api_calls_at_load_and_none_later(page: Page, server: Server) -> None:
    """The numbers docs/CONSOLE.md gives; ten minutes of the page's own timers add none (no polling)."""
    page.clock.install()
    calls = api_calls(page)
    for path, heading in (("/login", "Sign in"), ("/register", "Create an account"),
                          ("/forgot-password", "Forgotten password")):
        calls.clear()
        page.goto(f"{server.url}{path}")
        expect(page.get_by_role("heading", level=1, name=heading)).to_be_visible()
        page.wait_for_load_state("networkidle")
        assert calls == ["/api/status"], (path, calls)

    name, _ = server.add_user()
    sign_in(page, server, name)
    for path, heading, own in (("/", "Dashboard", ["/api/data/self"]),
                               ("/keys", "API keys", ["/api/token/"])):
        calls.clear()
        page.goto(f"{server.url}{path}")
        expect(page.get_by_role("heading", level=1, name=heading)).to_be_visible()
        page.wait_for_load_state("networkidle")
        # a full load also reads the site's notice, once, beside the page's own calls
        assert sorted(calls) == sorted(["/api/status", "/api/user/self", "/api/notice", *own]), (path, calls)
    calls.clear()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Dashboard").click()
    expect(page.get_by_role("heading", level=1, name="Dashboard")).to_be_visible()
    page.wait_for_load_state("networkidle")
    assert calls == ["/api/data/self"]  # moving in the page: the balance read at load is fresh (< 5 s)
    page.clock.run_for(6000)
    calls.clear()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="API keys").click()
    expect(page.get_by_role("table", name="Your API keys")).to_be_visible()
    page.wait_for_load_state("networkidle")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Dashboard").click()
    expect(page.get_by_role("heading", level=1, name="Dashboard")).to_be_visible()
    page.wait_for_load_state("networkidle")
    assert calls == ["/api/token/", "/api/user/self", "/api/data/self"]  # older: the balance is read again
    calls.clear()
    page.clock.run_for("10:00")
    page.wait_for_load_state("networkidle")
    assert calls == []
