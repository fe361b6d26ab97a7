"""The console on the production stack: `tollway serve --workers 2` on MariaDB + Redis (sessions and
quota shared by two worker processes, each request landing on either). A user signs in in Chromium,
creates an API key in the page, and calls the gateway with it through the official SDKs — google-genai
(speech from a Gemini channel at the fake Gemini) and openai (moderation from an OpenAI channel at the
fake OpenAI); the two calls, their key and their cost are then read back through the API."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from playwright.sync_api import Page, expect

from tests.console.browser import (
    Server,
    check_accessibility,
    on_thread,
    set_option,
    sign_in,
    tollway_on_mariadb_redis,
    user_client,
)
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI
from tests.test_gateway_sdk import SPEECH, TTS, google

pytestmark = pytest.mark.slow

MODERATION = "omni-moderation-latest"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with tollway_on_mariadb_redis(tmp_path_factory.mktemp("console-workers"), workers=2) as running:
        yield running


@pytest.fixture(scope="module")
def upstreams(server: Server) -> Iterator[tuple[FakeGemini, FakeOpenAI]]:
    """A Gemini channel serving the speech model and an OpenAI channel serving moderation (priced, so each
    call costs quota), both in the default group."""
    with on_thread(FakeGemini()) as gemini, on_thread(FakeOpenAI()) as oai:
        channels = ({"name": "gemini", "type": 24, "key": "g-key", "base_url": gemini.url, "models": TTS},
                    {"name": "openai", "type": 1, "key": "o-key", "base_url": oai.url, "models": MODERATION})
        for channel in channels:
            made = server.admin().post("/api/channel/", json={"mode": "single",
                                                               "channel": {**channel, "group": "default"}})
            assert made.status_code == 200, made.text
        set_option(server, "ModelPrice", json.dumps({MODERATION: 0.01}))
        yield gemini, oai  # type: ignore[misc]


def test_a_key_made_in_the_console_calls_gemini_and_openai_through_their_sdks_on_two_workers(
        page: Page, server: Server, upstreams: tuple[FakeGemini, FakeOpenAI]) -> None:
    gemini, oai = upstreams
    name, _ = server.add_user(quota=10_000_000)
    sign_in(page, server, name)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="API keys").click()
    expect(page.get_by_role("heading", level=1, name="API keys")).to_be_visible()
    page.get_by_role("button", name="Create API key").click()
    form = page.get_by_role("dialog", name="Create an API key")
    form.get_by_label("Name").fill("two-sdks")
    form.get_by_label("Unlimited quota").check()
    form.get_by_role("button", name="Create key").click()
    secret = form.get_by_label("Your new API key")
    expect(secret).to_have_value(re.compile(r"^sk-[A-Za-z0-9]{48}$"))
    key = secret.input_value()
    form.get_by_role("button", name="Done").click()
    expect(page.locator("tbody tr", has_text="two-sdks")).to_contain_text("Enabled")
    check_accessibility(page, "API keys on MariaDB + Redis")

    speaker = google(server.url, key)  # held: the SDK closes its HTTP client when the object goes
    reply = speaker.models.generate_content(model=TTS, contents="Say hi", config=SPEECH)
    part = reply.candidates[0].content.parts[0]  # type: ignore[index,union-attr]
    assert part.inline_data is not None and part.inline_data.data  # the fake's PCM came back
    assert gemini.received[-1].headers["x-goog-api-key"] == "g-key"
    with openai.OpenAI(api_key=key, base_url=f"{server.url}/v1", max_retries=0) as client:
        assert client.moderations.create(model=MODERATION, input="I will kill the bug").results[0].flagged
    assert oai.received[-1].headers["authorization"] == "Bearer o-key"

    with user_client(server, name) as user:
        logs: list[dict[str, Any]] = []
        for _ in range(100):  # a consumption log is written after the reply, off the request's path
            logs = user.get("/api/log/self", params={"type": 2}).json()["data"]["items"]
            if len(logs) >= 2:
                break
            page.wait_for_timeout(100)
        assert sorted(log["model_name"] for log in logs) == sorted([TTS, MODERATION]), logs
        assert {log["token_name"] for log in logs} == {"two-sdks"}
        assert all(log["quota"] > 0 for log in logs), logs
        spent = sum(log["quota"] for log in logs)
        me: dict[str, Any] = {}
        for _ in range(100):  # the balance is settled in the shared store, then in the database
            me = user.get("/api/user/self").json()["data"]
            if me["used_quota"] == spent:
                break
            page.wait_for_timeout(100)
        assert me["used_quota"] == spent and me["quota"] == 10_000_000 - spent, (me, spent)
        keys = user.get("/api/token/").json()["data"]["items"]
        assert [(k["name"], k["used_quota"]) for k in keys] == [("two-sdks", spent)], keys
