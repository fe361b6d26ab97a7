"""`python -m tests.console.screenshots_operator [FOLDER]`: take the screenshots of the operator's layout that
the docs show, in English and in Simplified Chinese (`-zh` in the name) — root's `operator-dashboard` (the
sidebar, the site's notice and the operator's section after real calls, one channel failing), `channels-menu`
(a row's More menu open), `settings-section` (one section with its save bar) and `account-cards`, plus
`operator-dashboard-dark` (the dark theme) — in `docs/console/` unless FOLDER is given, from a real
`tollway serve` (embedded, in a temporary folder). Needs Debian's chromium, and a CJK font (Debian's
`fonts-noto-cjk`) for the Chinese pictures."""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

import openai
from playwright.sync_api import Page, sync_playwright

from tests.console.browser import data, launch, on_thread, set_option, tollway, user_client
from tests.fakes.openai import FakeOpenAI
from tests.test_e2e_serve import ROOT_PASSWORD

ROOT = Path(__file__).resolve().parents[2]
NOTICE = {"en-US": "**Maintenance** on Sunday 02:00–03:00 UTC: calls may be retried on the backup channel.",
          "zh-CN": "**维护通知**：周日 02:00–03:00（UTC）期间，调用可能会切换到备用渠道。"}
USERS = {"alice": ("laptop", 6), "bob": ("ci-runner", 3), "carol": ("notebook", 1)}


def sign_in(page: Page, url: str) -> None:
    page.goto(f"{url}/login")
    page.locator("input[name=username]").fill("root")
    page.locator("input[name=password]").fill(ROOT_PASSWORD)
    page.locator("form button[type=submit]").click()
    page.locator("section.operator table").first.wait_for()


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else ROOT / "docs" / "console"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, tollway(Path(tmp), set_up=True) as server, \
            on_thread(FakeOpenAI(valid_keys=["o-key"], chunk_delay=0)) as upstream:
        set_option(server, "ModelPrice", json.dumps({"omni-moderation-latest": 0.002}))
        set_option(server, "Footer", "Example Ltd · support@example.com")
        main_models = "omni-moderation-latest,gpt-4o-mini,gpt-4.1,o4-mini"
        for name, key, models in (("openai-main", "o-key", main_models),
                                  ("openai-backup", "expired-key", "text-moderation-latest")):
            channel = {"name": name, "type": 1, "key": key, "base_url": upstream.url, "models": models,
                       "group": "default,vip", "tag": "openai"}
            data(server.admin().post("/api/channel/", json={"mode": "single", "channel": channel}))
        for user, (key_name, calls) in USERS.items():
            server.add_user(quota=50_000_000, name=user)
            with user_client(server, user) as client:
                made = client.post("/api/token/", json={"name": key_name, "unlimited_quota": True})
                key = data(made)["key"]
            with openai.OpenAI(api_key=key, base_url=f"{server.url}/v1", max_retries=0) as sdk:
                for _ in range(calls):
                    sdk.moderations.create(model="omni-moderation-latest", input="hello")
                if user == "bob":
                    # the backup channel's key is refused upstream: an error on the dashboard
                    with contextlib.suppress(openai.APIStatusError):
                        sdk.moderations.create(model="text-moderation-latest", input="hello")
        for _ in range(100):  # the quota sync writes the logs within about a second
            if data(server.admin().get("/api/log/", params={"type": 2}))["total"] >= 10:
                break
            time.sleep(0.1)
        with sync_playwright() as playwright:
            browser = launch(playwright)
            shots = [("en-US", "", "light"), ("zh-CN", "-zh", "light"), ("en-US", "-dark", "dark")]
            for language, suffix, scheme in shots:
                set_option(server, "Notice", NOTICE[language])
                context = browser.new_context(viewport={"width": 1280, "height": 800}, locale=language,
                                              color_scheme=scheme)  # type: ignore[arg-type]
                page = context.new_page()
                sign_in(page, server.url)
                page.screenshot(path=str(out / f"operator-dashboard{suffix}.png"), full_page=True)
                if suffix == "-dark":
                    context.close()
                    continue
                page.goto(f"{server.url}/channels")
                row = page.locator("tbody tr").first
                row.wait_for()
                row.locator("button[aria-haspopup=menu]").click()
                page.locator("[role=menu]").wait_for()
                page.screenshot(path=str(out / f"channels-menu{suffix}.png"))
                page.goto(f"{server.url}/settings?section=quota")
                page.locator(".save-bar").locator("visible=true").first.wait_for()
                page.screenshot(path=str(out / f"settings-section{suffix}.png"))
                page.goto(f"{server.url}/account")
                page.locator("main section").first.wait_for()
                page.screenshot(path=str(out / f"account-cards{suffix}.png"), full_page=True)
                context.close()
            browser.close()
    print(f"wrote operator-dashboard, channels-menu, settings-section and account-cards (and -zh), "
          f"and operator-dashboard-dark in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
