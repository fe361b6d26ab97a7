"""The Channels page's tools in Chromium against a real `tollway serve` (embedded), each result checked
through the API or a model call of the official openai SDK: three channels made from three key lines; the
status (after a channel is disabled in the page), type, group and tag filters, each showing the ids the
search route answers for the same filters, and a filter matching nothing saying so; every disabled channel
deleted after a confirmation (cancelling deletes nothing), the enabled kept; "Fix abilities" making a
channel whose ability rows were lost route a model call again; a multi-key channel made in the page whose
keys are disabled and enabled one by one in its Keys dialog (a disabled key gets no call); a tag's
channels disabled, enabled and retagged at once, the selected channels tagged or deleted in a batch; a
channel's balance and every balance updated from the fake upstream's balance endpoints; root revealing
a channel's keys after verifying with the authenticator code (a wrong code shows the server's refusal).
Each new dialog passes axe-core at 1280 and 360 px."""

from __future__ import annotations

import re
import secrets
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pyotp
import pytest
from playwright.sync_api import Page, expect

from core.enums import ChannelStatus, ChannelType
from tests.console.browser import (
    Server,
    as_root,
    check_accessibility,
    data,
    on_thread,
    row_action,
    set_option,
    tollway,
    user_client,
)
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai import FakeOpenAI

pytestmark = pytest.mark.slow

MODERATION = "omni-moderation-latest"


@pytest.fixture(scope="module")
def server_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console-channels")


@pytest.fixture(scope="module")
def server(server_dir: Path) -> Iterator[Server]:
    with tollway(server_dir, set_up=True) as running:
        yield running


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAI]:
    with on_thread(FakeOpenAI()) as fake:
        yield fake  # type: ignore[misc]


def add_channel(server: Server, upstream: FakeOpenAI, name: str, *, models: str = "listed-model",
                path: str = "", **fields: Any) -> int:
    """A single-key channel on the fake (OpenAI unless `fields` say otherwise; key `sk-<name>`; `path`
    added to its address), made through the API."""
    body = {"mode": "single", "channel": {"name": name, "type": ChannelType.OPENAI, "key": f"sk-{name}",
                                          "models": models, "group": "default",
                                          "base_url": f"{upstream.url}{path}", **fields}}
    ids = data(server.admin().post("/api/channel/", json=body))
    return int(ids[0])


def channel(server: Server, channel_id: int) -> dict[str, Any]:
    found: dict[str, Any] = data(server.admin().get(f"/api/channel/{channel_id}"))
    return found


def delete_channels(server: Server, *ids: int) -> None:
    for channel_id in ids:
        server.admin().delete(f"/api/channel/{channel_id}")



def shown_ids(page: Page) -> Any:
    """The Id column of the channel table (an `expect` on it waits for the list to be drawn)."""
    return expect(page.locator("tbody td[data-label='Id']"))


def search_ids(server: Server, **params: Any) -> list[str]:
    """The ids `GET /api/channel/search` answers for `params`, as the table shows them."""
    return [str(c["id"]) for c in data(server.admin().get("/api/channel/search", params=params))["items"]]


def test_channels_are_created_one_per_key_line(page: Page, server: Server, upstream: FakeOpenAI) -> None:
    suffix = secrets.token_hex(3)
    keys = [f"sk-batch-{i}-{suffix}" for i in range(3)]
    made: list[int] = []
    try:
        as_root(page, server, "/channels", "Channels")
        page.get_by_role("button", name="Create channel").click()
        form = page.get_by_role("dialog", name="Create a channel")
        form.get_by_label("Name").fill(f"batch-{suffix}")
        form.get_by_label("How the keys are used").select_option(label="One channel per key line")
        form.get_by_label("Key", exact=True).fill("\n".join(keys))
        form.get_by_label("Base URL").fill(upstream.url)
        form.get_by_label("Models").fill("listed-model")
        form.get_by_role("button", name="Create channel").click()
        expect(page.locator(".notice")).to_have_text("3 channels created.")
        found = data(server.admin().get("/api/channel/search", params={"keyword": f"batch-{suffix}"}))
        made = [c["id"] for c in found["items"]]
        assert found["total"] == 3
        assert all(not c["channel_info"]["is_multi_key"] for c in found["items"])
        # each key is a channel of its own: the search by a whole key finds exactly one, a different one each
        by_key = [search_ids(server, keyword=k) for k in keys]
        assert all(len(ids) == 1 for ids in by_key) and len({ids[0] for ids in by_key}) == 3
        assert {int(ids[0]) for ids in by_key} == set(made)
    finally:
        delete_channels(server, *made)


def test_the_status_type_group_and_tag_filters_narrow_the_list_as_the_api_does(
        page: Page, server: Server, upstream: FakeOpenAI) -> None:
    suffix = secrets.token_hex(3)
    names = [f"flt-{suffix}-{i}" for i in range(3)]
    red, blue, vip = f"red-{suffix}", f"blue-{suffix}", f"vip-{suffix}"
    ids = [add_channel(server, upstream, names[0], tag=red),
           add_channel(server, upstream, names[1], tag=red, type=ChannelType.DEEPSEEK,
                       group=f"default,{vip}"),
           add_channel(server, upstream, names[2], tag=blue, group=vip)]
    try:
        as_root(page, server, "/channels", "Channels")
        search = page.get_by_role("search", name="Search by id, name, base URL or whole key")
        search.get_by_role("searchbox").fill(f"flt-{suffix}")
        search.get_by_role("button", name="Search").click()
        mine = {"keyword": f"flt-{suffix}"}
        shown_ids(page).to_have_text(search_ids(server, **mine))
        row_action(page, names[1], "Disable")
        expect(page.locator(".notice")).to_have_text(f"Channel “{names[1]}” disabled.")
        assert channel(server, ids[1])["status"] == ChannelStatus.MANUALLY_DISABLED

        status = page.get_by_label("Status", exact=True)
        status.select_option(label="Disabled")
        shown_ids(page).to_have_text(search_ids(server, **mine, status="disabled"))
        assert search_ids(server, **mine, status="disabled") == [str(ids[1])]
        status.select_option(label="Enabled")
        shown_ids(page).to_have_text(search_ids(server, **mine, status="enabled"))
        assert sorted(search_ids(server, **mine, status="enabled")) == sorted([str(ids[0]), str(ids[2])])
        status.select_option(label="Any status")

        kind = page.get_by_label("Type", exact=True)
        kind.select_option(label="DeepSeek")
        shown_ids(page).to_have_text(search_ids(server, **mine, type=ChannelType.DEEPSEEK))
        assert search_ids(server, **mine, type=ChannelType.DEEPSEEK) == [str(ids[1])]
        kind.select_option(label="Any type")

        group = page.get_by_label("Group", exact=True)
        group.fill(vip)
        group.press("Enter")  # the filter applies on change
        shown_ids(page).to_have_text(search_ids(server, **mine, group=vip))
        assert sorted(search_ids(server, **mine, group=vip)) == sorted([str(ids[1]), str(ids[2])])

        tag = page.get_by_label("Tag", exact=True)
        tag.fill(red)
        tag.press("Enter")  # with the group: red and vip
        shown_ids(page).to_have_text([str(ids[1])])
        assert search_ids(server, **mine, group=vip, tag=red) == [str(ids[1])]
        group.fill("")
        group.press("Enter")
        shown_ids(page).to_have_text(search_ids(server, **mine, tag=red))
        assert sorted(search_ids(server, **mine, tag=red)) == sorted([str(ids[0]), str(ids[1])])
        tag.fill(red.upper())  # a tag is matched whole and case-sensitive
        tag.press("Enter")
        expect(page.get_by_text(f"Nothing matches “flt-{suffix}”.")).to_be_visible()

        search.get_by_role("searchbox").fill("")
        search.get_by_role("button", name="Search").click()  # no keyword: only the filters narrow
        tag.fill(blue)
        tag.press("Enter")
        shown_ids(page).to_have_text([str(ids[2])])
        tag.fill(f"none-{suffix}")
        tag.press("Enter")
        expect(page.get_by_text("No channel matches these filters.")).to_be_visible()
        check_accessibility(page, "channels filtered to nothing")
    finally:
        delete_channels(server, *ids)


def test_every_disabled_channel_is_deleted_after_a_confirmation(page: Page, server: Server,
                                                                upstream: FakeOpenAI) -> None:
    suffix = secrets.token_hex(3)
    ids = [add_channel(server, upstream, f"off-{suffix}-{i}", status=ChannelStatus.MANUALLY_DISABLED)
           for i in range(2)] + [add_channel(server, upstream, f"on-{suffix}")]
    try:
        as_root(page, server, "/channels", "Channels")
        page.get_by_role("button", name="Delete disabled channels").click()
        confirm = page.get_by_role("dialog", name="Delete every disabled channel?")
        expect(confirm).to_contain_text("Every channel disabled by an admin or automatically is deleted.")
        check_accessibility(page, "delete disabled channels confirmation")
        confirm.get_by_role("button", name="Cancel").click()
        expect(confirm).to_be_hidden()
        assert [channel(server, i)["id"] for i in ids] == ids  # asked first: nothing deleted

        page.get_by_role("button", name="Delete disabled channels").click()
        confirm.get_by_role("button", name="Delete disabled channels").click()
        expect(page.locator(".notice")).to_have_text("2 disabled channels deleted.")
        assert [server.admin().get(f"/api/channel/{i}").status_code for i in ids] == [404, 404, 200]
        expect(page.locator("tbody tr", has_text=f"off-{suffix}")).to_have_count(0)  # the list read again
        expect(page.locator("tbody tr", has_text=f"on-{suffix}")).to_have_count(1)
    finally:
        delete_channels(server, *ids)


def test_fix_abilities_makes_a_channel_whose_abilities_were_lost_route_again(
        page: Page, server: Server, server_dir: Path, upstream: FakeOpenAI) -> None:
    suffix = secrets.token_hex(3)
    name, _ = server.add_user(quota=10_000_000)
    with user_client(server, name) as user:
        key = data(user.post("/api/token/", json={"name": "sdk", "unlimited_quota": True}))["key"]
    served = add_channel(server, upstream, f"fix-{suffix}", models=MODERATION)
    other = add_channel(server, upstream, f"bystander-{suffix}")

    def moderate() -> bool:
        with openai.OpenAI(api_key=key, base_url=f"{server.url}/v1", max_retries=0) as client:
            return client.moderations.create(model=MODERATION, input="hello").results[0].flagged

    try:
        assert moderate() is False
        # the abilities table loses the channel's rows behind the server's back (a restored backup, a
        # hand-edited database); any change makes the workers read routing again
        with sqlite3.connect(server_dir / "data" / "tollway.db") as db:
            assert db.execute("DELETE FROM abilities WHERE channel_id = ?", (served,)).rowcount > 0
        data(server.admin().put("/api/channel/", json={"id": other, "remark": "touched"}))
        with pytest.raises(openai.APIStatusError):
            moderate()

        as_root(page, server, "/channels", "Channels")
        page.get_by_role("button", name="Fix abilities").click()
        count = data(server.admin().get("/api/channel/"))["total"]
        expect(page.locator(".notice")).to_have_text(f"Abilities rebuilt: {count} channels, 0 failed.")
        assert moderate() is False  # routed again
    finally:
        delete_channels(server, served, other)

def test_a_multi_key_channels_keys_are_disabled_and_enabled_one_by_one(page: Page, server: Server,
                                                                      upstream: FakeOpenAI) -> None:
    name, _ = server.add_user(quota=10_000_000)
    with user_client(server, name) as user:
        key = data(user.post("/api/token/", json={"name": "sdk", "unlimited_quota": True}))["key"]
    keys = [f"sk-multi-{i}-{secrets.token_hex(8)}" for i in range(3)]
    as_root(page, server, "/channels", "Channels")
    page.get_by_role("button", name="Create channel").click()
    form = page.get_by_role("dialog", name="Create a channel")
    form.get_by_label("Name").fill("three keys")
    form.get_by_label("How the keys are used").select_option("multi_to_single")
    form.get_by_label("Key order of a multi-key channel").select_option(label="In turn")
    form.get_by_label("Key", exact=True).fill("\n".join(keys))
    form.get_by_label("Base URL").fill(upstream.url)
    form.get_by_label("Models").fill(MODERATION)
    form.get_by_role("button", name="Create channel").click()
    expect(page.locator(".notice")).to_have_text("1 channel created.")
    made = data(server.admin().get("/api/channel/search", params={"keyword": "three keys"}))
    channel_id = made["items"][0]["id"]

    def used_keys(calls: int) -> set[str]:
        before = len(upstream.requests_to("/v1/moderations"))
        with openai.OpenAI(api_key=key, base_url=f"{server.url}/v1", max_retries=0) as client:
            for _ in range(calls):
                client.moderations.create(model=MODERATION, input="hello")
        return {r.headers["authorization"].removeprefix("Bearer ")
                for r in upstream.requests_to("/v1/moderations")[before:]}

    def key_statuses() -> list[int]:
        listed = data(server.admin().post("/api/channel/multi_key/manage", json={
            "channel_id": channel_id, "action": "get_key_status"}))
        return [k["status"] for k in sorted(listed["keys"], key=lambda k: k["index"])]

    try:
        assert used_keys(3) == set(keys)  # in turn: every key once
        row_action(page, "three keys", "Keys")
        dialog = page.get_by_role("dialog", name="Keys of channel “three keys”")
        expect(dialog).to_contain_text("3 of 3 keys enabled.")
        check_accessibility(page, "multi-key keys dialog")
        dialog.get_by_role("button", name="Disable key 2").click()
        expect(dialog).to_contain_text("2 of 3 keys enabled.")
        expect(dialog.get_by_role("button", name="Enable key 2")).to_be_visible()
        enabled, disabled = ChannelStatus.ENABLED, ChannelStatus.MANUALLY_DISABLED
        assert key_statuses() == [enabled, disabled, enabled]
        assert used_keys(4) == {keys[0], keys[2]}  # the disabled key gets no call

        dialog.get_by_role("button", name="Enable key 2").click()
        expect(dialog).to_contain_text("3 of 3 keys enabled.")
        assert key_statuses() == [ChannelStatus.ENABLED] * 3
        assert used_keys(3) == set(keys)
        dialog.get_by_role("button", name="Close").click()
        expect(dialog).to_be_hidden()
    finally:
        delete_channels(server, channel_id)


def test_a_tags_channels_change_at_once_and_the_selected_are_tagged_or_deleted(page: Page, server: Server,
                                                                              upstream: FakeOpenAI) -> None:
    suffix = secrets.token_hex(3)
    names = [f"tagged-{suffix}-{i}" for i in range(3)]
    ids = [add_channel(server, upstream, n) for n in names]
    try:
        as_root(page, server, "/channels", "Channels")
        search = page.get_by_role("search", name="Search by id, name, base URL or whole key")
        search.get_by_role("searchbox").fill(f"tagged-{suffix}")
        search.get_by_role("button", name="Search").click()
        expect(page.locator("tbody tr")).to_have_count(3)
        for n in names[:2]:
            page.get_by_label(f"Select {n}").check()
        page.get_by_role("button", name="Tag the selected").click()
        batch = page.get_by_role("dialog", name="Tag the selected channels")
        expect(batch).to_contain_text("For 2 selected")
        check_accessibility(page, "batch tag dialog")
        batch.get_by_label("Tag", exact=True).fill(f"team-{suffix}")
        batch.get_by_role("button", name="Set tag").click()
        expect(page.locator(".notice")).to_have_text("2 channels tagged.")
        assert [channel(server, i)["tag"] for i in ids] == [f"team-{suffix}", f"team-{suffix}", ""]

        row = page.locator("tbody tr", has_text=names[0])
        row_action(page, names[0], "Tag")
        tag = page.get_by_role("dialog", name=f"Channels tagged “team-{suffix}”")
        check_accessibility(page, "tag dialog")
        tag.get_by_role("button", name="Disable all").click()
        expect(page.locator(".notice")).to_have_text(f"2 channels tagged “team-{suffix}” disabled.")
        assert [channel(server, i)["status"] for i in ids] == [ChannelStatus.MANUALLY_DISABLED] * 2 + [
            ChannelStatus.ENABLED]
        expect(row).to_contain_text("Disabled")

        row_action(page, names[0], "Tag")
        tag.get_by_role("button", name="Enable all").click()
        expect(page.locator(".notice")).to_have_text(f"2 channels tagged “team-{suffix}” enabled.")
        assert [channel(server, i)["status"] for i in ids] == [ChannelStatus.ENABLED] * 3

        row_action(page, names[0], "Tag")
        tag.get_by_label("New tag").fill(f"crew-{suffix}")
        tag.get_by_role("button", name="Rename tag").click()
        expect(page.locator(".notice")).to_have_text(f"Tag “team-{suffix}” renamed on 2 channels.")
        assert [channel(server, i)["tag"] for i in ids] == [f"crew-{suffix}", f"crew-{suffix}", ""]
        expect(row).to_contain_text(f"crew-{suffix}")

        page.get_by_label(f"Select {names[2]}").check()  # the first two are still selected
        page.get_by_role("button", name="Delete the selected").click()
        confirm = page.get_by_role("dialog", name="Delete the selected channels?")
        expect(confirm).to_contain_text("3 channels stop serving at once.")
        confirm.get_by_role("button", name="Delete selected").click()
        expect(page.locator(".notice")).to_have_text("3 channels deleted.")
        expect(page.get_by_text(f"Nothing matches “tagged-{suffix}”.")).to_be_visible()  # the list read again
        for i in ids:
            assert server.admin().get(f"/api/channel/{i}").status_code == 404
    finally:
        delete_channels(server, *ids)


def test_balances_and_the_test_of_every_channel_show_their_progress_and_results(
        page: Page, server: Server, upstream: FakeOpenAI) -> None:
    suffix = secrets.token_hex(3)
    quick, held, broken = (f"{what}-{suffix}" for what in ("quick", "held", "broken"))
    ids = [add_channel(server, upstream, quick), add_channel(server, upstream, held),
           add_channel(server, upstream, broken, path="/nowhere")]  # every request to it is a 404
    set_option(server, "ChannelDisableThreshold", 600)  # a held test is not "slow": its status stays
    try:
        as_root(page, server, "/channels", "Channels")
        upstream.balance, upstream.used = 42.5, 7.5
        row_action(page, quick, "Update balance")
        expect(page.locator(".notice")).to_have_text(f"Channel “{quick}” balance: $42.50.")  # USD, as stored
        assert channel(server, ids[0])["balance"] == 42.5
        expect(page.locator("tbody tr", has_text=quick)).to_contain_text("$42.50")

        upstream.balance = 12.25
        upstream.hold(lambda r: r.headers.get("authorization") == f"Bearer sk-{held}")
        try:
            page.get_by_role("button", name="Update all balances").click()
            progress = page.locator(".run-progress")
            expect(progress.get_by_role("status")).to_have_text(
                "Updating every balance: 2 of 3 done, 1 failed so far.")
            expect(progress.get_by_role("progressbar", name="Updating every balance")).to_have_attribute(
                "value", "2")
            check_accessibility(page, "a balance update in progress")
            running = data(server.admin().get("/api/channel/progress", params={"run": "balance"}))
            assert (running["running"], running["total"], running["done"]) == (True, 3, 2)
        finally:
            upstream.release()
        expect(page.locator(".notice")).to_have_text("Balances updated: 2, failed: 1.")
        status = progress.get_by_role("status")
        expect(status).to_have_text("Every balance updated: 2 passed, 1 failed, of 3.")
        expect(progress.get_by_role("list", name="Failures")).to_contain_text(f"#{ids[2]} {broken}: ")
        assert [channel(server, i)["balance"] for i in ids[:2]] == [12.25, 12.25]
        ended = data(server.admin().get("/api/channel/progress", params={"run": "balance"}))
        assert (ended["running"], ended["passed"], ended["failed"]) == (False, 2, 1)
        assert [f["channel_id"] for f in ended["failures"]] == [ids[2]]

        upstream.hold(lambda r: r.headers.get("authorization") == f"Bearer sk-{held}")
        try:
            page.get_by_role("button", name="Test all channels").click()
            expect(progress.get_by_role("status")).to_have_text(
                "Testing every channel: 2 of 3 done, 1 failed so far.")
            check_accessibility(page, "a test of every channel in progress")
        finally:
            upstream.release()
        expect(progress.get_by_role("status")).to_have_text("Every channel tested: 2 passed, 1 failed, of 3.")
        expect(page.locator(".notice")).to_have_text(
            "Testing every channel ended; the list shows each channel's last test.")
        failures = progress.get_by_role("list", name="Failures")
        expect(failures).to_contain_text(f"#{ids[2]} {broken}: ")
        expect(page.locator("tbody tr", has_text=held)).to_contain_text(" ms")  # the list was read again
        tested = data(server.admin().get("/api/channel/progress", params={"run": "test"}))
        assert (tested["running"], tested["passed"], tested["failed"]) == (False, 2, 1)
        expect(failures).to_contain_text(tested["failures"][0]["message"])
        assert [channel(server, i)["test_time"] > 0 for i in ids] == [True, True, False]
    finally:
        upstream.release()
        set_option(server, "ChannelDisableThreshold", 5)
        delete_channels(server, *ids)


def test_root_reveals_a_channels_keys_after_verifying_with_the_authenticator_code(
        page: Page, server: Server, upstream: FakeOpenAI) -> None:
    keys = [f"sk-reveal-{i}-{secrets.token_hex(8)}" for i in range(2)]
    body = {"mode": "multi_to_single", "multi_key_mode": "random",
            "channel": {"name": "revealed", "type": ChannelType.OPENAI, "key": "\n".join(keys),
                        "models": "listed-model", "group": "default", "base_url": upstream.url}}
    channel_id = int(data(server.admin().post("/api/channel/", json=body))[0])
    as_root(page, server, "/channels", "Channels")  # signed in before 2FA is on: the session stays open
    setup = data(server.admin().post("/api/user/2fa/setup"))
    totp = pyotp.TOTP(setup["secret"])
    data(server.admin().post("/api/user/2fa/enable", json={"code": totp.now()}))
    try:
        row_action(page, "revealed", "Reveal key")
        prompt = page.get_by_role("dialog", name="Confirm it is you")
        expect(prompt).to_contain_text("secure verification required")
        wrong = "000000" if totp.now() != "000000" else "111111"
        code = prompt.get_by_label("Authenticator code")
        code.fill(wrong)
        prompt.get_by_role("button", name="Verify").click()
        expect(code).to_have_attribute("aria-invalid", "true")  # the server's refusal, at its field
        refused = server.admin().post("/api/verify", json={"method": "2fa", "code": wrong})
        assert refused.status_code == 400
        detail = refused.json()["message"].removeprefix("code: ")
        expect(code).to_have_accessible_description(f"Authenticator code: {detail}")  # its label, not `code`
        check_accessibility(page, "verification prompt with a refusal")

        code.fill(totp.at(time.time() + 30))  # a step not used yet
        prompt.get_by_role("button", name="Verify").click()
        shown = page.get_by_role("dialog", name="Key of channel “revealed”")
        secret = shown.get_by_label("The channel's key")
        expect(secret).to_have_value("\n".join(keys))  # one per line, as stored
        check_accessibility(page, "revealed key dialog")
        shown.get_by_role("button", name="Copy").click()
        expect(shown.get_by_text("Copied to the clipboard.")).to_be_visible()
        assert page.evaluate("navigator.clipboard.readText()") == "\n".join(keys)
        # what was shown is what is stored: the search by the whole key text matches it exactly
        found = data(server.admin().get("/api/channel/search", params={"keyword": "\n".join(keys)}))
        assert [c["id"] for c in found["items"]] == [channel_id]
        shown.get_by_role("button", name="Close").click()
        expect(shown).to_be_hidden()
        expect(page.get_by_text(keys[0])).to_have_count(0)  # shown once: gone with its dialog
    finally:
        data(server.admin().post("/api/user/2fa/disable", json={"code": setup["backup_codes"][0]}))
        delete_channels(server, channel_id)


def test_an_anthropic_channel_fetches_its_models_and_passes_its_test(page: Page, server: Server) -> None:
    with on_thread(FakeAnthropic(valid_keys=["sk-ant-page"])) as fake:
        made: list[int] = []
        try:
            as_root(page, server, "/channels", "Channels")
            page.get_by_role("button", name="Create channel").click()
            form = page.get_by_role("dialog", name="Create a channel")
            base_url = form.get_by_label("Base URL")
            expect(base_url).to_have_accessible_description(
                "Empty for the type's default address, https://api.openai.com.")
            form.get_by_label("Type").select_option(label="Custom")
            expect(base_url).to_have_accessible_description(
                "Required: a Custom channel has no default address.")
            form.get_by_label("Name").fill("custom-without-url")
            form.get_by_label("Key", exact=True).fill("sk-custom")
            form.get_by_label("Models").fill("m")
            form.get_by_role("button", name="Create channel").click()
            expect(base_url).to_have_attribute("aria-invalid", "true")  # the server's refusal, at its field

            form.get_by_label("Type").select_option(label="Anthropic")
            expect(base_url).to_have_accessible_description(re.compile(
                r"^Empty for the type's default address, https://api\.anthropic\.com\."))
            form.get_by_label("Name").fill("claude-page")
            form.get_by_label("Key", exact=True).fill("sk-ant-page")
            base_url.fill(fake.url)
            form.get_by_label("Models").fill("")
            form.get_by_role("button", name="Fetch the upstream's models").click()  # root: not saved yet
            expect(form.get_by_label("Models")).to_have_value("claude-fake-sonnet,claude-fake-haiku")
            assert fake.last.path == "/v1/models" and fake.last.headers["x-api-key"] == "sk-ant-page"
            form.get_by_role("button", name="Create channel").click()
            expect(page.locator(".notice")).to_have_text("1 channel created.")
            search = server.admin().get("/api/channel/search", params={"keyword": "claude-page"})
            found = data(search)["items"]
            made = [c["id"] for c in found]
            assert [(c["type"], c["models"]) for c in found] == [
                (ChannelType.ANTHROPIC, "claude-fake-sonnet,claude-fake-haiku")]

            row = page.locator("tbody tr", has_text="claude-page")
            expect(row).to_contain_text("Anthropic")
            row_action(page, "claude-page", "Test")
            expect(page.locator(".notice")).to_have_text(
                re.compile(r"^Channel “claude-page” answered in \d+\.\d\d s\.$"))
            assert fake.last.path == "/v1/messages" and fake.last.json["model"] == "claude-fake-sonnet"
        finally:
            delete_channels(server, *made)
