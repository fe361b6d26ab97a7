"""`python -m tests.console.screenshots [FOLDER]`: take the console screenshots the docs show —
`sign-in.png`, `dashboard.png`, and root's `channels.png`, `users.png` and `settings.png` (its first
section), in `docs/console/` unless
FOLDER is given — from a real `tollway serve` (embedded, in a temporary folder) where a user made a few
real model calls through the gateway to the fake upstreams, so the dashboard's chart has something to draw
(and the channel was tested once, so its list shows the answer's time). Needs Debian's chromium, like the
tests."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from google import genai
from google.genai import types as genai_types
from playwright.sync_api import sync_playwright

from tests.console.browser import PASSWORD, launch, on_thread, sign_in, tollway, user_client
from tests.fakes.gemini import FakeGemini
from tests.test_e2e_serve import ROOT_PASSWORD

ROOT = Path(__file__).resolve().parents[2]
SPEECH = ("gemini-2.5-flash-preview-tts", "gemini-2.5-pro-preview-tts")
CALLS = {"gemini-2.5-flash-preview-tts": 5, "gemini-2.5-pro-preview-tts": 2}


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else ROOT / "docs" / "console"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, tollway(Path(tmp), set_up=True) as server, \
            on_thread(FakeGemini()) as gemini:
        channel = {"name": "gemini", "type": 24, "key": "g-key", "base_url": gemini.url,
                   "models": ",".join(SPEECH), "group": "default"}
        made = server.admin().post("/api/channel/", json={"mode": "single", "channel": channel})
        assert made.status_code == 200, made.text
        name, _ = server.add_user(quota=50_000_000, name="alice")
        with user_client(server, name) as user:
            created = user.post("/api/token/", json={"name": "speech app", "unlimited_quota": True})
            key = created.json()["data"]["key"]
            user.post("/api/token/", json={"name": "staging", "remain_quota": 2_500_000})
            client = genai.Client(api_key=key, http_options=genai_types.HttpOptions(base_url=server.url,
                                                                                   api_version="v1beta"))
            for model, count in CALLS.items():
                for _ in range(count):
                    client.models.generate_content(
                        model=model, contents="Say hello",
                        config=genai_types.GenerateContentConfig(response_modalities=["AUDIO"]))
            for _ in range(100):  # the quota sync writes the usage buckets within about a second
                buckets = user.get("/api/data/self").json()["data"]
                if sum(b["count"] for b in buckets) >= sum(CALLS.values()):
                    break
                time.sleep(0.1)
        with sync_playwright() as playwright:
            browser = launch(playwright)
            page = browser.new_page(viewport={"width": 1280, "height": 720}, locale="en-US",
                                    color_scheme="light")
            page.goto(f"{server.url}/login")
            page.get_by_role("heading", level=1, name="Sign in").wait_for()
            page.screenshot(path=str(out / "sign-in.png"))
            sign_in(page, server, name, PASSWORD)
            page.get_by_role("img").first.wait_for()
            page.screenshot(path=str(out / "dashboard.png"), full_page=True)
            page.get_by_role("button", name="Sign out").click()
            page.get_by_role("heading", level=1, name="Sign in").wait_for()
            channel_id = made.json()["data"][0]
            assert server.admin().get(f"/api/channel/test/{channel_id}").status_code == 200
            sign_in(page, server, "root", ROOT_PASSWORD)
            for path, title in (("/channels", "Channels"), ("/users", "Users")):
                page.goto(f"{server.url}{path}")
                page.locator("tbody tr").first.wait_for()
                page.get_by_role("heading", level=1, name=title).wait_for()
                page.screenshot(path=str(out / f"{path[1:]}.png"), full_page=True)
            page.goto(f"{server.url}/settings")
            page.get_by_role("button", name="Save Site").wait_for()
            page.screenshot(path=str(out / "settings.png"))
            browser.close()
    print(f"wrote sign-in.png, dashboard.png, channels.png, users.png and settings.png in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
