"""Listing and searching channels, and the model catalog (docs/api/channels.md#channel-routes), on every
stack.

- `GET /api/channel/` orders by priority desc, id desc (or id desc with `id_sort`), filters by status and
  type, pages, and answers `type_counts` that ignore only the type filter; `tag_mode` pages over the
  distinct non-empty tags (in tag order) with their channels;
- `GET /api/channel/search` matches the keyword as an id, a case-insensitive literal substring of the name
  or base URL, or the whole key (by digest, never a part of it), ANDed with group, model, tag, status and
  type; `tag` is the whole tag, case-sensitive on every database (MariaDB's collation would fold it);
- `GET /api/channel/models` is the built-in catalog, `models_enabled` the models of enabled channels;
- `catalog.capabilities` knows the TTS and moderation models and applies `ModelCapabilities` on top.
"""

from __future__ import annotations

from typing import Any

from server.components.catalog import CATALOG, capabilities
from tests.harness import Api, Running
from tests.test_channels import GEMINI, OPENAI, admin_of, create, data_of, fails


async def ids(api: Api, path: str, **params: Any) -> list[int]:
    return [c["id"] for c in data_of(await api.get(path, params=params))["items"]]


async def seed(admin: Api) -> dict[str, int]:
    made: dict[str, int] = {}
    specs: dict[str, dict[str, Any]] = {
        "low": {"priority": 0, "type": GEMINI, "tag": "beta", "base_url": "https://low.example.com"},
        "high": {"priority": 9, "type": OPENAI, "tag": "alpha", "models": "omni-moderation-latest",
                 "group": "vip"},
        "mid": {"priority": 5, "type": GEMINI, "tag": "alpha", "status": 2, "key": "AIza-Mid_%-key"},
        "plain": {"priority": 5, "type": 14, "models": "claude-x,gemini-2.5-pro", "group": "default,svip"},
    }
    for name, fields in specs.items():
        [made[name]] = await create(admin, name=f"chan-{name}", **fields)
    return made


async def test_list_orders_filters_pages_and_counts_types(app: Running) -> None:
    admin = await admin_of(app)
    c = await seed(admin)
    page = data_of(await admin.get("/api/channel/"))
    assert [x["id"] for x in page["items"]] == [c["high"], c["plain"], c["mid"], c["low"]]
    assert page["total"] == 4 and page["page"] == 1 and page["page_size"] == 10
    assert page["type_counts"] == {"1": 1, "14": 1, "24": 2}
    assert all(x["key"] == "" for x in page["items"])
    assert await ids(admin, "/api/channel/", id_sort="true") == sorted(c.values(), reverse=True)
    assert await ids(admin, "/api/channel/", p=2, page_size=3) == [c["low"]]
    assert await ids(admin, "/api/channel/", status="enabled") == [c["high"], c["plain"], c["low"]]
    assert await ids(admin, "/api/channel/", status="1") == [c["high"], c["plain"], c["low"]]
    assert await ids(admin, "/api/channel/", status="disabled") == [c["mid"]]
    assert await ids(admin, "/api/channel/", status="whatever") == [c["high"], c["plain"], c["mid"], c["low"]]
    typed = data_of(await admin.get("/api/channel/", params={"type": GEMINI, "status": "enabled"}))
    assert [x["id"] for x in typed["items"]] == [c["low"]] and typed["total"] == 1
    assert typed["type_counts"] == {"1": 1, "14": 1, "24": 1}  # status applies, type does not

    tags = data_of(await admin.get("/api/channel/", params={"tag_mode": "true"}))
    assert [x["id"] for x in tags["items"]] == [c["high"], c["mid"], c["low"]]  # alpha, then beta
    assert tags["total"] == 2 and tags["type_counts"] == {"1": 1, "14": 1, "24": 2}
    second = data_of(await admin.get("/api/channel/", params={"tag_mode": "1", "page_size": 1, "p": 2}))
    assert [x["id"] for x in second["items"]] == [c["low"]] and second["total"] == 2
    assert await ids(admin, "/api/channel/", tag_mode="true", id_sort="true", page_size=1) == sorted(
        [c["high"], c["mid"]], reverse=True)


async def test_search_by_id_text_key_group_model(app: Running) -> None:
    admin = await admin_of(app)
    c = await seed(admin)
    search = "/api/channel/search"
    assert await ids(admin, search, keyword=str(c["mid"])) == [c["mid"]]
    assert await ids(admin, search, keyword="CHAN-") == [c["high"], c["plain"], c["mid"], c["low"]]
    assert await ids(admin, search, keyword="low.EXAMPLE") == [c["low"]]
    assert await ids(admin, search, keyword="AIza-Mid_%-key") == [c["mid"]]  # the whole key
    assert await ids(admin, search, keyword="AIza-Mid") == []  # never a part of it
    assert await ids(admin, search, keyword="%") == []  # wildcards are literal
    assert await ids(admin, search, keyword="_") == []
    assert await ids(admin, search, group="vip") == [c["high"]]
    assert await ids(admin, search, group="svip") == [c["plain"]]
    assert await ids(admin, search, group="default", id_sort="true") == sorted(
        [c["plain"], c["mid"], c["low"]], reverse=True)
    assert await ids(admin, search, model="gemini-2.5") == [c["plain"], c["mid"], c["low"]]
    assert await ids(admin, search, model="pro,claude") == []
    assert await ids(admin, search, model="moderation", group="vip") == [c["high"]]
    assert await ids(admin, search, keyword="chan", status="disabled") == [c["mid"]]
    assert await ids(admin, search, keyword="chan", type=OPENAI) == [c["high"]]
    page = data_of(await admin.get(search, params={"keyword": "chan", "page_size": 2, "p": 2}))
    assert [x["id"] for x in page["items"]] == [c["mid"], c["low"]] and page["total"] == 4
    assert set(page) == {"items", "total", "page", "page_size"}
    assert await ids(admin, search, keyword="chan", tag_mode="true") == [c["high"], c["mid"], c["low"]]


async def test_search_by_tag_matches_the_whole_tag_exactly(app: Running) -> None:
    admin = await admin_of(app)
    c = await seed(admin)
    [upper] = await create(admin, name="chan-upper", tag="Alpha", priority=1)
    search = "/api/channel/search"
    assert await ids(admin, search, tag="alpha") == [c["high"], c["mid"]]
    assert await ids(admin, search, tag=" alpha ") == [c["high"], c["mid"]]  # trimmed, like the stored tag
    assert await ids(admin, search, tag="Alpha") == [upper]  # not folded on MariaDB
    assert await ids(admin, search, tag="alph") == []  # never a part of it
    assert await ids(admin, search, tag="alpha", status="enabled") == [c["high"]]
    assert await ids(admin, search, tag="alpha", type=GEMINI) == [c["mid"]]
    assert await ids(admin, search, tag="alpha", keyword="high") == [c["high"]]
    assert await ids(admin, search, tag="beta", tag_mode="true") == [c["low"]]
    assert await ids(admin, search, tag="") == [c["high"], c["plain"], c["mid"], upper, c["low"]]
    fails(await admin.get(search, params={"tag": "t" * 65}), 400, "tag:")


async def test_catalog_and_enabled_models(app: Running) -> None:
    admin = await admin_of(app)
    catalog = data_of(await admin.get("/api/channel/models"))
    assert {m["id"] for m in catalog} >= {"gemini-2.5-flash-preview-tts", "omni-moderation-latest"}
    assert all(set(m) == {"id", "object", "created", "owned_by"} and m["object"] == "model" for m in catalog)
    assert data_of(await admin.get("/api/channel/models_enabled")) == []
    await seed(admin)
    assert data_of(await admin.get("/api/channel/models_enabled")) == [
        "claude-x", "gemini-2.5-flash", "gemini-2.5-pro", "omni-moderation-latest"]


def test_capabilities_from_the_catalog_the_name_and_the_option() -> None:
    assert capabilities("gemini-2.5-flash-preview-tts", {}) == {"speech_output": True, "moderation": False}
    assert capabilities("gemini-2.5-pro-preview-tts", {})["speech_output"] is True
    assert capabilities("my-custom-tts-model", {})["speech_output"] is True
    assert capabilities("gemini-2.5-flash", {}) == {"speech_output": False, "moderation": False}
    for name in ("omni-moderation-latest", "omni-moderation-2024-09-26", "text-moderation-latest",
                 "text-moderation-stable"):
        assert capabilities(name, {}) == {"speech_output": False, "moderation": True}
    overrides = {"gemini-2.5-flash": {"speech_output": True}, "gemini-2.5-flash-preview-tts":
                 {"speech_output": False}, "x": {"speech_output": "yes"}}
    assert capabilities("gemini-2.5-flash", overrides)["speech_output"] is True
    assert capabilities("gemini-2.5-flash-preview-tts", overrides)["speech_output"] is False
    assert capabilities("x", overrides)["speech_output"] is False  # only booleans apply
    assert len({m.id for m in CATALOG}) == len(CATALOG)
