"""`python -m tests.console.screenshots_prices [FOLDER]`: take the screenshots of the console's second step
that the docs show, in English and in Simplified Chinese (`-zh` in the name) — root's `models` (Models and
prices, one model unpriced), `log-detail` (a chat call's log opened, with its billing breakdown) and a
user's `playground-chat` (a reply streamed from the fake OpenAI, with its charge) — in `docs/console/`
unless FOLDER is given, from a real `tollway serve` (embedded, in a temporary folder). Needs Debian's
chromium, like the tests."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import openai
from playwright.sync_api import Page, sync_playwright

from tests.console.browser import PASSWORD, data, launch, on_thread, set_option, tollway, user_client
from tests.fakes.openai import FakeOpenAI
from tests.test_e2e_serve import ROOT_PASSWORD

ROOT = Path(__file__).resolve().parents[2]
MODELS = ("gpt-4o-mini", "gpt-4.1", "o4-mini", "text-embedding-3-small", "gpt-image-1")
PRICES = {"gpt-4o-mini": {"model_ratio": 0.075, "completion_ratio": 4, "cache_ratio": 0.5},
          "gpt-4.1": {"model_ratio": 1, "completion_ratio": 4, "cache_ratio": 0.25},
          "o4-mini": {"model_ratio": 0.55, "completion_ratio": 4, "cache_ratio": 0.25},
          "text-embedding-3-small": {"model_ratio": 0.01}}


def sign_in(page: Page, url: str, name: str, password: str) -> None:
    page.goto(f"{url}/login")
    page.locator("input[name=username]").fill(name)
    page.locator("input[name=password]").fill(password)
    page.locator("form button[type=submit]").click()
    page.locator("h1", has_text="Dashboard").or_(page.locator("h1", has_text="数据看板")).wait_for()


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else ROOT / "docs" / "console"
    out.mkdir(parents=True, exist_ok=True)
    upstream = FakeOpenAI(chunk_delay=0)
    with tempfile.TemporaryDirectory() as tmp, tollway(Path(tmp), set_up=True) as server, on_thread(upstream):
        set_option(server, "GroupRatio", json.dumps({"default": 1, "vip": 2}))
        for name, models in (("openai-main", ",".join(MODELS)), ("openai-backup", "gpt-4o-mini,gpt-4.1"),
                             ("openai-eu", "gpt-4o-mini"), ("azure-east", "gpt-4o-mini"),
                             ("azure-west", "gpt-4o-mini")):
            channel = {"name": name, "type": 1, "key": "o-key", "base_url": upstream.url, "models": models,
                       "group": "default,vip"}
            data(server.admin().post("/api/channel/", json={"mode": "single", "channel": channel}))
        for model, price in PRICES.items():
            data(server.admin().put("/api/pricing/models", json={"model": model, **price}))
        name, _ = server.add_user(quota=50_000_000, name="alice")
        with user_client(server, name) as user:
            key = data(user.post("/api/token/", json={"name": "chat app", "unlimited_quota": True}))["key"]
        upstream.text.cached = 4
        with openai.OpenAI(api_key=key, base_url=f"{server.url}/v1", max_retries=0) as client:
            client.chat.completions.create(model="gpt-4o-mini", messages=[
                {"role": "user", "content": "Write a haiku about toll roads, please"}])
        upstream.text.cached = 0
        upstream.text.reply = "Cars pass one by one; the gate lifts, the fee is paid, the road hums."
        for _ in range(100):  # the quota sync writes the log within about a second
            if data(server.admin().get("/api/log/", params={"type": 2}))["total"]:
                break
            time.sleep(0.1)
        with sync_playwright() as playwright:
            browser = launch(playwright)
            for language, suffix in (("en-US", ""), ("zh-CN", "-zh")):
                context = browser.new_context(viewport={"width": 1280, "height": 800}, locale=language,
                                              color_scheme="light")
                page = context.new_page()
                sign_in(page, server.url, "root", ROOT_PASSWORD)
                page.goto(f"{server.url}/models")
                page.locator("tbody tr").first.wait_for()
                page.screenshot(path=str(out / f"models{suffix}.png"), full_page=True)
                page.set_viewport_size({"width": 1280, "height": 1500})  # the whole dialog, unscrolled
                page.goto(f"{server.url}/logs")
                page.locator("tbody tr button").first.click()
                page.locator("dialog code.formula").wait_for()
                page.locator("dialog").screenshot(path=str(out / f"log-detail{suffix}.png"))
                context.close()
                context = browser.new_context(viewport={"width": 1280, "height": 1000}, locale=language,
                                              color_scheme="light")
                page = context.new_page()
                sign_in(page, server.url, name, PASSWORD)
                page.goto(f"{server.url}/playground")
                chat = page.locator("section.chat")
                chat.locator("select[name=model]").select_option("gpt-4o-mini")
                english = suffix == ""
                chat.locator("textarea[name=system]").fill("You are a poet." if english else "你是一位诗人。")
                chat.locator("textarea[name=message]").fill("A line about toll roads" if english
                                                            else "写一句关于收费公路的诗")
                chat.locator("button[type=submit]").click()
                chat.locator(".turn-meta[data-request-id]").wait_for()
                chat.screenshot(path=str(out / f"playground-chat{suffix}.png"))
                context.close()
            browser.close()
    print(f"wrote models, log-detail and playground-chat (English, and -zh in Chinese) in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
