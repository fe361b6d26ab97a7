"""The tag routes (docs/api/channels.md#tags), over HTTP on every stack:

- `POST /api/channel/tag/disabled` and `/tag/enabled` set every channel of the tag to 2 / 1 with its
  abilities, answer how many changed, and route (or stop routing) at once;
- `PUT /api/channel/tag` changes only the fields that carry a value (absent, null and "" leave them),
  renames the tag (`new_tag`), sets the groups (`groups`), rebuilds the abilities, refuses bad values with
  a 400 naming the field as sent, and needs root to redirect a keyed channel's key (`header_override`);
- `GET /api/channel/tag/models?tag=` is the union of the tag's models in first-seen order;
- an empty or missing tag is a 400, a tag no channel has a 404.
"""

from __future__ import annotations

from models.routing import load_json
from tests.harness import Api, Running, add_user, logged_in
from tests.test_channels import abilities_of, admin_of, create, data_of, fails, routed, row_of


async def tagged(admin: Api) -> tuple[int, int, int]:
    [one] = await create(admin, name="one", tag="t1", models="m-a,m-b")
    [two] = await create(admin, name="two", tag="t1", models="m-b,m-c", status=2, priority=7)
    [other] = await create(admin, name="other", tag="t2", models="m-x")
    return one, two, other


async def test_disabling_and_enabling_a_tag(app: Running) -> None:
    admin = await admin_of(app)
    one, two, other = await tagged(admin)
    assert routed(app, "m-a") == one
    assert data_of(await admin.post("/api/channel/tag/disabled", json={"tag": " t1 "})) == 1  # two was off
    for cid in (one, two):
        row = await row_of(app, cid)
        assert row is not None and row.status == 2
        assert {a[2] for a in await abilities_of(app, cid)} == {False}
    assert load_json((await row_of(app, one)).other_info)["status_reason"] == "manually disabled"  # type: ignore[union-attr]
    assert routed(app, "m-a") is None and routed(app, "m-x") == other
    assert data_of(await admin.post("/api/channel/tag/disabled", json={"tag": "t1"})) == 0
    assert data_of(await admin.post("/api/channel/tag/enabled", json={"tag": "t1"})) == 2
    assert routed(app, "m-a") == one and routed(app, "m-c") == two
    assert {a[2] for a in await abilities_of(app, two)} == {True}
    for path in ("/api/channel/tag/disabled", "/api/channel/tag/enabled"):
        fails(await admin.post(path, json={"tag": "nope"}), 404, "tag not found")
        fails(await admin.post(path, json={"tag": " "}), 400, "tag:")
        fails(await admin.post(path, json={}), 400, "tag:")
        fails(await admin.post(path, json={"tag": 1}), 400, "tag:")


async def test_editing_a_tag_changes_only_the_fields_with_a_value(app: Running) -> None:
    admin = await admin_of(app)
    one, two, other = await tagged(admin)
    body = {"tag": "t1", "new_tag": "", "priority": None, "weight": 5, "models": " m-z , m-y ",
            "groups": "vip", "model_mapping": {"m-z": "m-up"}, "param_override": "", "header_override": None}
    assert data_of(await admin.put("/api/channel/tag", json=body)) == 2
    for cid, priority, status in ((one, 0, 1), (two, 7, 2)):
        row = await row_of(app, cid)
        assert row is not None
        assert (row.models, row.group, row.weight, row.priority, row.tag) == ("m-z,m-y", "vip", 5, priority,
                                                                               "t1")
        assert row.model_mapping == '{"m-z":"m-up"}' and row.status == status
        assert await abilities_of(app, cid) == {("vip", m, status == 1, priority, 5, "t1")
                                                for m in ("m-z", "m-y")}
    assert (await row_of(app, one)).name == "one"  # type: ignore[union-attr]
    assert routed(app, "m-z", "vip") == one and routed(app, "m-a") is None
    assert (await row_of(app, other)).models == "m-x"  # type: ignore[union-attr]

    assert data_of(await admin.put("/api/channel/tag", json={"tag": "t1", "new_tag": "t9"})) == 2
    assert {a[5] for a in await abilities_of(app, one)} == {"t9"}
    fails(await admin.put("/api/channel/tag", json={"tag": "t1", "weight": 1}), 404, "tag not found")
    for fields, field in (({"groups": " , "}, "groups:"), ({"new_tag": "n" * 65}, "new_tag:"),
                          ({"model_mapping": "[1]"}, "model_mapping:"), ({"weight": -1}, "weight:"),
                          ({"models": "m" * 256}, "models:"), ({"priority": "high"}, "priority:"),
                          ({"header_override": '{"X":1}'}, "header_override:"), ({"tag": ""}, "tag:")):
        fails(await admin.put("/api/channel/tag", json={"tag": "t9", **fields}), 400, field)
    assert (await row_of(app, one)).weight == 5  # type: ignore[union-attr]


async def test_an_empty_priority_or_weight_leaves_them_as_new_api_form_sends_it(app: Running) -> None:
    admin = await admin_of(app)
    one, two, _ = await tagged(admin)
    body = {"tag": "t1", "new_tag": "", "priority": "", "weight": "", "models": "m-q", "groups": ""}
    assert data_of(await admin.put("/api/channel/tag", json=body)) == 2
    for cid, priority in ((one, 0), (two, 7)):
        row = await row_of(app, cid)
        assert row is not None
        assert (row.models, row.priority, row.weight, row.group, row.tag) == ("m-q", priority, 0, "default",
                                                                               "t1")


async def test_redirecting_the_keys_of_a_tag_needs_root(app: Running) -> None:
    admin = await admin_of(app)
    one, two, _ = await tagged(admin)
    moved = {"tag": "t1", "header_override": {"X-Forwarded-Host": "elsewhere.example"}}
    fails(await admin.put("/api/channel/tag", json=moved), 403, "header_override:")
    assert (await row_of(app, one)).header_override == ""  # type: ignore[union-attr]
    await add_user(app.state, "root", role=100)
    root = await logged_in(app, "root")
    assert data_of(await root.put("/api/channel/tag", json=moved)) == 2
    assert (await row_of(app, two)).header_override == '{"X-Forwarded-Host":"elsewhere.example"}'  # type: ignore[union-attr]
    assert data_of(await admin.put("/api/channel/tag", json=moved)) == 2  # unchanged: allowed


async def test_the_models_of_a_tag_are_a_union_in_first_seen_order(app: Running) -> None:
    admin = await admin_of(app)
    await tagged(admin)
    await create(admin, name="three", tag="t1", models="m-d,m-a")
    assert data_of(await admin.get("/api/channel/tag/models", params={"tag": "t1"})) == "m-a,m-b,m-c,m-d"
    assert data_of(await admin.get("/api/channel/tag/models", params={"tag": "t2"})) == "m-x"
    fails(await admin.get("/api/channel/tag/models", params={"tag": "nope"}), 404, "tag not found")
    fails(await admin.get("/api/channel/tag/models"), 400, "tag:")
    fails(await admin.get("/api/channel/tag/models", params={"tag": "  "}), 400, "tag:")


async def test_a_tag_is_matched_case_sensitively(app: Running) -> None:
    """MariaDB's default collation makes `team` equal `Team`: each tag route acts on its own tag only."""
    admin = await admin_of(app)
    [lower] = await create(admin, name="lower", tag="team", models="m-a")
    [upper] = await create(admin, name="upper", tag="Team", models="m-b")
    assert data_of(await admin.post("/api/channel/tag/disabled", json={"tag": "team"})) == 1
    assert [(await row_of(app, cid)).status for cid in (lower, upper)] == [2, 1]  # type: ignore[union-attr]
    assert data_of(await admin.get("/api/channel/tag/models", params={"tag": "Team"})) == "m-b"
    assert data_of(await admin.put("/api/channel/tag", json={"tag": "Team", "new_tag": "crew"})) == 1
    assert [(await row_of(app, cid)).tag for cid in (lower, upper)] == ["team", "crew"]  # type: ignore[union-attr]
    fails(await admin.post("/api/channel/tag/enabled", json={"tag": "TEAM"}), 404, "tag not found")
