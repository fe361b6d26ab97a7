"""The admin channel routes follow docs/api/channels.md#channels on every stack.

Proved here, over HTTP against the real app on SQLite, MariaDB+Redis and PostgreSQL+Redis:
- `POST /api/channel/` in the modes single, batch (optionally named after the key) and multi_to_single
  answers the new ids, stores the keys encrypted (decryptable, digested) and writes one ability per
  group × model; the channel routes at once (`state.channels.pick`);
- no reply ever carries a key;
- `PUT /api/channel/` changes only the fields present, clears with `""`/`null`, replaces or appends the
  keys of a multi-key channel, rebuilds the abilities and re-routes at once;
- `DELETE /api/channel/:id` removes the channel and its abilities and un-routes it; 404 when unknown;
- every invalid field is a 400 naming the field; path ids that are not positive integers are a 400.
Listing, search and the catalog are in tests/test_channels_lists.py; two nodes in
tests/test_channels_nodes.py.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from sqlalchemy import select

from models.abilities import Ability
from models.channels import Channel
from models.routing import load_json
from server.metrics import DisableReason
from tests.harness import Api, Running, add_user, data_of, logged_in
from tests.harness import fails as envelope_fails

fails = partial(envelope_fails, prefix=True)  # a 400 names its field first

GEMINI, OPENAI = 24, 1


# ---- helpers (shared with the other test_channels_*.py files) ---------------------------------------


async def admin_of(app: Running) -> Api:
    await add_user(app.state, "chadmin", role=10)
    return await logged_in(app, "chadmin")


def channel_body(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"name": "gem", "type": GEMINI, "key": "AIza-key-one",
                            "models": "gemini-2.5-flash", "group": "default"}
    base.update(fields)
    return base


async def create(api: Api, mode: str = "single", **fields: Any) -> list[int]:
    extra: dict[str, Any] = {k: fields.pop(k) for k in ("multi_key_mode", "batch_add_set_key_prefix_2_name")
                             if k in fields}
    body: dict[str, Any] = {"mode": mode, **extra, "channel": channel_body(**fields)}
    ids = data_of(await api.post("/api/channel/", json=body))
    assert isinstance(ids, list) and all(isinstance(i, int) for i in ids)
    return ids


async def row_of(app: Running, channel_id: int) -> Channel | None:
    async with app.state.db.transaction() as tx:
        return await tx.get(Channel, channel_id)


async def abilities_of(app: Running, channel_id: int) -> set[tuple[str, str, bool, int, int, str]]:
    async with app.state.db.transaction() as tx:
        rows = (await tx.scalars(select(Ability).where(Ability.channel_id == channel_id))).all()
    return {(a.group, a.model, bool(a.enabled), int(a.priority), int(a.weight), a.tag) for a in rows}


def keys_in_db(app: Running, row: Channel) -> list[str]:
    return app.state.box.decrypt(row.key_encrypted).split("\n")


def assert_no_key(body: Any, *secrets: str) -> None:
    text = body if isinstance(body, str) else repr(body)
    for secret in secrets:
        assert secret not in text


def routed(app: Running, model: str, group: str = "default", types: frozenset[int] = frozenset({GEMINI})
           ) -> int | None:
    channel = app.state.channels.pick(group, model, types)
    return channel.id if channel is not None else None


# ---- create -----------------------------------------------------------------------------------------

async def test_create_single_stores_the_key_encrypted_and_routes_at_once(app: Running) -> None:
    admin = await admin_of(app)
    reply = await admin.post("/api/channel/", json={"mode": "single", "channel": channel_body(
        key="  AIza-secret-1  \n", models=" gemini-2.5-flash , gemini-2.5-pro,gemini-2.5-flash,, ",
        group="default, vip ,default", priority=5, weight=3, tag="t1")})
    assert_no_key(reply.text, "AIza-secret-1")
    [cid] = data_of(reply)
    row = await row_of(app, cid)
    assert row is not None
    assert "AIza" not in row.key_encrypted and keys_in_db(app, row) == ["AIza-secret-1"]
    assert row.key_digest == app.state.box.digest("AIza-secret-1")
    assert row.models == "gemini-2.5-flash,gemini-2.5-pro" and row.group == "default,vip"
    assert 0 <= app.state.clock.now_s() - row.created_time < 60
    assert load_json(row.channel_info)["is_multi_key"] is False
    assert await abilities_of(app, cid) == {
        (g, m, True, 5, 3, "t1") for g in ("default", "vip") for m in ("gemini-2.5-flash", "gemini-2.5-pro")}
    assert routed(app, "gemini-2.5-pro", "vip") == cid
    assert app.state.channels.get(cid).keys == ["AIza-secret-1"]  # type: ignore[union-attr]
    view = data_of(await admin.get(f"/api/channel/{cid}"))
    assert view["key"] == "" and view["name"] == "gem" and view["type"] == GEMINI and view["status"] == 1
    assert view["channel_info"] == {"is_multi_key": False, "multi_key_size": 0, "multi_key_status_list": {},
                                    "multi_key_mode": "random", "multi_key_polling_index": 0}
    assert view["auto_ban"] == 1 and view["balance"] == 0 and view["other_info"] == ""


async def test_create_batch_makes_one_channel_per_distinct_key(app: Running) -> None:
    admin = await admin_of(app)
    ids = await create(admin, "batch", key="sk-aaaaaaaa11\n\n sk-bbbbbbbb22 \nsk-aaaaaaaa11\n", type=OPENAI,
                       name="oa", models="omni-moderation-latest", batch_add_set_key_prefix_2_name=True,
                       group="")
    assert len(ids) == 2
    rows = [await row_of(app, i) for i in ids]
    assert [r.name for r in rows if r] == ["oa_sk-aaaaa", "oa_sk-bbbbb"]
    assert [keys_in_db(app, r) for r in rows if r] == [["sk-aaaaaaaa11"], ["sk-bbbbbbbb22"]]
    for cid in ids:
        assert await abilities_of(app, cid) == {("default", "omni-moderation-latest", True, 0, 0, "")}
    assert routed(app, "omni-moderation-latest", types=frozenset({OPENAI})) in ids
    plain = await create(admin, "batch", key="k1\nk2", name="same")
    assert [(await row_of(app, i)).name for i in plain] == ["same", "same"]  # type: ignore[union-attr]


async def test_create_multi_to_single_holds_all_keys(app: Running) -> None:
    admin = await admin_of(app)
    [cid] = await create(admin, "multi_to_single", key="k-one\nk-two\n k-one \nk-three",
                         multi_key_mode="polling")
    row = await row_of(app, cid)
    assert row is not None and keys_in_db(app, row) == ["k-one", "k-two", "k-three"]
    info = load_json(row.channel_info)
    assert info["is_multi_key"] is True and info["multi_key_size"] == 3
    assert info["multi_key_mode"] == "polling"
    view = data_of(await admin.get(f"/api/channel/{cid}"))
    assert view["key"] == "" and view["channel_info"]["is_multi_key"] is True
    assert view["channel_info"]["multi_key_size"] == 3
    routed_channel = app.state.channels.get(cid)
    assert routed_channel is not None and routed_channel.keys == ["k-one", "k-two", "k-three"]
    assert routed_channel.multi_key_mode == "polling" and routed(app, "gemini-2.5-flash") == cid


# ---- update -----------------------------------------------------------------------------------------

async def test_update_is_partial_clears_and_rebuilds_abilities(app: Running) -> None:
    admin = await admin_of(app)
    [cid] = await create(admin, models="m-a,m-b", group="default", tag="old", remark="note",
                         model_mapping='{"m-a":"m-up"}', priority=2)
    view = data_of(await admin.put("/api/channel/", json={"id": cid, "models": "m-b, m-c", "weight": 7,
                                                            "tag": None, "remark": "", "key": "",
                                                            "channel_info": {"is_multi_key": True}}))
    assert view["models"] == "m-b,m-c" and view["weight"] == 7 and view["tag"] == "" and view["remark"] == ""
    assert view["name"] == "gem" and view["priority"] == 2 and view["model_mapping"] == '{"m-a":"m-up"}'
    assert view["channel_info"]["is_multi_key"] is False and view["key"] == ""
    assert await abilities_of(app, cid) == {("default", m, True, 2, 7, "") for m in ("m-b", "m-c")}
    assert routed(app, "m-a") is None and routed(app, "m-c") == cid
    row = await row_of(app, cid)
    assert row is not None and keys_in_db(app, row) == ["AIza-key-one"]  # "" keeps the key

    view = data_of(await admin.put("/api/channel/", json={"id": cid, "status": 2, "key": "AIza-new"}))
    assert view["status"] == 2 and view["key"] == ""
    assert load_json(view["other_info"])["status_reason"] == "manually disabled"
    assert {a[2] for a in await abilities_of(app, cid)} == {False} and routed(app, "m-c") is None
    row = await row_of(app, cid)
    assert row is not None and keys_in_db(app, row) == ["AIza-new"]
    assert row.key_digest == app.state.box.digest("AIza-new")

    view = data_of(await admin.put("/api/channel/", json={"id": cid, "status": 1, "model_mapping": None,
                                                            "group": "vip"}))
    assert view["model_mapping"] == "" and view["group"] == "vip"
    assert load_json(view["other_info"])["status_reason"] == "manually enabled"
    assert routed(app, "m-c", "vip") == cid and routed(app, "m-c") is None
    assert app.state.channels.get(cid).model_mapping == {}  # type: ignore[union-attr]
    fails(await admin.put("/api/channel/", json={"id": 10**9, "name": "x"}), 404, "channel not found")


async def test_update_multi_key_replace_and_append(app: Running) -> None:
    admin = await admin_of(app)
    [cid] = await create(admin, "multi_to_single", key="k1\nk2")
    await _disable_key(app, cid, 1)
    data_of(await admin.put("/api/channel/", json={"id": cid, "key": "k2\nk3\nk3", "key_mode": "append",
                                                    "multi_key_mode": "polling"}))
    row = await row_of(app, cid)
    assert row is not None and keys_in_db(app, row) == ["k1", "k2", "k3"]
    info = load_json(row.channel_info)
    assert info["multi_key_size"] == 3 and info["multi_key_status_list"] == {"1": 3}
    assert info["multi_key_mode"] == "polling"
    assert app.state.channels.get(cid).key_status == [1, 3, 1]  # type: ignore[union-attr]

    data_of(await admin.put("/api/channel/", json={"id": cid, "key": "n1\nn2"}))  # replace (default)
    row = await row_of(app, cid)
    assert row is not None and keys_in_db(app, row) == ["n1", "n2"]
    info = load_json(row.channel_info)
    assert info["multi_key_size"] == 2 and info["multi_key_status_list"] == {}
    assert row.key_digest == app.state.box.digest("n1\nn2")
    assert app.state.channels.get(cid).key_status == [1, 1]  # type: ignore[union-attr]
    bad_mode = {"id": cid, "key": "x", "key_mode": "merge"}
    fails(await admin.put("/api/channel/", json=bad_mode), 400, "key_mode")


async def test_all_keys_back_revives_an_auto_disabled_multi_key_channel(app: Running) -> None:
    admin = await admin_of(app)
    [cid] = await create(admin, "multi_to_single", key="k1\nk2")
    await _disable_key(app, cid, 0)
    await _disable_key(app, cid, 1)
    row = await row_of(app, cid)
    assert row is not None and row.status == 3 and routed(app, "gemini-2.5-flash") is None
    assert {a[2] for a in await abilities_of(app, cid)} == {False}
    view = data_of(await admin.put("/api/channel/", json={"id": cid, "key": "k9", "key_mode": "append"}))
    assert view["status"] == 1 and view["channel_info"]["multi_key_status_list"] == {"0": 3, "1": 3}
    assert {a[2] for a in await abilities_of(app, cid)} == {True} and routed(app, "gemini-2.5-flash") == cid


async def _disable_key(app: Running, cid: int, index: int) -> None:
    channel = app.state.channels.get(cid)
    assert channel is not None
    await app.state.channels.auto_disable(channel, index, "test", why=DisableReason.UPSTREAM_STATUS)


# ---- delete -----------------------------------------------------------------------------------------

async def test_delete_removes_the_channel_and_its_abilities(app: Running) -> None:
    admin = await admin_of(app)
    [cid] = await create(admin)
    [other] = await create(admin, name="keep")
    assert routed(app, "gemini-2.5-flash") in (cid, other)
    assert data_of(await admin.delete(f"/api/channel/{cid}")) is None
    assert await row_of(app, cid) is None and await abilities_of(app, cid) == set()
    assert app.state.channels.get(cid) is None and routed(app, "gemini-2.5-flash") == other
    assert len(await abilities_of(app, other)) == 1
    fails(await admin.delete(f"/api/channel/{cid}"), 404, "channel not found")
    fails(await admin.get(f"/api/channel/{cid}"), 404, "channel not found")
    for bad in ("abc", "0", "-1", "1.5"):
        fails(await admin.get(f"/api/channel/{bad}"), 400, "id")
        fails(await admin.delete(f"/api/channel/{bad}"), 400, "id")


# ---- validation -------------------------------------------------------------------------------------

BAD_CHANNELS: list[tuple[dict[str, Any], str]] = [
    ({"type": 999}, "type"),
    ({"type": "24"}, "type"),
    ({"type": None}, "type"),
    ({"name": ""}, "name"),
    ({"name": "x" * 101}, "name"),
    ({"name": 5}, "name"),
    ({"key": ""}, "key"),
    ({"key": " \n \n"}, "key"),
    ({"key": "one\ntwo"}, "key"),  # single mode takes one key
    ({"key": 12}, "key"),
    ({"weight": -1}, "weight"),
    ({"weight": True}, "weight"),
    ({"priority": "high"}, "priority"),
    ({"status": 3}, "status"),
    ({"status": 0}, "status"),
    ({"auto_ban": 2}, "auto_ban"),
    ({"base_url": "ftp://example.com"}, "base_url"),
    ({"base_url": "not a url"}, "base_url"),
    ({"base_url": "https://"}, "base_url"),
    ({"base_url": "http://example.com:99999"}, "base_url"),
    ({"models": "m" * 256}, "models"),
    ({"group": "g" * 65}, "group"),
    ({"tag": "t" * 65}, "tag"),
    ({"remark": "r" * 256}, "remark"),
    ({"model_mapping": "[1]"}, "model_mapping"),
    ({"model_mapping": "{oops"}, "model_mapping"),
    ({"model_mapping": '{"a":1}'}, "model_mapping"),
    ({"model_mapping": '{"a":"b","b":"a"}'}, "model_mapping"),
    ({"model_mapping": '{"a":"a"}'}, "model_mapping"),
    ({"model_mapping": '{"x":"a","a":"b","b":"c","c":"a"}'}, "model_mapping"),
    ({"status_code_mapping": '{"404":500}'}, "status_code_mapping"),
    ({"status_code_mapping": '{"40":"500"}'}, "status_code_mapping"),
    ({"status_code_mapping": '{"404":"999"}'}, "status_code_mapping"),
    ({"setting": "true"}, "setting"),
    ({"param_override": '"text"'}, "param_override"),
    ({"header_override": '{"X-A":1}'}, "header_override"),
    ({"settings": "[]"}, "settings"),
    ({"other": 5}, "other"),
]


async def test_every_invalid_field_is_a_400_naming_it(app: Running) -> None:
    admin = await admin_of(app)
    for fields, field in BAD_CHANNELS:
        body = {"mode": "single", "channel": channel_body(**fields)}
        fails(await admin.post("/api/channel/", json=body), 400, f"{field}:")
    fails(await admin.post("/api/channel/", json={"mode": "nope", "channel": channel_body()}), 400, "mode:")
    fails(await admin.post("/api/channel/", json={"channel": channel_body()}), 400, "mode:")
    fails(await admin.post("/api/channel/", json={"mode": "single"}), 400, "channel:")
    fails(await admin.post("/api/channel/", json={"mode": "single", "channel": "x"}), 400, "channel:")
    fails(await admin.post("/api/channel/", json={"mode": "multi_to_single", "multi_key_mode": "roundrobin",
                                                   "channel": channel_body()}), 400, "multi_key_mode:")
    fails(await admin.post("/api/channel/", json={"mode": "batch", "batch_add_set_key_prefix_2_name": True,
                                                   "channel": channel_body(name="n" * 95)}), 400, "name:")
    no_name = channel_body()
    del no_name["name"]
    fails(await admin.post("/api/channel/", json={"mode": "single", "channel": no_name}), 400, "name:")
    [cid] = await create(admin)
    for fields, field in BAD_CHANNELS:
        if field == "key" and fields["key"] in ("", " \n \n"):
            continue  # an empty key keeps the keys on update
        fails(await admin.put("/api/channel/", json={"id": cid, **fields}), 400, f"{field}:")
    for field in ("name", "type", "group", "status"):
        fails(await admin.put("/api/channel/", json={"id": cid, field: None}), 400, f"{field}:")
        fails(await admin.put("/api/channel/", json={"id": cid, field: ""}), 400, f"{field}:")
    fails(await admin.put("/api/channel/", json={"id": cid, "group": " , "}), 400, "group:")
    fails(await admin.put("/api/channel/", json={"name": "x"}), 400, "id:")
    fails(await admin.put("/api/channel/", json={"id": "1"}), 400, "id:")
    assert await abilities_of(app, cid) == {("default", "gemini-2.5-flash", True, 0, 0, "")}
    view = data_of(await admin.get(f"/api/channel/{cid}"))
    assert view["name"] == "gem" and view["type"] == GEMINI  # nothing changed


async def test_valid_json_fields_are_stored_as_sent(app: Running) -> None:
    admin = await admin_of(app)
    [cid] = await create(admin, model_mapping='{"a":"b","b":"c"}', status_code_mapping='{"404":"400"}',
                         header_override={"X-Org": "acme"}, setting="", settings="{}",
                         param_override='{"temperature":0.1}', base_url="https://gl.example.com/",
                         status=2, auto_ban=0)
    view = data_of(await admin.get(f"/api/channel/{cid}"))
    assert view["model_mapping"] == '{"a":"b","b":"c"}' and view["status_code_mapping"] == '{"404":"400"}'
    assert view["header_override"] == '{"X-Org":"acme"}' and view["settings"] == "{}"
    assert view["param_override"] == '{"temperature":0.1}' and view["base_url"] == "https://gl.example.com/"
    assert view["status"] == 2 and view["auto_ban"] == 0
    assert load_json(view["other_info"])["status_reason"] == "manually disabled"
    assert {a[2] for a in await abilities_of(app, cid)} == {False}
    routed_channel = app.state.channels.get(cid)
    assert routed_channel is not None and routed_channel.base_url == "https://gl.example.com"
    assert routed_channel.header_override == {"X-Org": "acme"} and routed(app, "gemini-2.5-flash") is None


async def test_models_equal_only_for_the_database_are_a_400_not_a_500(app: Running) -> None:
    """MariaDB's collation makes `GPT-4o` and `gpt-4o` one ability key; elsewhere both are kept."""
    admin = await admin_of(app)
    reply = await admin.post("/api/channel/", json={"mode": "single", "channel": channel_body(
        models="GPT-4o,gpt-4o")})
    if reply.status_code == 400:
        fails(reply, 400, "models:")
        async with app.state.db.transaction() as tx:
            assert (await tx.scalars(select(Channel))).all() == []  # nothing half-created
    else:
        [cid] = data_of(reply)
        assert {a[1] for a in await abilities_of(app, cid)} == {"GPT-4o", "gpt-4o"}


async def test_a_custom_channel_needs_its_address(app: Running) -> None:
    admin = await admin_of(app)
    body = channel_body(type=8, base_url="")
    fails(await admin.post("/api/channel/", json={"mode": "single", "channel": body}), 400, "base_url:")
    [cid] = await create(admin)  # a Gemini channel: its type has a default address
    key = {"key": "AIza-key-one"}  # an admin moves a key only where they could send it anyway
    fails(await admin.put("/api/channel/", json={"id": cid, "type": 8, **key}), 400, "base_url:")
    assert data_of(await admin.get(f"/api/channel/{cid}"))["type"] == GEMINI  # nothing changed
    moved = await admin.put("/api/channel/", json={"id": cid, "type": 8, "base_url": "https://llm.example.com",
                                                   **key})
    assert data_of(moved)["type"] == 8
