"""The console's user pages in Chromium against a real `tollway serve` (embedded), with channels pointing
at the fake OpenAI and Gemini upstreams: logs (own logs with filters and totals for a user; every user's,
with the channel and a filter by user, for an admin); top up (a code redeemed in the page raises the
balance once); account (profile, a password refused at its field then changed, 2FA set up with the
server's QR code and a code computed from the key shown, after which a login asks for the second step);
the playground (the fake Gemini's PCM played as WAV from a blob, byte for byte; the fake moderation's
categories); the calls each page makes at load. Each result is checked through the API or the upstream
too; each page passes axe-core at 1280 and 360 px."""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterator

import httpx
import openai
import pyotp
import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from tests.console.browser import (
    PASSWORD,
    Server,
    check_accessibility,
    on_thread,
    set_option,
    sign_in,
    sign_out,
    tollway,
    user_client,
)
from tests.fakes.gemini import SAMPLE_RATE, SAMPLES_PER_TOKEN, FakeGemini, pcm_audio
from tests.fakes.openai import FakeOpenAI
from tests.test_e2e_serve import ROOT_PASSWORD

pytestmark = pytest.mark.slow

MODEL = "omni-moderation-latest"
CHANNEL = "openai-logs"
TTS_MODEL = "gemini-2.5-flash-preview-tts"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with tollway(tmp_path_factory.mktemp("console-user"), set_up=True) as running:
        yield running


@pytest.fixture(scope="module")
def upstream(server: Server) -> Iterator[tuple[FakeOpenAI, int]]:
    """The fake OpenAI upstream, and the id of a channel of the default group serving its moderation
    model."""
    with on_thread(FakeOpenAI()) as fake:
        channel = {"name": CHANNEL, "type": 1, "key": "o-key", "base_url": fake.url, "models": MODEL,
                   "group": "default"}
        created = server.admin().post("/api/channel/", json={"mode": "single", "channel": channel})
        assert created.status_code == 200, created.text
        set_option(server, "ModelPrice", json.dumps({MODEL: 0.01}))  # a call costs quota
        found = server.admin().get("/api/channel/search", params={"keyword": CHANNEL}).json()["data"]
        yield fake, int(found["items"][0]["id"])  # type: ignore[misc]


def new_key(user: httpx.Client, name: str) -> str:
    """A new unlimited API key of the signed-in user, whole (`sk-…`)."""
    made = user.post("/api/token/", json={"name": name, "unlimited_quota": True})
    assert made.status_code == 200, made.text
    items = user.get("/api/token/search", params={"keyword": name}).json()["data"]["items"]
    revealed = user.post(f"/api/token/{items[0]['id']}/key")
    assert revealed.status_code == 200, revealed.text
    return f"sk-{revealed.json()['data']['key']}"


def moderate(server: Server, key: str) -> None:
    with openai.OpenAI(api_key=key, base_url=f"{server.url}/v1", max_retries=0) as client:
        client.moderations.create(model=MODEL, input="I will kill the bug")


def test_logs_show_own_calls_with_filters_and_totals_and_every_call_to_an_admin(
        page: Page, server: Server, upstream: tuple[FakeOpenAI, int]) -> None:
    _, channel_id = upstream
    name, _ = server.add_user(quota=10_000_000)
    other, _ = server.add_user(quota=10_000_000)
    with user_client(server, other) as user:
        moderate(server, new_key(user, "other-key"))
    with user_client(server, name) as user:
        moderate(server, new_key(user, "logs-key"))
        for _ in range(100):  # a consumption log is written after the reply, off the request's path
            own = user.get("/api/log/self", params={"type": 2}).json()["data"]
            if own["total"]:
                break
            page.wait_for_timeout(100)
        stat = user.get("/api/log/self/stat").json()["data"]
    assert own["total"] == 1 and stat["quota"] == own["items"][0]["quota"] > 0
    for _ in range(100):  # the other user's log is in too before the admin looks
        if server.admin().get("/api/log/", params={"type": 2, "username": other}).json()["data"]["total"]:
            break
        page.wait_for_timeout(100)

    sign_in(page, server, name)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Logs").click()
    expect(page.get_by_role("heading", level=1, name="Logs")).to_be_visible()
    table = page.get_by_role("table", name="Your logs")
    consumption = table.locator("tbody tr", has_text="Consumption")
    expect(consumption).to_have_count(1)  # only the user's own call
    expect(consumption).to_contain_text(MODEL)
    expect(consumption).to_contain_text("logs-key")
    expect(table).not_to_contain_text(CHANNEL)  # a user never sees channels
    quota_used = page.locator(".card", has_text="Quota used").locator("dd")
    expect(quota_used).not_to_have_text("$0.00")
    check_accessibility(page, "logs")

    page.get_by_label("API key name").fill("no-such-key")
    page.get_by_role("button", name="Apply filters").click()
    expect(table).to_contain_text("No logs match.")
    expect(quota_used).to_have_text("$0.00")  # the totals follow the filters
    page.get_by_label("API key name").fill("logs-key")
    page.get_by_label("Type").select_option(label="Consumption")
    page.get_by_role("button", name="Apply filters").click()
    expect(table.locator("tbody tr")).to_have_count(1)
    page.get_by_label("From").fill("2100-01-01T00:00")  # in the browser's zone; nothing is that late
    page.get_by_role("button", name="Apply filters").click()
    expect(table).to_contain_text("No logs match.")

    sign_out(page)
    sign_in(page, server, "root", ROOT_PASSWORD)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Logs").click()
    every = page.get_by_role("table", name="Every user's logs")
    expect(every.locator("tbody tr", has_text=name).filter(has_text="Consumption")).to_contain_text(
        f"#{channel_id} {CHANNEL}")
    expect(every).to_contain_text(other)
    page.get_by_label("User", exact=True).fill(name)
    page.get_by_role("button", name="Apply filters").click()
    expect(every).not_to_contain_text(other)
    expect(every.locator("tbody tr", has_text="Consumption")).to_have_count(1)
    check_accessibility(page, "logs of an admin")


def test_a_code_redeemed_in_the_page_raises_the_balance_once(page: Page, server: Server) -> None:
    name, user_id = server.add_user(quota=1_000_000)
    made = server.admin().post("/api/redemption/", json={"name": "gift", "quota": 2_500_000, "count": 1})
    assert made.status_code == 200, made.text
    code = made.json()["data"][0]
    sign_in(page, server, name)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Top up").click()
    expect(page.get_by_role("heading", level=1, name="Top up")).to_be_visible()
    per_unit = server.status()["quota_per_unit"]
    balance = page.locator(".card", has_text="Balance").locator("dd")
    expect(balance).to_have_text(f"${1_000_000 / per_unit:,.2f}")
    expect(page.get_by_text("This site does not take payments online.")).to_be_visible()
    expect(page.get_by_role("table", name="Your top-up orders")).to_contain_text("No orders yet.")
    check_accessibility(page, "top up")
    found = {v["id"] for v in Axe().run(page).response["violations"]}
    assert "landmark-unique" not in found  # (a moderate one): the orders section and its table differ

    page.get_by_label("Redemption code").fill(code)
    page.get_by_role("button", name="Redeem").click()
    expect(page.get_by_role("status").filter(has_text="Code redeemed")).to_contain_text(
        f"${2_500_000 / per_unit:,.2f} added")
    expect(balance).to_have_text(f"${3_500_000 / per_unit:,.2f}")
    page.get_by_label("Redemption code").fill(code)  # the same code again: refused, nothing added
    page.get_by_role("button", name="Redeem").click()
    expect(page.get_by_role("alert")).to_have_text("redemption code already used")
    user = server.admin().get(f"/api/user/{user_id}").json()["data"]
    assert user["quota"] == 3_500_000
    page.get_by_label("Redemption code").fill("")  # empty: refused at the field, in the page
    page.get_by_role("button", name="Redeem").click()
    expect(page.get_by_text("Redemption code: enter the code")).to_be_visible()  # the label, not `key`
    expect(page.get_by_label("Redemption code")).to_have_attribute("aria-invalid", "true")
    check_accessibility(page, "top up with a refusal")


def test_the_user_pages_make_few_api_calls_at_load(page: Page, server: Server) -> None:
    """The numbers of docs/CONSOLE.md's rate-limit table for these pages."""
    calls: list[str] = []
    page.on("request", lambda request: calls.append(httpx.URL(request.url).path)
            if httpx.URL(request.url).path.startswith("/api/") else None)
    name, _ = server.add_user()
    sign_in(page, server, name)
    for path, heading, own in (("/logs", "Logs", ["/api/log/self", "/api/log/self/stat"]),
                               ("/topup", "Top up", ["/api/user/topup/info", "/api/user/topup/self"]),
                               ("/account", "Account", ["/api/user/2fa/status", "/api/user/passkey"]),
                               ("/playground", "Playground", ["/api/user/models", "/api/user/models",
                                                              "/api/pricing", "/api/token/"]),
                               ("/models", "Models and prices", ["/api/pricing"])):
        calls.clear()
        page.goto(f"{server.url}{path}")
        expect(page.get_by_role("heading", level=1, name=heading)).to_be_visible()
        page.wait_for_load_state("networkidle")
        assert calls[:2] == ["/api/status", "/api/user/self"], (path, calls)
        assert sorted(calls[2:]) == sorted([*own, "/api/notice"]), (path, calls)  # the notice: once per load


def test_account_profile_password_and_two_factor_set_up_with_the_qr_code(page: Page, server: Server) -> None:
    name, user_id = server.add_user()
    sign_in(page, server, name)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Account").click()
    expect(page.get_by_role("heading", level=1, name="Account")).to_be_visible()
    check_accessibility(page, "account")

    page.get_by_label("Display name").fill("Ada L.")
    page.get_by_role("button", name="Save profile").click()
    expect(page.get_by_role("status").filter(has_text="Display name saved.")).to_be_visible()
    assert server.admin().get(f"/api/user/{user_id}").json()["data"]["display_name"] == "Ada L."

    page.get_by_label("Current password").fill("not-the-password")
    page.get_by_label("New password", exact=True).fill("another-password-1")
    page.get_by_label("Confirm the new password").fill("another-password-1")
    page.get_by_role("button", name="Change password").click()
    refused = page.get_by_label("Current password")
    expect(refused).to_have_attribute("aria-invalid", "true")  # the server's refusal names the field
    expect(refused).to_have_accessible_description(re.compile(r"^Current password: \S"))  # its label
    expect(refused).to_be_focused()
    page.get_by_label("Current password").fill(PASSWORD)
    page.get_by_role("button", name="Change password").click()
    expect(page.get_by_role("status").filter(has_text="Password changed.")).to_be_visible()
    changed = {"username": name, "password": "another-password-1"}
    assert httpx.post(f"{server.url}/api/user/login", json=changed).json()["success"] is True

    page.get_by_role("button", name="Set up two-factor authentication").click()
    dialog = page.get_by_role("dialog", name="Set up two-factor authentication")
    qr = dialog.get_by_role("img", name=re.compile("^QR code"))
    expect(qr).to_be_visible()
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=qr.element_handle())  # drawn
    secret = dialog.get_by_label("Key for typing by hand").input_value()
    expect(dialog.get_by_role("list", name="Backup codes").get_by_role("listitem")).to_have_count(10)
    check_accessibility(page, "2FA set-up dialog")
    dialog.get_by_label("Code from the app").fill("000000")
    dialog.get_by_role("button", name="Turn on").click()
    expect(dialog.get_by_label("Code from the app")).to_have_attribute("aria-invalid", "true")
    dialog.get_by_label("Code from the app").fill(pyotp.TOTP(secret).now())
    dialog.get_by_role("button", name="Turn on").click()
    expect(page.get_by_text("Two-factor authentication is on.")).to_be_visible()
    expect(page.get_by_text("10 backup codes left.")).to_be_visible()
    check_accessibility(page, "account with 2FA on")

    login = httpx.post(f"{server.url}/api/user/login", json=changed)
    assert login.json()["data"] == {"require_2fa": True}  # the login now asks for the second step


@pytest.fixture(scope="module")
def gemini(server: Server) -> Iterator[FakeGemini]:
    """The fake Gemini upstream behind a channel of the default group (a speaking and a text model)."""
    with on_thread(FakeGemini(audio_tokens=50)) as fake:
        channel = {"name": "gemini", "type": 24, "key": "g-key", "base_url": fake.url,
                   "models": f"{TTS_MODEL},gemini-2.5-flash", "group": "default"}
        created = server.admin().post("/api/channel/", json={"mode": "single", "channel": channel})
        assert created.status_code == 200, created.text
        yield fake  # type: ignore[misc]


def blob_bytes(page: Page, url: str) -> bytes:
    """The bytes behind a `blob:` address of the page's origin. The console's policy (`connect-src 'self'`)
    keeps its own pages from fetching it, so another tab of the same browser context reads it from an
    address of the same origin that carries no policy (the JSON of `/api/status`)."""
    reader = page.context.new_page()
    try:
        reader.goto(url.removeprefix("blob:").rsplit("/", 1)[0] + "/api/status")
        data: list[int] = reader.evaluate(
            "async (url) => Array.from(new Uint8Array(await (await fetch(url)).arrayBuffer()))", url)
    finally:
        reader.close()
    return bytes(data)


def test_the_playground_plays_the_upstreams_pcm_and_shows_moderation(
        page: Page, server: Server, upstream: tuple[FakeOpenAI, int], gemini: FakeGemini) -> None:
    name, _ = server.add_user(quota=100_000_000)
    with user_client(server, name) as user:
        new_key(user, "play-key")
    sign_in(page, server, name)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Playground").click()
    expect(page.get_by_role("heading", level=1, name="Playground")).to_be_visible()
    speech = page.get_by_role("form", name="Speech")
    expect(speech.get_by_label("Model")).to_have_value(TTS_MODEL)  # only the model that speaks is offered
    expect(speech.get_by_label("Model").locator("option")).to_have_count(1)
    check_accessibility(page, "playground")

    speech.get_by_label("Voice").select_option("Puck")
    speech.get_by_label("Text to say").fill("Hello there")
    speech.get_by_role("button", name="Speak").click()
    audio = page.locator("audio")
    expect(audio).to_have_attribute("src", re.compile(r"^blob:"))
    sent = gemini.received[-1]
    assert sent.headers["x-goog-api-key"] == "g-key"  # the gateway called the upstream with its channel key
    voice = sent.json["generationConfig"]["speechConfig"]["voiceConfig"]["prebuiltVoiceConfig"]["voiceName"]
    assert voice == "Puck"
    wav = blob_bytes(page, str(audio.get_attribute("src")))
    pcm = pcm_audio(50 * SAMPLES_PER_TOKEN)
    assert wav[:4] == b"RIFF" and wav[8:16] == b"WAVEfmt " and wav[36:40] == b"data"
    assert struct.unpack("<HHIIHH", wav[20:36]) == (1, 1, SAMPLE_RATE, SAMPLE_RATE * 2, 2, 16)
    assert struct.unpack("<I", wav[40:44])[0] == len(pcm) and wav[44:] == pcm
    page.wait_for_function("a => a.readyState >= 1 && a.duration > 0", arg=audio.element_handle())  # it plays
    check_accessibility(page, "playground with audio")

    moderation = page.get_by_role("form", name="Moderation")
    moderation.get_by_label("Text to check").fill("I will kill the bug")
    moderation.get_by_role("button", name="Check").click()
    expect(page.get_by_text("Flagged.", exact=True)).to_be_visible()
    result = page.get_by_role("table", name="Categories")
    expect(result.locator("tbody tr", has_text="violence").first).to_contain_text("Yes")
    expect(result.locator("tbody tr")).to_have_count(13)  # the fake's 13 categories of omni-moderation
    check_accessibility(page, "playground with a moderation result")
