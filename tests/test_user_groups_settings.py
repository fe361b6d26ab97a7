"""The group and model lists of docs/api/accounts.md#groups and the settings route of
docs/api/accounts.md#your-settings, on every stack (SQLite, MariaDB + Redis, PostgreSQL + Redis), over HTTP
against the real app.

Proved here:
- `GET /api/group/` lists the `GroupRatio` keys sorted;
- `GET /api/user/self/groups` and `/api/user/groups` list the usable groups (`UserUsableGroups` keys that
  exist in `GroupRatio`, plus the user's own) with ratio and description, plus `auto` only when one of the
  `AutoGroups` is usable;
- `GET /api/user/models` lists the sorted distinct models an enabled channel serves in a usable group
  (those reached through `auto` too), never those of a disabled channel or another group;
- with `capability`, only the models that have it (the catalog's, `ModelCapabilities` on top);
- `PUT /api/user/setting` merges the fields sent and keeps every other key; each rule's violation is a 400
  naming the field and changes nothing; the gateway flags reach the cached user state at once.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from models.users import UserRepository
from tests.gateway import seed_channel
from tests.harness import Running, add_user, data_of, fails, logged_in


async def groups_setup(app: Running) -> None:
    await app.state.options.put("GroupRatio", json.dumps({"default": 1, "vip": 2, "svip": 0.5, "zz": 3}))
    await app.state.options.put("UserUsableGroups", json.dumps({"default": "Default", "vip": "VIP",
                                                                "nope": "not in GroupRatio"}))
    await app.state.options.put("AutoGroups", "[]")


async def test_group_names_and_usable_groups(app: Running) -> None:
    await groups_setup(app)
    await add_user(app.state, "admin1", role=10)
    admin = await logged_in(app, "admin1")
    assert data_of(await admin.get("/api/group/")) == ["default", "svip", "vip", "zz"]
    await add_user(app.state, "alice", group="svip")
    alice = await logged_in(app, "alice")
    expected: dict[str, Any] = {"default": {"ratio": 1, "desc": "Default"},
                                "vip": {"ratio": 2, "desc": "VIP"}, "svip": {"ratio": 0.5, "desc": "svip"}}
    for path in ("/api/user/self/groups", "/api/user/groups"):
        assert data_of(await alice.get(path)) == expected
    await app.state.options.put("AutoGroups", json.dumps(["zz", "nope"]))
    assert "auto" not in data_of(await alice.get("/api/user/groups"))  # no AutoGroups entry is usable
    await app.state.options.put("AutoGroups", json.dumps(["zz", "vip"]))
    got = data_of(await alice.get("/api/user/self/groups"))
    assert got["auto"]["ratio"] == "auto" and isinstance(got["auto"]["desc"], str)
    assert set(got) == {"default", "vip", "svip", "auto"}


async def test_models_of_usable_groups(app: Running) -> None:
    await groups_setup(app)
    await add_user(app.state, "bob")
    bob = await logged_in(app, "bob")
    assert data_of(await bob.get("/api/user/models")) == []
    url = "http://127.0.0.1:9"
    await seed_channel(app.state, type=1, base_url=url, models="m-b,m-a", group="default")
    await seed_channel(app.state, type=1, base_url=url, models="m-a,m-vip", group="vip")
    await seed_channel(app.state, type=1, base_url=url, models="m-off", group="default", status=2)
    await seed_channel(app.state, type=1, base_url=url, models="m-zz", group="zz")
    assert data_of(await bob.get("/api/user/models")) == ["m-a", "m-b", "m-vip"]
    await app.state.options.put("AutoGroups", json.dumps(["zz"]))  # zz is not usable: auto reaches nothing
    assert data_of(await bob.get("/api/user/models")) == ["m-a", "m-b", "m-vip"]
    await app.state.options.put("UserUsableGroups", json.dumps({"default": "", "zz": ""}))
    await app.state.options.put("AutoGroups", json.dumps(["zz"]))
    assert data_of(await bob.get("/api/user/models")) == ["m-a", "m-b", "m-zz"]


async def test_user_models_by_capability(app: Running) -> None:
    """`capability=speech_output` keeps the models the catalog (or `ModelCapabilities`) says speak; an
    unknown capability is a 400 naming the parameter."""
    await add_user(app.state, "dora")
    dora = await logged_in(app, "dora")
    await seed_channel(app.state, type=24, base_url="http://127.0.0.1:9",
                       models="gemini-2.5-flash,gemini-2.5-flash-preview-tts,my-voice", group="default")
    assert data_of(await dora.get("/api/user/models", params={"capability": "speech_output"})) == [
        "gemini-2.5-flash-preview-tts"]
    await app.state.options.put("ModelCapabilities", json.dumps({"my-voice": {"speech_output": True}}))
    assert data_of(await dora.get("/api/user/models", params={"capability": "speech_output"})) == [
        "gemini-2.5-flash-preview-tts", "my-voice"]
    assert len(data_of(await dora.get("/api/user/models"))) == 3
    fails(await dora.get("/api/user/models", params={"capability": "sing"}), 400,
          "capability: must be one of", prefix=True)


async def stored(app: Running, user_id: int) -> dict[str, Any]:
    async with app.state.db.transaction() as tx:
        user = await UserRepository(tx).get(user_id)
    assert user is not None
    value: dict[str, Any] = json.loads(user.setting)
    return value


async def test_settings_merge_and_keep_other_keys(app: Running) -> None:
    uid = await add_user(app.state, "carol")
    carol = await logged_in(app, "carol")
    data_of(await carol.put("/api/user/self", json={"language": "en"}))
    merged = data_of(await carol.put("/api/user/setting", json={
        "notify_type": "webhook", "webhook_url": "https://hooks.example.com/x", "webhook_secret": "s" * 128,
        "quota_warning_threshold": 5000, "notification_email": " Me@Example.COM ", "record_ip_log": True}))
    assert merged == {"language": "en", "notify_type": "webhook", "webhook_url": "https://hooks.example.com/x",
                      "webhook_secret": "s" * 128, "quota_warning_threshold": 5000,
                      "notification_email": "me@example.com", "record_ip_log": True}
    assert await stored(app, uid) == merged
    state = await app.state.users.state(uid)
    assert state is not None and state.record_ip_log and not state.accept_unset_model_ratio_model
    again = data_of(await carol.put("/api/user/setting", json={
        "accept_unset_model_ratio_model": True, "record_ip_log": None, "quota_warning_threshold": 0.5}))
    assert again == {**merged, "accept_unset_model_ratio_model": True, "quota_warning_threshold": 0.5}
    state = await app.state.users.state(uid)
    assert state is not None and state.record_ip_log and state.accept_unset_model_ratio_model
    changed = data_of(await carol.put("/api/user/setting", json={"notify_type": "email"}))
    assert changed["notify_type"] == "email"
    changed = data_of(await carol.put("/api/user/setting", json={"notification_email": ""}))
    assert changed["notification_email"] == ""


@pytest.mark.parametrize(("body", "field"), [
    ({"notify_type": "sms"}, "notify_type"),
    ({"notify_type": 1}, "notify_type"),
    ({"quota_warning_threshold": 0}, "quota_warning_threshold"),
    ({"quota_warning_threshold": -1.5}, "quota_warning_threshold"),
    ({"quota_warning_threshold": True}, "quota_warning_threshold"),
    ({"quota_warning_threshold": "5"}, "quota_warning_threshold"),
    ({"notify_type": "webhook"}, "webhook_url"),
    ({"notify_type": "webhook", "webhook_url": "ftp://example.com"}, "webhook_url"),
    ({"webhook_url": "https://"}, "webhook_url"),
    ({"webhook_secret": "x" * 129}, "webhook_secret"),
    ({"notification_email": "not-an-address"}, "notification_email"),
    ({"record_ip_log": 1}, "record_ip_log"),
    ({"accept_unset_model_ratio_model": "true"}, "accept_unset_model_ratio_model"),
])
async def test_bad_settings_are_refused_naming_the_field(app: Running, body: dict[str, Any],
                                                         field: str) -> None:
    uid = await add_user(app.state, "dave")
    dave = await logged_in(app, "dave")
    data_of(await dave.put("/api/user/setting", json={"language": "de"}))
    before = await stored(app, uid)
    fails(await dave.put("/api/user/setting", json=body), 400, field, prefix=True)
    assert await stored(app, uid) == before


async def test_webhook_needs_a_url_even_when_set_earlier_to_email(app: Running) -> None:
    await add_user(app.state, "erin")
    erin = await logged_in(app, "erin")
    data_of(await erin.put("/api/user/setting", json={"notify_type": "webhook",
                                                     "webhook_url": "http://hook.example.org/"}))
    fails(await erin.put("/api/user/setting", json={"webhook_url": ""}), 400, "webhook_url", prefix=True)
    data_of(await erin.put("/api/user/setting", json={"notify_type": "email", "webhook_url": ""}))
