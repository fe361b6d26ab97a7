"""Fixtures of the console's browser tests: one Chromium per test module, a fresh browser context (no
cookies, no storage) per test, and a screenshot of the page of a failed test under `test-artifacts/console/`
(git-ignored), named after the test and listed in its report."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.console.browser import launch

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
TIMEZONE = "Asia/Kolkata"  # +05:30, not the machine's: the console must show times in the browser's zone


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Per module, not per session: Playwright's synchronous API holds an event loop running while it is
    open, and the async tests of other modules in the same process need none to be."""
    with sync_playwright() as playwright:
        chromium = launch(playwright)
        try:
            yield chromium
        finally:
            chromium.close()


@contextmanager
def _page(browser: Browser, locale: str) -> Iterator[Page]:
    """A page in a fresh context (1280 × 800, `locale`, the browser in `TIMEZONE`, clipboard allowed).
    Script errors and Content-Security-Policy violations fail the test at teardown."""
    context = browser.new_context(viewport={"width": 1280, "height": 800}, locale=locale,
                                  timezone_id=TIMEZONE)
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    context.set_default_timeout(20_000)  # a bound on a hang, not a performance check
    tab = context.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    tab.on("console", lambda message: problems.append(f"console: {message.text}")
           if message.type == "error" and "Content Security Policy" in message.text else None)
    try:
        yield tab
    finally:
        context.close()
    assert not problems, "\n".join(problems)


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A page whose browser speaks American English (`_page`)."""
    with _page(browser, "en-US") as tab:
        yield tab


@pytest.fixture
def zh_page(browser: Browser) -> Iterator[Page]:
    """A page whose browser speaks Simplified Chinese (`navigator.languages` zh-CN; `_page`)."""
    with _page(browser, "zh-CN") as tab:
        yield tab


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome: Any = yield
    report = outcome.get_result()
    page = getattr(item, "funcargs", {}).get("page")
    if report.when != "call" or not report.failed or not isinstance(page, Page) or page.is_closed():
        return
    path = ARTIFACTS / (re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid) + ".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        page.screenshot(path=str(path), full_page=True)
    except Exception as exc:  # the page may be gone with the failure: say so instead of hiding the failure
        report.sections.append(("screenshot", f"none: {exc}"))
        return
    report.sections.append(("screenshot", str(path)))
