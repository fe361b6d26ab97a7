"""Root's Settings page in Chromium against a real `tollway serve` (embedded): every option of the registry
has the field its kind calls for, in its section (one shown at a time), labelled, starting from its stored
value — the page builds them from `GET /api/option/schema`, so an option added to core/option_registry.py
needs no change to the page; the site name changed in the page is the shell's after a reload; a ModelRatio
that is not JSON is refused in the page at its field and never sent; a value the server's rule refuses
(RetryTimes 99) shows the server's message at its field; a good ModelRatio is saved and read back through
the API; secrets saved in the page take effect and are never shown back; an admin has no Settings entry
and is told the page is for root; the page makes two `/api` calls at load. Each state passes axe-core at
1280 and 360 px."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, Request, expect

from core.option_registry import NO_EFFECT, SECTIONS, Spec
from tests.console.browser import Server, check_accessibility, sign_in, tollway, user_client
from tests.test_e2e_serve import ROOT_PASSWORD

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with tollway(tmp_path_factory.mktemp("console-settings"), set_up=True) as running:
        yield running


def data(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()["data"]


def options(server: Server) -> dict[str, str]:
    return {o["key"]: o["value"] for o in data(server.admin().get("/api/option/"))}


def option_puts(page: Page) -> list[dict[str, Any]]:
    """The bodies of the `PUT /api/option/` calls the page makes from now on."""
    sent: list[dict[str, Any]] = []

    def record(request: Request) -> None:
        if request.method == "PUT" and request.url.endswith("/api/option/"):
            sent.append(json.loads(request.post_data or "{}"))
    page.on("request", record)
    return sent


def open_settings(page: Page, server: Server, section: str = "") -> None:
    """Sign in as root and open Settings from the navigation, then the section titled `section` if given."""
    sign_in(page, server, "root", ROOT_PASSWORD)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Settings").click()
    expect(page.get_by_role("heading", level=1, name="Settings")).to_be_visible()
    if section:
        open_section(page, section)


def open_section(page: Page, title: str) -> None:
    """Show the section titled `title` (one is shown at a time)."""
    page.get_by_role("navigation", name="Settings sections").get_by_role("link", name=title).click()
    expect(page.get_by_role("heading", level=2, name=title)).to_be_visible()


# every named control of the page's forms: its section (form), label, element, type, value and bounds
CONTROLS = """() => [...document.querySelectorAll("main form [name]")].map((c) => ({
  key: c.getAttribute("name"), form: c.form?.getAttribute("aria-label") ?? "",
  label: c.labels?.[0]?.textContent ?? "", tag: c.tagName.toLowerCase(), type: c.getAttribute("type") ?? "",
  value: c.value, checked: c.checked === true, min: c.getAttribute("min"), max: c.getAttribute("max"),
  choices: c.tagName === "SELECT" ? [...c.options].map((o) => o.value) : null,
}))"""


def expected_editor(spec: Spec) -> tuple[str, str]:
    """(element, type) of the field an option's kind and rule call for."""
    if spec.kind == "bool":
        return "input", "checkbox"
    if spec.secret:
        return "input", "password"
    if spec.bounds.choices is not None:
        return "select", ""
    if spec.kind in ("json", "text"):
        return "textarea", ""
    if spec.kind in ("int", "float"):
        return "input", "number"
    return "input", "text"


def number_text(bound: float | None) -> str | None:
    """A bound as the page writes it (JavaScript's `String(n)`: whole numbers without a point or an
    exponent, 9007199254740991 included)."""
    if bound is None:
        return None
    return str(int(bound)) if float(bound).is_integer() else repr(float(bound))


def test_every_registry_option_has_the_field_its_kind_calls_for(page: Page, server: Server) -> None:
    stored = options(server)
    open_settings(page, server)
    controls = page.evaluate(CONTROLS)
    assert [c["key"] for c in controls] == [spec.key for section in SECTIONS for spec in section.specs]
    by_key = {c["key"]: c for c in controls}
    for section in SECTIONS:
        open_section(page, section.title)
        for spec in section.specs:
            c = by_key[spec.key]
            assert (c["form"], c["label"]) == (section.title, spec.label), spec.key
            assert (c["tag"], c["type"]) == expected_editor(spec), spec.key
            b = spec.bounds
            if spec.kind == "bool":
                assert c["checked"] == (stored[spec.key] == "true"), spec.key
            elif spec.secret:
                assert c["value"] == "" and spec.key not in stored, spec.key
            elif spec.kind == "json":
                assert json.loads(c["value"]) == json.loads(stored[spec.key]), spec.key
            else:
                assert c["value"] == stored[spec.key], spec.key
            if b.choices is not None:
                assert c["choices"] == list(b.choices), spec.key
            if c["type"] == "number":
                assert c["max"] == number_text(b.maximum), spec.key
                assert c["min"] == (None if b.exclusive_minimum else number_text(b.minimum)), spec.key
        if section.id == "quota":  # the bounds the server checks are told under the field
            expect(page.get_by_label("Retries on another channel")).to_have_accessible_description(
                "From 0 to 10.")
            expect(page.get_by_label("Quota per unit (one dollar)")).to_have_accessible_description(
                "Greater than 0.")
        if section.id == "site":
            expect(page.get_by_label("Site name")).to_have_accessible_description(
                "Shown in the console's header and title. 1–64 characters.")
    auto_group = next(s for s in SECTIONS if any(spec.key == "DefaultUseAutoGroup" for spec in s.specs))
    open_section(page, auto_group.title)
    switch = page.get_by_label("Default to the auto group")
    expect(switch).to_have_accessible_description(NO_EFFECT)  # a switch has its hint too


def test_root_changes_the_site_name_and_the_shell_shows_it_after_a_reload(page: Page, server: Server) -> None:
    open_settings(page, server)
    check_accessibility(page, "settings")
    sent = option_puts(page)
    site = page.get_by_role("form", name="Site")
    site.get_by_label("Site name").fill("Acme Gateway")
    site.get_by_role("button", name="Save Site").click()
    expect(page.locator(".notice")).to_have_text("Site: 1 option saved.")
    assert sent == [{"key": "SystemName", "value": "Acme Gateway"}]  # only what changed
    assert options(server)["SystemName"] == "Acme Gateway"
    page.reload()
    expect(page.get_by_role("heading", level=1, name="Settings")).to_be_visible()
    expect(page.locator("tw-shell header.top")).to_contain_text("Acme Gateway")
    assert page.title() == "Settings · Acme Gateway"


def test_model_ratio_is_checked_in_the_page_then_saved_and_read_back(page: Page, server: Server) -> None:
    open_settings(page, server, "Quota and pricing")
    sent = option_puts(page)
    quota = page.get_by_role("form", name="Quota and pricing")
    ratio = quota.get_by_label("Model ratios")
    ratio.fill('{"gpt-x": 2,')
    quota.get_by_role("button", name="Save Quota and pricing").click()
    expect(ratio).to_have_attribute("aria-invalid", "true")
    expect(ratio).to_have_accessible_description(re.compile(r"Model ratios: is not valid JSON"))
    expect(ratio).to_be_focused()
    check_accessibility(page, "settings with a refused JSON field")
    assert sent == []  # refused in the page: nothing went to the server

    retries = quota.get_by_label("Retries on another channel")
    retries.fill("99")
    ratio.fill('{"gpt-x": 2.5, "gpt-y": 0}')
    quota.get_by_role("button", name="Save Quota and pricing").click()
    expect(page.locator(".notice")).to_have_text("Quota and pricing: 1 option saved, 1 refused.")
    refused = server.admin().put("/api/option/", json={"key": "RetryTimes", "value": "99"})
    assert refused.status_code == 400
    message = refused.json()["message"]
    assert message.startswith("RetryTimes: ")
    expect(retries).to_have_attribute("aria-invalid", "true")
    labelled = "Retries on another channel: " + message.removeprefix("RetryTimes: ")  # its label, not its key
    expect(retries).to_have_accessible_description(re.compile(re.escape(labelled)))
    expect(ratio).not_to_have_attribute("aria-invalid", "true")
    assert {s["key"] for s in sent} == {"RetryTimes", "ModelRatio"}
    stored = options(server)
    assert json.loads(stored["ModelRatio"]) == {"gpt-x": 2.5, "gpt-y": 0}
    assert stored["RetryTimes"] == "2"  # unchanged

    retries.fill("3")
    sent.clear()
    quota.get_by_role("button", name="Save Quota and pricing").click()
    expect(page.locator(".notice")).to_have_text("Quota and pricing: 1 option saved.")
    assert sent == [{"key": "RetryTimes", "value": "3"}]  # the saved ModelRatio is not sent again
    assert options(server)["RetryTimes"] == "3"


def test_secrets_saved_in_the_page_take_effect_and_are_never_shown_back(page: Page, server: Server) -> None:
    secret, hook = "sk_test_page_secret_123", "whsec_page_hook_456"
    open_settings(page, server, "Payments")
    payments = page.get_by_role("form", name="Payments")
    api_secret = payments.get_by_label("Stripe API secret")
    expect(api_secret).to_have_value("")
    expect(api_secret).to_have_accessible_description(re.compile("unchanged"))
    api_secret.fill(secret)
    payments.get_by_label("Stripe webhook secret").fill(hook)
    payments.get_by_label("Stripe price id").fill("price_123")
    payments.get_by_role("button", name="Save Payments").click()
    expect(page.locator(".notice")).to_have_text("Payments: 3 options saved.")
    expect(api_secret).to_have_value("")  # cleared once saved
    name, _ = server.add_user()
    with user_client(server, name) as user:  # all three are set: online top-up is on
        assert data(user.get("/api/user/topup/info"))["enable_stripe_topup"] is True

    sent = option_puts(page)
    payments.get_by_role("button", name="Save Payments").click()
    expect(page.locator(".notice")).to_have_text("Nothing changed in Payments.")
    assert sent == []  # an empty secret field sends nothing
    page.reload()
    expect(page.get_by_role("heading", level=1, name="Settings")).to_be_visible()
    expect(page.get_by_label("Stripe API secret")).to_have_value("")
    expect(page.get_by_label("Stripe webhook secret")).to_have_value("")
    shown = page.evaluate("[...document.querySelectorAll('input, textarea')].map((e) => e.value).join('\\n')")
    assert secret not in shown and hook not in shown and secret not in page.content()
    assert not {"StripeApiSecret", "StripeWebhookSecret", "SMTPToken"} & set(options(server))


def test_an_admin_has_no_settings_entry_and_is_told_the_page_is_for_root(page: Page, server: Server) -> None:
    name, user_id = server.add_user()
    data(server.admin().post("/api/user/manage", json={"id": user_id, "action": "promote"}))
    sign_in(page, server, name)
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Channels")).to_be_visible()  # an admin's navigation
    expect(nav.get_by_role("link", name="Settings")).to_have_count(0)
    page.goto(f"{server.url}/settings")
    expect(page.get_by_role("heading", level=1, name="Not allowed")).to_be_visible()
    expect(page.get_by_text("This page is for root only")).to_be_visible()
    check_accessibility(page, "settings refused to an admin")


def test_the_settings_page_makes_one_api_call_at_load_and_none_later(page: Page, server: Server) -> None:
    """The number docs/CONSOLE.md gives (the schema and the values, asked at once); ten minutes of the
    page's timers add none."""
    page.clock.install()
    seen: list[str] = []
    page.on("request", lambda r: seen.append(httpx.URL(r.url).path)
            if httpx.URL(r.url).path.startswith("/api/") else None)
    # the dashboard's own calls are done: its operator's section asks last (a load may go quiet before)
    with page.expect_response(lambda r: httpx.URL(r.url).path == "/api/data/top"):
        sign_in(page, server, "root", ROOT_PASSWORD)
    page.wait_for_load_state("networkidle")
    seen.clear()
    page.goto(f"{server.url}/settings")
    expect(page.get_by_role("heading", level=1, name="Settings")).to_be_visible()
    page.wait_for_load_state("networkidle")
    assert seen[:2] == ["/api/status", "/api/user/self"]
    assert sorted(seen[2:]) == ["/api/notice", "/api/option/", "/api/option/schema"]  # notice: once a load
    seen.clear()
    page.clock.run_for("10:00")
    page.wait_for_load_state("networkidle")
    assert seen == []
