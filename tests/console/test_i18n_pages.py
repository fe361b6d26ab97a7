"""The console in Simplified Chinese, in Chromium against a real `tollway serve` (embedded): a browser whose
language is Chinese gets every page and main dialog in Chinese — no English word left in the visible
text or in an `aria-label`, `title`, `placeholder`, `alt` or `data-label`, but names and data (the
allow-list below: product and protocol names, and this test's own usernames, models, keys and channels;
the server's own words, such as a log's details, are marked `server-text` in the page and skipped);
the language switch in the header changes the page's strings and `<html lang>`, and the choice outlives a
reload; axe-core finds no serious or critical violation on a few pages in Chinese at 1280 and 360 px."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Page, expect

from core.option_registry import SECTIONS
from tests.console.browser import (
    CHINESE,
    Server,
    check_accessibility,
    data,
    row_action,
    row_menu,
    set_option,
    sign_in,
    tollway,
    user_client,
)
from tests.test_e2e_serve import ROOT_PASSWORD

pytestmark = pytest.mark.slow

USER = "xiaoming"
KEY_NAME = "laptop"
CHANNEL = "openai-main"
MODELS = "gpt-4o-mini,omni-moderation-latest"
CODES = "launch"
# names and data a Chinese page shows as they are (product, protocol and format names; test data)
ALLOWED = {
    "Tollway", "OpenAI", "Gemini", "Anthropic", "Claude", "OpenRouter", "Moonshot", "SiliconFlow", "DeepSeek",
    "Stripe", "API", "ID", "IP", "CIDR", "URL", "JSON", "HTML", "Markdown", "SMTP", "SSL", "Webhook", "Token",
    "Logo", "VIP", "English", "Ctrl", "RP", "http",
    "true", "false", "default", "vip", "svip", "auto", "root", "sk",
    "Kore", "Puck", "Charon", "Aoede", "Fenrir", "Leda", "Orus", "Zephyr",  # Gemini's voices
}
DATA_WORDS = set(re.findall(r"[A-Za-z]+", " ".join((USER, KEY_NAME, CHANNEL, CODES, MODELS))))
PAGES = [("/", "数据看板"), ("/keys", "API 密钥"), ("/logs", "日志"), ("/topup", "充值"),
         ("/account", "账户"), ("/playground", "操练场"), ("/models", "模型与价格"), ("/users", "用户"),
         ("/channels", "渠道"),
         ("/redemptions", "兑换码"), ("/orders", "订单"), ("/settings", "设置"), ("/about", "关于")]
DIALOGS = {  # per page: the button (or a row and its action) that opens a main dialog, and the dialog's title
    "/keys": [("创建 API 密钥", "创建 API 密钥"), ((KEY_NAME, "删除"), "删除此 API 密钥？")],
    "/users": [("创建用户", "创建用户"), ((USER, "调整余额"), f"“{USER}”的余额")],
    "/channels": [("创建渠道", "创建渠道"), ((CHANNEL, "编辑"), f"编辑渠道“{CHANNEL}”")],
    "/redemptions": [("创建兑换码", "创建兑换码")],
    "/account": [("设置两步验证", "设置两步验证")],
    "/models": [("编辑价格：gpt-4o-mini", "“gpt-4o-mini”的价格")],
}
# what is not a word of the page's language: addresses, paths, dotted and snake_case names, e-mail addresses
NOT_WORDS = re.compile(r"https?://\S+|\S+@\S*|/[\w/-]+|\b\w+(?:[._]\w+)+\b|new-api|\"[^\"]*\"")
VISIBLE_STRINGS = """() => {
  const out = [];
  const skip = (el) => el.closest("script, style, textarea, code, .mono, .server-text, .secret-value");
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!el || skip(el) || !node.textContent.trim()) continue;
    const shown = el.tagName === "OPTION" ? el.closest("select")?.checkVisibility() : el.checkVisibility();
    if (shown) out.push(node.textContent.trim());
  }
  for (const el of document.querySelectorAll("[aria-label], [title], [placeholder], [alt], [data-label]")) {
    if (skip(el)) continue;
    for (const name of ["aria-label", "title", "placeholder", "alt", "data-label"]) {
      if (el.hasAttribute(name)) out.push(`${name}=${el.getAttribute(name)}`);
    }
  }
  out.push(`title=${document.title}`);
  return out;
}"""


def option_choices() -> set[str]:
    """The values the Settings page offers in its lists: the server's data, shown as they are."""
    return {word for section in SECTIONS for spec in section.specs for choice in spec.bounds.choices or ()
            for word in re.findall(r"[A-Za-z]+", choice)}


def english_left(page: Page, allowed: set[str]) -> list[str]:
    """The strings of the page (text and named attributes) holding a Latin word that is not allowed."""
    left = []
    for text in page.evaluate(VISIBLE_STRINGS):
        words = set(re.findall(r"[A-Za-z]{2,}", NOT_WORDS.sub(" ", text.partition("=")[2] if re.match(
            r"^(aria-label|title|placeholder|alt|data-label)=", text) else text)))
        if words - allowed:
            left.append(f"{text!r}: {sorted(words - allowed)}")
    return left


def assert_chinese(page: Page, what: str, allowed: set[str]) -> None:
    found = english_left(page, allowed)
    assert not found, f"{what}: English left in\n" + "\n".join(found)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server with a user, a channel, an API key, redemption codes and a log, and group descriptions
    an operator wrote in Chinese."""
    with tollway(tmp_path_factory.mktemp("console-i18n"), set_up=True) as running:
        set_option(running, "UserUsableGroups", json.dumps({"default": "默认分组", "vip": "VIP 分组"}))
        running.add_user(quota=500_000, name=USER)
        channel = {"name": CHANNEL, "type": 1, "key": "sk-upstream", "base_url": "https://api.openai.com",
                   "models": MODELS, "group": "default"}
        data(running.admin().post("/api/channel/", json={"mode": "single", "channel": channel}))
        data(running.admin().post("/api/redemption/", json={"name": CODES, "quota": 1000, "count": 1}))
        data(running.admin().post("/api/token/", json={"name": KEY_NAME, "unlimited_quota": True}))
        with user_client(running, USER) as user:
            data(user.post("/api/token/", json={"name": KEY_NAME, "unlimited_quota": True}))
        yield running


def allowed_words(server: Server) -> set[str]:
    names = {user["display_name"] for user in data(server.admin().get("/api/user/"))["items"]}
    return ALLOWED | DATA_WORDS | option_choices() | {w for n in names for w in re.findall(r"[A-Za-z]+", n)}


def open_page(page: Page, server: Server, path: str, title: str) -> None:
    page.goto(f"{server.url}{path}")
    expect(page.get_by_role("heading", level=1, name=title)).to_be_visible()
    expect(page.locator("[aria-busy=true]")).to_have_count(0)  # tables and charts drawn


def dialog_in_chinese(page: Page, open_it: Callable[[], None], title: str, allowed: set[str]) -> None:
    open_it()
    dialog = page.get_by_role("dialog", name=title)
    expect(dialog).to_be_visible()
    expect(dialog.locator(".loading")).to_have_count(0)
    assert_chinese(page, f"dialog {title}", allowed)
    dialog.press("Escape")
    expect(dialog).to_be_hidden()


def test_signed_out_pages_are_in_chinese(zh_page: Page, server: Server) -> None:
    page = zh_page
    allowed = allowed_words(server)
    for path, title in (("/login", "登录"), ("/register", "注册账户"), ("/forgot-password", "忘记密码"),
                        ("/user/reset", "设置新密码"), ("/nope", "页面不存在")):
        open_page(page, server, path, title)
        assert page.evaluate("document.documentElement.lang") == "zh-CN"
        assert_chinese(page, path, allowed)


def test_every_page_and_main_dialog_is_in_chinese_for_root(zh_page: Page, server: Server) -> None:
    page = zh_page
    allowed = allowed_words(server)
    page.goto(f"{server.url}/login")
    page.get_by_label("用户名").fill("root")
    page.get_by_label("密码", exact=True).fill(ROOT_PASSWORD)
    page.get_by_role("button", name="登录", exact=True).click()
    expect(page.get_by_role("heading", level=1, name="数据看板")).to_be_visible()
    for path, title in PAGES:
        open_page(page, server, path, title)
        assert_chinese(page, path, allowed)
        for opener, dialog in DIALOGS.get(path, ()):
            if isinstance(opener, str):
                button = page.get_by_role("button", name=opener, exact=True)
                dialog_in_chinese(page, button.click, dialog, allowed)
                continue
            row, action = opener
            if action != "编辑":  # in the row's "More" menu: the menu too is in Chinese
                menu = row_menu(page, row, CHINESE)
                assert_chinese(page, f"{path}: the menu of {row}", allowed)
                page.keyboard.press("Escape")
                expect(menu).to_be_hidden()
            in_row = functools.partial(row_action, page, row, action, CHINESE)
            dialog_in_chinese(page, in_row, dialog, allowed)
        if path == "/settings":  # one section shown at a time: each in turn
            sections = page.get_by_role("navigation", name="设置分区").get_by_role("link")
            expect(sections).to_have_count(len(SECTIONS))
            for index in range(len(SECTIONS)):
                sections.nth(index).click()
                expect(sections.nth(index)).to_have_attribute("aria-current", "page")
                assert_chinese(page, f"{path} section {index + 1}", allowed)
    open_page(page, server, "/logs", "日志")  # a log opened (its time in the button's and dialog's names)
    opener = page.locator("tbody tr").first.get_by_role("button", name="查看")
    title = str(opener.get_attribute("aria-label")).removeprefix("查看 ")
    dialog_in_chinese(page, opener.click, title, allowed)


def test_the_language_switch_changes_the_page_and_is_remembered(page: Page, server: Server) -> None:
    sign_in(page, server, "root", ROOT_PASSWORD)  # an English browser: English by default
    assert page.evaluate("document.documentElement.lang") == "en"
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Channels").click()
    expect(page.get_by_role("heading", level=1, name="Channels")).to_be_visible()
    page.get_by_label("Language").select_option("zh-CN")
    expect(page.get_by_role("heading", level=1, name="渠道")).to_be_visible()
    expect(page.get_by_role("button", name="创建渠道")).to_be_visible()
    expect(page.get_by_role("navigation", name="主导航").get_by_role("link", name="数据看板")).to_be_visible()
    expect(page.get_by_role("button", name="退出登录")).to_be_visible()
    expect(page.get_by_role("columnheader", name="名称")).to_be_visible()
    assert page.evaluate("document.documentElement.lang") == "zh-CN"
    assert page.title().startswith("渠道 · ")
    page.reload()
    expect(page.get_by_role("heading", level=1, name="渠道")).to_be_visible()  # remembered
    expect(page.get_by_label("语言")).to_have_value("zh-CN")
    page.get_by_label("语言").select_option("en")
    expect(page.get_by_role("heading", level=1, name="Channels")).to_be_visible()
    assert page.evaluate("document.documentElement.lang") == "en"


@pytest.mark.parametrize(("path", "title"), [("/", "数据看板"), ("/channels", "渠道"), ("/account", "账户")])
def test_pages_in_chinese_pass_axe(zh_page: Page, server: Server, path: str, title: str) -> None:
    page = zh_page
    page.goto(f"{server.url}/login")
    page.get_by_label("用户名").fill("root")
    page.get_by_label("密码", exact=True).fill(ROOT_PASSWORD)
    page.get_by_role("button", name="登录", exact=True).click()
    expect(page.get_by_role("heading", level=1, name="数据看板")).to_be_visible()
    open_page(page, server, path, title)
    check_accessibility(page, f"{path} in Chinese")
