"""`POST /api/channel/multi_key/manage` (docs/api/channels.md#multi-key-channels), over HTTP on every stack:

- `get_key_status` pages through the keys (masked previews, status filter) with the counts per status;
- `disable_key` / `enable_key` set one key's status (enabling clears its reason and time), the
  `*_all_keys` actions answer how many keys changed;
- the channel's status follows its keys: no enabled key left → 3 "all keys are disabled" and no routing;
  enabling a key → 1 and routing again; a channel an admin disabled stays disabled;
- `delete_key` removes one key and re-indexes the rest with their statuses (key text, digest,
  `channel_info` and the routing table agree); `delete_disabled_keys` removes the status-3 keys;
  neither may remove the last key (409);
- concurrent deletes on one channel each remove exactly one key (two processes:
  tests/test_channels_multikey_procs.py);
- refusals: unknown channel 404; single-key channel, unknown action, missing or out-of-range
  `key_index`, bad `status` 400 naming the field.
"""

from __future__ import annotations

import asyncio
from typing import Any

from models.routing import load_json
from server.metrics import DisableReason
from tests.harness import Api, Running
from tests.test_channels import abilities_of, admin_of, create, data_of, fails, keys_in_db, routed, row_of

KEYS = [f"sk-key-{n}-{'x' * 20}-end{n}" for n in range(5)]


async def manage(admin: Api, channel_id: int, action: str, **fields: Any) -> Any:
    return await admin.post("/api/channel/multi_key/manage",
                            json={"channel_id": channel_id, "action": action, **fields})


async def multi(admin: Api, keys: list[str] = KEYS, **fields: Any) -> int:
    [cid] = await create(admin, "multi_to_single", key="\n".join(keys), **fields)
    return cid


async def test_key_status_pages_filters_masks_and_counts(app: Running) -> None:
    admin = await admin_of(app)
    cid = await multi(admin)
    assert data_of(await manage(admin, cid, "disable_key", key_index=1)) is None
    channel = app.state.channels.get(cid)
    assert channel is not None
    before = app.state.clock.now_s()
    await app.state.channels.auto_disable(channel, 3, "upstream 401", why=DisableReason.UPSTREAM_STATUS)
    page = data_of(await manage(admin, cid, "get_key_status", page=2, page_size=2))
    assert (page["total"], page["page"], page["page_size"], page["total_pages"]) == (5, 2, 2, 3)
    assert (page["enabled_count"], page["manual_disabled_count"], page["auto_disabled_count"]) == (3, 1, 1)
    assert [(k["index"], k["status"], k["reason"]) for k in page["keys"]] == [(2, 1, ""),
                                                                              (3, 3, "upstream 401")]
    assert before <= page["keys"][1]["disabled_time"] <= app.state.clock.now_s()  # a second may begin
    assert page["keys"][0]["key_preview"] == "sk-k**********end2"
    auto = data_of(await manage(admin, cid, "get_key_status", status=2))
    assert [k["index"] for k in auto["keys"]] == [1] and auto["total"] == 1 and auto["page_size"] == 50
    whole = data_of(await manage(admin, cid, "get_key_status", page_size=1000, page=0))
    assert whole["page_size"] == 100 and whole["page"] == 1 and len(whole["keys"]) == 5
    for key in KEYS:
        assert key not in str(whole)


async def test_the_channel_status_follows_its_keys(app: Running) -> None:
    admin = await admin_of(app)
    cid = await multi(admin, KEYS[:3])
    assert data_of(await manage(admin, cid, "disable_key", key_index=0)) is None
    info = load_json((await row_of(app, cid)).channel_info)  # type: ignore[union-attr]
    assert info["multi_key_status_list"] == {"0": 2} and info["multi_key_disabled_reason"]["0"]
    assert app.state.channels.get(cid).key_status == [2, 1, 1]  # type: ignore[union-attr]
    assert data_of(await manage(admin, cid, "disable_all_keys")) == 2
    row = await row_of(app, cid)
    assert row is not None and row.status == 3
    assert load_json(row.other_info)["status_reason"] == "all keys are disabled"
    assert {a[2] for a in await abilities_of(app, cid)} == {False} and routed(app, "gemini-2.5-flash") is None
    assert data_of(await manage(admin, cid, "enable_key", key_index=2)) is None
    row = await row_of(app, cid)
    assert row is not None and row.status == 1 and routed(app, "gemini-2.5-flash") == cid
    info = load_json(row.channel_info)
    assert "2" not in info["multi_key_status_list"] and "2" not in info["multi_key_disabled_time"]
    assert data_of(await manage(admin, cid, "enable_all_keys")) == 2
    assert data_of(await manage(admin, cid, "enable_all_keys")) == 0
    assert app.state.channels.get(cid).key_status == [1, 1, 1]  # type: ignore[union-attr]

    data_of(await admin.put("/api/channel/", json={"id": cid, "status": 2}))  # an admin's disable stays
    data_of(await manage(admin, cid, "disable_all_keys"))
    data_of(await manage(admin, cid, "enable_key", key_index=0))
    assert (await row_of(app, cid)).status == 2  # type: ignore[union-attr]


async def test_deleting_keys_reindexes_the_rest_and_keeps_one(app: Running) -> None:
    admin = await admin_of(app)
    cid = await multi(admin)
    data_of(await manage(admin, cid, "disable_key", key_index=4))
    channel = app.state.channels.get(cid)
    assert channel is not None
    await app.state.channels.auto_disable(channel, 0, "bad key", why=DisableReason.UPSTREAM_STATUS)
    await app.state.channels.auto_disable(channel, 2, "bad key", why=DisableReason.UPSTREAM_STATUS)
    assert data_of(await manage(admin, cid, "delete_key", key_index=1)) is None
    row = await row_of(app, cid)
    assert row is not None and keys_in_db(app, row) == [KEYS[0], KEYS[2], KEYS[3], KEYS[4]]
    assert row.key_digest == app.state.box.digest("\n".join(keys_in_db(app, row)))
    info = load_json(row.channel_info)
    assert info["multi_key_size"] == 4 and info["multi_key_status_list"] == {"0": 3, "1": 3, "3": 2}
    assert data_of(await manage(admin, cid, "delete_disabled_keys")) == 2
    row = await row_of(app, cid)
    assert row is not None and keys_in_db(app, row) == [KEYS[3], KEYS[4]]
    assert load_json(row.channel_info)["multi_key_status_list"] == {"1": 2}
    routed_channel = app.state.channels.get(cid)
    assert routed_channel is not None and routed_channel.keys == [KEYS[3], KEYS[4]]
    assert routed_channel.key_status == [1, 2]
    assert data_of(await manage(admin, cid, "delete_disabled_keys")) == 0
    assert data_of(await manage(admin, cid, "delete_key", key_index=0)) is None
    row = await row_of(app, cid)
    assert row is not None and row.status == 3  # the one key left is disabled
    fails(await manage(admin, cid, "delete_key", key_index=0), 409, "a channel keeps at least one key")

    only_bad = await multi(admin, ["b-1", "b-2"], name="bad")
    channel = app.state.channels.get(only_bad)
    assert channel is not None
    for index in (0, 1):
        await app.state.channels.auto_disable(channel, index, "bad key", why=DisableReason.UPSTREAM_STATUS)
    fails(await manage(admin, only_bad, "delete_disabled_keys"), 409, "a channel keeps at least one key")
    assert keys_in_db(app, await row_of(app, only_bad)) == ["b-1", "b-2"]  # type: ignore[arg-type]


async def test_concurrent_deletes_in_one_process_each_remove_one_key(app: Running) -> None:
    admin = await admin_of(app)
    keys = [f"key-{n:02d}" for n in range(12)]
    cid = await multi(admin, keys)
    replies = await asyncio.gather(*(manage(admin, cid, "delete_key", key_index=0) for _ in range(8)))
    assert [r.status_code for r in replies] == [200] * 8
    row = await row_of(app, cid)
    assert row is not None and keys_in_db(app, row) == keys[8:]
    assert load_json(row.channel_info)["multi_key_size"] == 4


async def test_refusals_name_the_field(app: Running) -> None:
    admin = await admin_of(app)
    cid = await multi(admin, KEYS[:2])
    [single] = await create(admin, name="single")
    fails(await manage(admin, 10**9, "get_key_status"), 404, "channel not found")
    fails(await manage(admin, single, "get_key_status"), 400, "channel_id:")
    for fields, field in (({"action": "rotate"}, "action:"), ({"action": None}, "action:"),
                          ({"action": "disable_key"}, "key_index:"), ({"action": "delete_key"}, "key_index:"),
                          ({"action": "enable_key", "key_index": 2}, "key_index:"),
                          ({"action": "enable_key", "key_index": -1}, "key_index:"),
                          ({"action": "get_key_status", "status": 4}, "status:"),
                          ({"action": "get_key_status", "page": "1"}, "page:"),
                          ({"action": "get_key_status", "channel_id": 0}, "channel_id:")):
        fails(await admin.post("/api/channel/multi_key/manage", json={"channel_id": cid, **fields}), 400,
              field)
    fails(await admin.post("/api/channel/multi_key/manage", json={"action": "get_key_status"}), 400,
          "channel_id:")
    assert keys_in_db(app, await row_of(app, cid)) == KEYS[:2]  # type: ignore[arg-type]
