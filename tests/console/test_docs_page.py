"""The API documentation page (`/api/docs`) in Chromium against a real `tollway serve` (embedded): under its
strict Content-Security-Policy its inline script still runs (it reads `/api/openapi.json` and lists the
routes) and its inline style still applies, with no policy violation (the `page` fixture fails on one);
and no page of another site can frame it (`frame-ancestors 'none'`, `X-Frame-Options: DENY`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.console.browser import Server, tollway

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with tollway(tmp_path_factory.mktemp("console-docs"), set_up=False) as running:
        yield running


def test_the_api_docs_work_under_their_policy(page: Page, server: Server) -> None:
    page.goto(f"{server.url}/api/docs")
    expect(page.get_by_role("heading", level=1, name="Tollway API")).to_be_visible()
    login = page.locator("summary", has_text="/api/user/login").first  # drawn by the script from the document
    expect(login).to_be_visible()
    assert login.locator(".m").evaluate("e => getComputedStyle(e).fontWeight") == "700"  # the style applies
    login.click()
    expect(page.locator("details[open]").first).to_contain_text("Reply:")


def test_no_other_page_can_frame_the_api_docs(browser: Browser, server: Server) -> None:
    context = browser.new_context()
    try:
        tab = context.new_page()
        tab.set_content(f'<iframe src="{server.url}/api/docs" title="framed"></iframe>')  # waits for its load
        [framed] = tab.main_frame.child_frames
        assert "Tollway API" not in framed.content(), framed.url
    finally:
        context.close()
