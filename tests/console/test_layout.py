"""The console's operator layout in Chromium against a real `tollway serve` (embedded): the sidebar's groups
and entries for a user, an admin and root, each entry on one line at 1280 px; at 360 px the sidebar is
folded behind "Menu", opens, is used and closes after navigating (or with Escape); the signed-out pages
have no sidebar; the light / dark / system switch (a forced theme beats the system's, is remembered
across a reload, and "System" follows the browser's `prefers-color-scheme`), with axe-core clean in the
forced dark theme; Settings shows one section at a time, named in the address, keeps the edits of a
section left, and its save bar stays in view and saves; the shell's banner and footer slots; the new
strings in Chinese."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.console.browser import Server, check_accessibility, data, sign_in, tollway
from tests.test_e2e_serve import ROOT_PASSWORD

pytestmark = pytest.mark.slow

LIGHT_BG, DARK_BG = "rgb(245, 246, 248)", "rgb(18, 20, 24)"  # console.css --bg, light and dark
USER_GROUPS = {"Use": ["Dashboard", "Playground", "API keys", "Logs", "Account", "Models and prices"],
               "Money": ["Top up"]}
ADMIN_GROUPS = {"Use": ["Dashboard", "Playground", "API keys", "Logs", "Account"],
                "Money": ["Top up", "Orders", "Redemption codes"],
                "Manage": ["Users", "Channels", "Models and prices"]}
ROOT_GROUPS = {**ADMIN_GROUPS, "System": ["Settings"]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with tollway(tmp_path_factory.mktemp("console-layout"), set_up=True) as running:
        yield running


def sidebar_groups(page: Page) -> dict[str, list[str]]:
    """The sidebar's groups as shown: each heading with its entries."""
    groups: dict[str, list[str]] = page.evaluate("""() => Object.fromEntries(
      [...document.querySelectorAll('#site-nav [role="group"]')].map((g) => [
        document.getElementById(g.getAttribute("aria-labelledby")).textContent,
        [...g.querySelectorAll("a")].map((a) => a.textContent)]))""")
    return groups


def body_background(page: Page) -> str:
    background: str = page.evaluate("getComputedStyle(document.body).backgroundColor")
    return background


def test_the_sidebar_groups_each_roles_entries_one_line_each(page: Page, server: Server) -> None:
    name, user_id = server.add_user()
    sign_in(page, server, name)
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("group", name="Use")).to_be_visible()
    # a user's one "manage" page is listed among the pages to use, not as a group of one
    assert sidebar_groups(page) == USER_GROUPS
    expect(nav.get_by_role("link", name="Dashboard")).to_have_attribute("aria-current", "page")

    data(server.admin().post("/api/user/manage", json={"id": user_id, "action": "promote"}))
    page.reload()
    expect(nav.get_by_role("link", name="Channels")).to_be_visible()
    assert sidebar_groups(page) == ADMIN_GROUPS

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", level=1, name="Sign in")).to_be_visible()
    sign_in(page, server, "root", ROOT_PASSWORD)
    assert sidebar_groups(page) == ROOT_GROUPS
    # each entry on one line, nothing cut off, at 1280 px
    sizes = page.evaluate("""() => [...document.querySelectorAll('nav[aria-label="Main"] a')].map((a) => ({
      text: a.textContent, height: a.getBoundingClientRect().height,
      line: parseFloat(getComputedStyle(a).lineHeight), cut: a.scrollWidth > a.clientWidth }))""")
    assert len(sizes) == sum(len(v) for v in ROOT_GROUPS.values())
    for size in sizes:
        assert size["height"] < 1.9 * size["line"] and not size["cut"], size
    nav.get_by_role("link", name="Redemption codes").click()
    expect(page.get_by_role("heading", level=1, name="Redemption codes")).to_be_visible()
    expect(nav.get_by_role("link", name="Redemption codes")).to_have_attribute("aria-current", "page")
    expect(nav.locator("[aria-current]")).to_have_count(1)


def test_on_a_phone_the_sidebar_folds_behind_menu(page: Page, server: Server) -> None:
    sign_in(page, server, "root", ROOT_PASSWORD)
    page.set_viewport_size({"width": 360, "height": 800})
    nav = page.get_by_role("navigation", name="Main")
    menu = page.get_by_role("button", name="Menu")
    expect(nav).to_be_hidden()
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(menu).to_have_attribute("aria-controls", "site-nav")
    menu.click()
    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(nav).to_be_visible()
    check_accessibility(page, "the menu opened")  # (at 1280 px, the sidebar)
    expect(nav).to_be_visible()  # back at 360 px, still open
    nav.get_by_role("link", name="API keys").click()
    expect(page.get_by_role("heading", level=1, name="API keys")).to_be_visible()
    expect(nav).to_be_hidden()  # closed after navigating
    expect(menu).to_have_attribute("aria-expanded", "false")
    menu.click()
    nav.get_by_role("link", name="Logs").focus()
    page.keyboard.press("Escape")
    expect(nav).to_be_hidden()
    expect(menu).to_be_focused()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 360  # the header fits: nothing scrolls sideways


def test_signed_out_pages_have_no_sidebar_but_the_switches(page: Page, server: Server) -> None:
    page.goto(f"{server.url}/login")
    expect(page.get_by_role("heading", level=1, name="Sign in")).to_be_visible()
    expect(page.get_by_role("navigation", name="Main")).to_have_count(0)  # hidden: not in the tree
    expect(page.get_by_role("button", name="Menu")).to_have_count(0)
    expect(page.get_by_label("Language")).to_be_visible()
    expect(page.get_by_label("Theme")).to_be_visible()
    page.set_viewport_size({"width": 360, "height": 800})
    expect(page.get_by_role("button", name="Menu")).to_have_count(0)


def test_the_theme_switch_forces_a_theme_remembers_it_and_system_follows_the_browser(
        page: Page, server: Server) -> None:
    page.emulate_media(color_scheme="light")
    sign_in(page, server, "root", ROOT_PASSWORD)
    theme = page.get_by_label("Theme")
    expect(theme).to_have_value("system")
    assert body_background(page) == LIGHT_BG
    theme.select_option(label="Dark")
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    assert body_background(page) == DARK_BG  # dark although the system is light
    page.reload()
    expect(page.get_by_role("heading", level=1, name="Dashboard")).to_be_visible()
    expect(theme).to_have_value("dark")
    assert body_background(page) == DARK_BG  # remembered
    assert page.evaluate("getComputedStyle(document.documentElement).colorScheme") == "dark"
    check_accessibility(page, "dashboard, dark theme")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Settings").click()
    expect(page.get_by_role("heading", level=1, name="Settings")).to_be_visible()
    check_accessibility(page, "settings, dark theme")

    page.emulate_media(color_scheme="dark")
    theme.select_option(label="Light")
    expect(page.locator("html")).to_have_attribute("data-theme", "light")
    assert body_background(page) == LIGHT_BG  # light although the system is dark

    theme.select_option(label="System")
    expect(page.locator("html")).not_to_have_attribute("data-theme", re.compile(".*"))
    assert body_background(page) == DARK_BG
    page.emulate_media(color_scheme="light")
    assert body_background(page) == LIGHT_BG
    page.reload()
    expect(page.get_by_role("heading", level=1, name="Settings")).to_be_visible()
    expect(theme).to_have_value("system")
    assert page.evaluate("localStorage.getItem('tollway.theme')") is None


def test_settings_shows_one_section_at_a_time_named_in_the_address(page: Page, server: Server) -> None:
    sign_in(page, server, "root", ROOT_PASSWORD)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Settings").click()
    expect(page.get_by_role("heading", level=1, name="Settings")).to_be_visible()
    sections = page.get_by_role("navigation", name="Settings sections")
    expect(page.get_by_role("heading", level=2, name="Site")).to_be_visible()
    expect(page.locator("section.settings-section:visible")).to_have_count(1)
    expect(sections.get_by_role("link", name="Site")).to_have_attribute("aria-current", "page")

    sections.get_by_role("link", name="Payments").click()
    expect(page.get_by_role("heading", level=2, name="Payments")).to_be_visible()
    expect(page.get_by_role("heading", level=2, name="Site")).to_be_hidden()
    expect(page.locator("section.settings-section:visible")).to_have_count(1)
    expect(page).to_have_url(f"{server.url}/settings?section=payments")
    expect(sections.get_by_role("link", name="Payments")).to_have_attribute("aria-current", "page")
    expect(sections.locator("[aria-current]")).to_have_count(1)

    page.goto(f"{server.url}/settings?section=rate-limits")  # a link opens its section
    expect(page.get_by_role("heading", level=2, name="Rate limits")).to_be_visible()
    expect(page.locator("section.settings-section:visible")).to_have_count(1)
    page.reload()
    expect(page.get_by_role("heading", level=2, name="Rate limits")).to_be_visible()
    page.goto(f"{server.url}/settings?section=nothing-such")  # an unknown one: the first
    expect(page.get_by_role("heading", level=2, name="Site")).to_be_visible()


def test_the_save_bar_stays_in_view_counts_the_edits_and_saves(page: Page, server: Server) -> None:
    sign_in(page, server, "root", ROOT_PASSWORD)
    page.goto(f"{server.url}/settings?section=quota")
    quota = page.get_by_role("form", name="Quota and pricing")
    expect(quota).to_be_visible()
    sections = page.get_by_role("navigation", name="Settings sections")
    bar = quota.locator(".save-bar")
    expect(bar).to_have_text(re.compile("No unsaved changes"))
    tall = page.evaluate("document.getElementById('section-quota').closest('section').offsetHeight")
    assert tall > 800, "the section should be taller than the window for this test to mean anything"
    page.evaluate("document.getElementById('section-quota').scrollIntoView({block: 'start'})")
    box = bar.bounding_box()
    assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 800, box  # in view

    retries = quota.get_by_label("Retries on another channel")
    retries.fill("4")
    expect(bar).to_contain_text("1 unsaved change")
    expect(sections.get_by_role("link", name="Quota and pricing")).to_contain_text("1 unsaved")
    sections.get_by_role("link", name="Site").click()  # another section: the edit is kept
    expect(quota).to_be_hidden()
    sections.get_by_role("link", name="Quota and pricing").click()
    expect(retries).to_have_value("4")
    expect(bar).to_contain_text("1 unsaved change")
    quota.get_by_label("Show token statistics").click()
    expect(bar).to_contain_text("2 unsaved changes")
    page.evaluate("document.getElementById('section-quota').scrollIntoView({block: 'start'})")
    bar.get_by_role("button", name="Save Quota and pricing").click()
    expect(page.locator(".notice")).to_have_text("Quota and pricing: 2 options saved.")
    expect(bar).to_contain_text("No unsaved changes")
    expect(sections.get_by_role("link", name="Quota and pricing")).to_have_text("Quota and pricing")
    stored = {o["key"]: o["value"] for o in data(server.admin().get("/api/option/"))}
    assert stored["RetryTimes"] == "4"


def test_the_shell_has_a_banner_and_a_footer_slot(page: Page, server: Server) -> None:
    sign_in(page, server, "root", ROOT_PASSWORD)
    order = page.evaluate("""() => {
      const shell = document.querySelector("tw-shell");
      const empty = shell.querySelector(".site-banner").childNodes.length;  // no notice set
      const banner = document.createElement("p"); banner.id = "b"; banner.textContent = "banner";
      const footer = document.createElement("footer"); footer.id = "f"; footer.textContent = "footer";
      shell.setBanner(banner); shell.setFooter(footer);
      const main = document.getElementById("main");
      const placed = [banner.compareDocumentPosition(main) & Node.DOCUMENT_POSITION_FOLLOWING,
                      footer.compareDocumentPosition(main) & Node.DOCUMENT_POSITION_PRECEDING];
      shell.setBanner(null); shell.setFooter(null);
      const gone = !document.getElementById("b") && !document.getElementById("f");
      return {empty, placed: placed.map(Boolean), gone};
    }""")
    assert order == {"empty": 0, "placed": [True, True], "gone": True}


def test_the_layout_in_chinese(zh_page: Page, server: Server) -> None:
    page = zh_page
    page.goto(f"{server.url}/login")
    page.get_by_label("用户名").fill("root")
    page.get_by_label("密码", exact=True).fill(ROOT_PASSWORD)
    page.get_by_role("button", name="登录", exact=True).click()
    expect(page.get_by_role("heading", level=1, name="数据看板")).to_be_visible()
    assert list(sidebar_groups(page)) == ["使用", "财务", "管理", "系统"]
    theme = page.get_by_label("主题")
    assert theme.locator("option").all_text_contents() == ["跟随系统", "浅色", "深色"]
    page.get_by_role("navigation", name="主导航").get_by_role("link", name="设置").click()
    expect(page.get_by_role("navigation", name="设置分区")).to_be_visible()
    expect(page.locator("form:visible .save-bar")).to_contain_text("没有未保存的更改")
    page.get_by_label("站点名称").fill("我的网关")
    expect(page.locator("form:visible .save-bar")).to_contain_text("1 项更改未保存")
    site = page.get_by_role("navigation", name="设置分区").get_by_role("link", name="站点")
    expect(site).to_contain_text("1 项未保存")
