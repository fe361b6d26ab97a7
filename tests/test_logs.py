"""The log routes follow docs/api/logs.md#logs on every stack.

Proved here, over HTTP against the real app on SQLite, MariaDB+Redis and PostgreSQL+Redis, with rows
inserted straight into SQL for two users:
- `GET /api/log/` applies each exact filter (case-sensitive text, `type` 0 = all, `channel` 0 = all),
  inclusive time bounds, newest first (`created_at` desc, then `id` desc), pages with the right totals,
  and shows every E.1 field plus `channel_name` (from the routing table) and never `ref`;
- `GET /api/log/self` shows only the caller's rows, sanitized: `channel` 0, no `channel_name`,
  `other.admin_info` removed, `id` = the row's position; `username` and `channel` are not filters there;
- `GET /api/log/search` and `/self/search`: exact names or a literal, case-insensitive substring of
  `content` (`%`, `_` and `\\` match themselves); empty keyword → all; the self search is limited to
  10 requests per 60 s per user (429 with `Retry-After`);
- `GET /api/log/stat` and `/self/stat`: `quota` sums consume rows only (in the window), `rpm` and `tpm`
  count consume rows of the last 60 s (window ignored);
- `DELETE /api/log/` deletes rows older than `target_timestamp` (more than one batch), answers the count
  and records a system log with the cutoff and the count;
- a bad number is a 400 naming the parameter, never a 500.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pytest
from sqlalchemy import func, select

from core.enums import LogType
from models.channels import Channel
from models.logs import Log
from server.logs.service import DELETE_BATCH
from tests.harness import Api, Running, add_user, data_of, logged_in
from tests.harness import fails as envelope_fails

fails = partial(envelope_fails, prefix=True)  # a 400 names its field first

LOG_FIELDS = {
    "id", "user_id", "created_at", "type", "content", "username", "token_name", "model_name", "quota",
    "prompt_tokens", "completion_tokens", "use_time", "is_stream", "channel", "channel_name", "token_id",
    "group", "ip", "request_id", "other",
}
SELF_FIELDS = LOG_FIELDS - {"channel_name"}
T0 = 1_700_000_000  # seeded rows live around this time (far from "now", so stat's last 60 s sees none)


# ---- helpers (local to this file) -------------------------------------------------------------------


class World:
    """An admin and two common users (alice, bob), each logged in, and a named channel."""

    def __init__(self, app: Running, admin: Api, alice: Api, bob: Api, alice_id: int, bob_id: int,
                 channel_id: int) -> None:
        self.app, self.admin, self.alice, self.bob = app, admin, alice, bob
        self.alice_id, self.bob_id, self.channel_id = alice_id, bob_id, channel_id

    async def add(self, **fields: Any) -> int:
        """Insert one log row (defaults: a consume row of alice at T0) and return its id."""
        fields.setdefault("user_id", self.alice_id)
        fields.setdefault("username", "alice" if fields["user_id"] == self.alice_id else "bob")
        fields.setdefault("type", LogType.CONSUME)
        fields.setdefault("created_at", T0)
        if isinstance(fields.get("other"), dict):
            fields["other"] = json.dumps(fields["other"])
        row = Log(**fields)
        async with self.app.state.db.transaction() as tx:
            tx.add(row)
            await tx.flush()
            return row.id

    async def count(self, *where: Any) -> int:
        async with self.app.state.db.transaction() as tx:
            return int(await tx.scalar(select(func.count()).select_from(Log).where(*where)) or 0)


async def world(app: Running) -> World:
    await add_user(app.state, "admin", role=10)
    alice_id = await add_user(app.state, "alice")
    bob_id = await add_user(app.state, "bob")
    async with app.state.db.transaction() as tx:
        channel = Channel(name="primary-openai", type=1, created_time=T0)
        tx.add(channel)
        await tx.flush()
        channel_id = channel.id
    await app.state.channels.reload()
    admin, alice, bob = [await logged_in(app, name) for name in ("admin", "alice", "bob")]
    return World(app, admin, alice, bob, alice_id, bob_id, channel_id)


def ids(page: dict[str, Any]) -> list[int]:
    return [item["id"] for item in page["items"]]


# ---- admin list ---------------------------------------------------------------------------------------

async def test_admin_list_filters_orders_and_pages(app: Running) -> None:
    w = await world(app)
    a1 = await w.add(created_at=T0, token_name="key-a", model_name="gpt-4o", group="default",
                     request_id="req-1", channel=w.channel_id, quota=10, prompt_tokens=3, completion_tokens=4,
                     use_time=2, is_stream=True, token_id=7, ip="10.0.0.1", content="hello",
                     other={"model_ratio": 1.5, "admin_info": {"admin_id": 1}})
    a2 = await w.add(created_at=T0 + 10, token_name="Key-A", model_name="gpt-4o-mini", group="vip",
                     request_id="req-2", channel=99)
    a3 = await w.add(created_at=T0 + 10, type=LogType.TOPUP, token_name="key-a", model_name="gpt-4o")
    b1 = await w.add(user_id=w.bob_id, created_at=T0 + 20, token_name="key-b", model_name="gpt-4o",
                     group="default", request_id="req-3", channel=w.channel_id)
    b2 = await w.add(user_id=w.bob_id, created_at=T0 + 30, type=LogType.MANAGE, username="Bob")

    everything = data_of(await w.admin.get("/api/log/"))
    assert set(everything) == {"items", "total", "page", "page_size"}
    assert everything["total"] == 5
    # newest first; equal created_at → higher id first
    assert ids(everything) == [b2, b1, max(a2, a3), min(a2, a3), a1]
    for item in everything["items"]:
        assert set(item) == LOG_FIELDS, item
    first = everything["items"][-1]
    assert first == {
        "id": a1, "user_id": w.alice_id, "created_at": T0, "type": LogType.CONSUME, "content": "hello",
        "username": "alice", "token_name": "key-a", "model_name": "gpt-4o", "quota": 10, "prompt_tokens": 3,
        "completion_tokens": 4, "use_time": 2, "is_stream": True, "channel": w.channel_id,
        "channel_name": "primary-openai", "token_id": 7, "group": "default", "ip": "10.0.0.1",
        "request_id": "req-1", "other": json.dumps({"model_ratio": 1.5, "admin_info": {"admin_id": 1}}),
    }
    by_id = {item["id"]: item for item in everything["items"]}
    assert by_id[a2]["channel_name"] == ""  # unknown channel
    assert by_id[b2]["channel_name"] == "" and by_id[b2]["other"] == ""

    async def listed(**params: Any) -> list[int]:
        page = data_of(await w.admin.get("/api/log/", params=params))
        assert page["total"] == len(page["items"])
        return sorted(ids(page))

    assert await listed(type=0) == sorted([a1, a2, a3, b1, b2])
    assert await listed(type=LogType.CONSUME) == sorted([a1, a2, b1])
    assert await listed(type=LogType.TOPUP) == [a3]
    assert await listed(type=LogType.ERROR) == []
    assert await listed(username="alice") == sorted([a1, a2, a3])
    assert await listed(username="bob") == [b1]  # exact and case-sensitive: "Bob" is another name
    assert await listed(username="Bob") == [b2]
    assert await listed(username="ali") == []
    assert await listed(token_name="key-a") == sorted([a1, a3])
    assert await listed(token_name="Key-A") == [a2]
    assert await listed(model_name="gpt-4o") == sorted([a1, a3, b1])
    assert await listed(model_name="gpt-4o", username="bob") == [b1]
    assert await listed(channel=w.channel_id) == sorted([a1, b1])
    assert await listed(channel=0) == sorted([a1, a2, a3, b1, b2])
    assert await listed(group="default") == sorted([a1, b1])
    assert await listed(group="vip") == [a2]
    assert await listed(request_id="req-2") == [a2]
    assert await listed(request_id=" req-2 ") == [a2]  # trimmed
    assert await listed(username="", token_name="") == sorted([a1, a2, a3, b1, b2])
    # inclusive bounds, 0 = open
    assert await listed(start_timestamp=T0 + 10) == sorted([a2, a3, b1, b2])
    assert await listed(end_timestamp=T0 + 10) == sorted([a1, a2, a3])
    assert await listed(start_timestamp=T0 + 10, end_timestamp=T0 + 20) == sorted([a2, a3, b1])
    assert await listed(start_timestamp=T0 + 11, end_timestamp=T0 + 19) == []
    assert await listed(start_timestamp=0, end_timestamp=0) == sorted([a1, a2, a3, b1, b2])
    assert await listed(start_timestamp=T0 + 30, end_timestamp=T0) == []

    # paging: totals before paging, pages in the same order
    page1 = data_of(await w.admin.get("/api/log/", params={"page_size": 2}))
    page3 = data_of(await w.admin.get("/api/log/", params={"page_size": 2, "p": 3}))
    beyond = data_of(await w.admin.get("/api/log/", params={"page_size": 2, "p": 9}))
    assert (page1["total"], page1["page"], page1["page_size"]) == (5, 1, 2)
    assert ids(page1) == ids(everything)[:2] and ids(page3) == ids(everything)[4:]
    assert beyond["items"] == [] and beyond["total"] == 5
    filtered = data_of(await w.admin.get("/api/log/", params={"username": "alice", "page_size": 2, "p": 2}))
    assert filtered["total"] == 3 and ids(filtered) == [a1]


async def test_admin_list_pages_through_many_rows(app: Running) -> None:
    w = await world(app)
    async with app.state.db.transaction() as tx:
        for n in range(25):
            tx.add(Log(user_id=w.alice_id, username="alice", type=LogType.CONSUME, created_at=T0 + n % 5))
    seen: list[tuple[int, int]] = []
    for p in (1, 2, 3):
        page = data_of(await w.admin.get("/api/log/", params={"p": p}))
        assert page["total"] == 25
        seen += [(item["created_at"], item["id"]) for item in page["items"]]
    assert len(seen) == 25 and seen == sorted(seen, reverse=True)


# ---- self list ----------------------------------------------------------------------------------------

async def test_self_list_shows_own_rows_sanitized_with_positional_ids(app: Running) -> None:
    w = await world(app)
    other = {"model_ratio": 2, "group_ratio": 1, "admin_info": {"admin_id": 1, "admin_username": "root"}}
    a1 = await w.add(created_at=T0, channel=w.channel_id, other=other, token_name="k1", model_name="m1",
                     content="first")
    billing = {"cache_read_tokens": 40, "cache_write_tokens": 12, "cache_write_1h_tokens": 2,
               "cache_creation_ratio": 1.25, "usage_estimated": False, "route": "messages",
               "converted_from": "anthropic", "converted_to": "openai", "channels_tried": [7]}
    await w.add(created_at=T0 + 1, channel=w.channel_id, other="", type=LogType.MANAGE)
    await w.add(created_at=T0 + 2, channel=w.channel_id, other={"frt": 5, **billing}, token_name="k2",
                group="vip")
    await w.add(user_id=w.bob_id, created_at=T0 + 3, channel=w.channel_id, other=other)

    mine = data_of(await w.alice.get("/api/log/self"))
    assert mine["total"] == 3
    assert ids(mine) == [1, 2, 3]
    for item in mine["items"]:
        assert set(item) == SELF_FIELDS, item
        assert item["user_id"] == w.alice_id and item["channel"] == 0
        assert "admin_info" not in item["other"]
    assert [item["created_at"] for item in mine["items"]] == [T0 + 2, T0 + 1, T0]
    oldest = mine["items"][2]
    assert json.loads(oldest["other"]) == {"model_ratio": 2, "group_ratio": 1}
    assert (oldest["content"], oldest["token_name"], oldest["model_name"]) == ("first", "k1", "m1")
    assert mine["items"][1]["other"] == ""
    # the whole billing of their own call (cache counts, estimate, conversion), never the channels tried
    shown = {k: v for k, v in billing.items() if k != "channels_tried"}
    assert json.loads(mine["items"][0]["other"]) == {"frt": 5, **shown}

    # the position continues across pages
    second = data_of(await w.alice.get("/api/log/self", params={"page_size": 2, "p": 2}))
    assert second["total"] == 3 and ids(second) == [3]
    assert second["items"][0]["created_at"] == T0
    # the admin still sees the real id, the channel and the admin info
    admin_row = next(i for i in data_of(await w.admin.get("/api/log/"))["items"] if i["id"] == a1)
    assert admin_row["channel"] == w.channel_id and "admin_info" in json.loads(admin_row["other"])

    # filters of /self; `username` and `channel` are not among them
    async def own(**params: Any) -> list[int]:
        return [i["created_at"] for i in data_of(await w.alice.get("/api/log/self", params=params))["items"]]

    assert await own(token_name="k2") == [T0 + 2]
    assert await own(type=LogType.MANAGE) == [T0 + 1]
    assert await own(group="vip") == [T0 + 2]
    assert await own(start_timestamp=T0 + 1, end_timestamp=T0 + 2) == [T0 + 2, T0 + 1]
    assert await own(username="bob") == [T0 + 2, T0 + 1, T0]
    assert await own(channel=12345) == [T0 + 2, T0 + 1, T0]
    assert await own(model_name="m1") == [T0]
    bobs = data_of(await w.bob.get("/api/log/self"))
    assert bobs["total"] == 1 and bobs["items"][0]["user_id"] == w.bob_id


# ---- search -------------------------------------------------------------------------------------------

async def test_admin_search_matches_names_exactly_or_content_literally(app: Running) -> None:
    w = await world(app)
    r_user = await w.add(content="nothing special")  # username alice
    r_token = await w.add(user_id=w.bob_id, token_name="deploy", content="x")
    r_model = await w.add(user_id=w.bob_id, model_name="claude-3", content="y")
    r_pct = await w.add(content="discount 100% applied", created_at=T0 + 1)
    r_plain = await w.add(content="discount 1000 applied", created_at=T0 + 2)
    r_under = await w.add(content="a_b and a\\b", created_at=T0 + 3)
    r_case = await w.add(content="Rate LIMIT reached", created_at=T0 + 4)

    async def found(keyword: str) -> list[int]:
        page = data_of(await w.admin.get("/api/log/search", params={"keyword": keyword}))
        assert page["total"] == len(page["items"])
        return sorted(ids(page))

    everything = sorted([r_user, r_token, r_model, r_pct, r_plain, r_under, r_case])
    assert await found("") == everything
    assert await found("   ") == everything
    assert await found("alice") == sorted([r_user, r_pct, r_plain, r_under, r_case])
    assert await found("deploy") == [r_token]
    assert await found("claude-3") == [r_model]
    assert await found("claude") == []  # names are matched exactly, not as substrings
    assert await found("special") == [r_user]
    assert await found("100%") == [r_pct]  # `%` is literal
    assert await found("%") == [r_pct]
    assert await found("a_b") == [r_under]  # `_` is literal
    assert await found("_") == [r_under]
    assert await found("a\\b") == [r_under]
    assert await found("rate limit") == [r_case]  # content is matched ignoring case
    page = data_of(await w.admin.get("/api/log/search", params={"keyword": "alice", "page_size": 2}))
    assert page["total"] == 5 and ids(page) == [r_case, r_under]
    assert all("channel_name" in item for item in page["items"])


async def test_self_search_is_own_rows_and_rate_limited(app: Running) -> None:
    w = await world(app)
    mine = await w.add(token_name="deploy", content="alpha", channel=w.channel_id,
                       other={"admin_info": {"admin_id": 1}, "frt": 1})
    await w.add(model_name="gpt-4o", content="beta 50%", created_at=T0 + 1)
    await w.add(user_id=w.bob_id, token_name="deploy", content="alpha")
    assert mine

    async def found(keyword: str) -> list[int]:
        page = data_of(await w.alice.get("/api/log/self/search", params={"keyword": keyword}))
        for item in page["items"]:
            assert set(item) == SELF_FIELDS and item["user_id"] == w.alice_id and item["channel"] == 0
            assert "admin_info" not in item["other"]
        assert page["total"] == len(page["items"])
        return [item["created_at"] for item in page["items"]]

    assert await found("deploy") == [T0]
    assert await found("gpt-4o") == [T0 + 1]
    assert await found("ALPHA") == [T0]
    assert await found("%") == [T0 + 1]
    assert await found("alice") == []  # the username is not a search field here
    assert await found("") == [T0 + 1, T0]
    positional = data_of(await w.alice.get("/api/log/self/search", params={"keyword": "", "p": 2, "ps": 1}))
    assert ids(positional) == [2]
    # 10 per 60 s per user: 7 used above; bob has his own allowance
    for _ in range(3):
        data_of(await w.alice.get("/api/log/self/search", params={"keyword": "x"}))
    refused = await w.alice.get("/api/log/self/search", params={"keyword": "x"})
    fails(refused, 429)
    assert int(refused.headers["Retry-After"]) >= 1
    data_of(await w.bob.get("/api/log/self/search", params={"keyword": "x"}))


# ---- stat ---------------------------------------------------------------------------------------------

async def test_stat_sums_consume_quota_and_counts_the_last_minute(app: Running,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    w = await world(app)
    now = T0 + 100_000
    monkeypatch.setattr(app.clock, "now", lambda: float(now))
    await w.add(created_at=T0, quota=100, prompt_tokens=1, completion_tokens=1, model_name="m")
    await w.add(created_at=T0 + 50, quota=200, model_name="n", channel=w.channel_id)
    await w.add(created_at=T0 + 50, type=LogType.TOPUP, quota=5000)
    await w.add(created_at=T0 + 50, type=LogType.MANAGE, quota=7000)
    # the last 60 s: from now - 60 on
    await w.add(created_at=now - 60, quota=30, prompt_tokens=10, completion_tokens=5, model_name="m")
    await w.add(created_at=now - 5, quota=40, prompt_tokens=20, completion_tokens=1, model_name="n",
                channel=w.channel_id)
    await w.add(created_at=now - 61, quota=50, prompt_tokens=1000, completion_tokens=1000)  # not recent
    await w.add(created_at=now - 5, type=LogType.ERROR, quota=60, prompt_tokens=1000)  # not consume
    await w.add(user_id=w.bob_id, created_at=now - 1, quota=1000, prompt_tokens=100, completion_tokens=100)

    async def stat(api: Api, path: str, **params: Any) -> dict[str, int]:
        data = data_of(await api.get(path, params=params))
        assert set(data) == {"quota", "rpm", "tpm"}
        return dict(data)

    admin_all = await stat(w.admin, "/api/log/stat")
    assert admin_all == {"quota": 100 + 200 + 30 + 40 + 50 + 1000, "rpm": 3, "tpm": 15 + 21 + 200}
    # the window limits quota only
    assert await stat(w.admin, "/api/log/stat", start_timestamp=T0, end_timestamp=T0 + 50) == {
        "quota": 300, "rpm": 3, "tpm": 236}
    assert await stat(w.admin, "/api/log/stat", end_timestamp=T0 - 1) == {"quota": 0, "rpm": 3, "tpm": 236}
    # the other filters limit everything
    assert await stat(w.admin, "/api/log/stat", username="alice") == {
        "quota": 420, "rpm": 2, "tpm": 36}
    assert await stat(w.admin, "/api/log/stat", model_name="n") == {"quota": 240, "rpm": 1, "tpm": 21}
    assert await stat(w.admin, "/api/log/stat", channel=w.channel_id) == {"quota": 240, "rpm": 1, "tpm": 21}
    assert await stat(w.admin, "/api/log/stat", username="nobody") == {"quota": 0, "rpm": 0, "tpm": 0}
    # `type` is not a stat filter: always consume
    assert (await stat(w.admin, "/api/log/stat", type=LogType.TOPUP))["quota"] == admin_all["quota"]

    assert await stat(w.alice, "/api/log/self/stat") == {"quota": 420, "rpm": 2, "tpm": 36}
    assert await stat(w.alice, "/api/log/self/stat", username="bob", channel=w.channel_id) == {
        "quota": 420, "rpm": 2, "tpm": 36}
    assert await stat(w.alice, "/api/log/self/stat", model_name="m", start_timestamp=T0 + 1) == {
        "quota": 30, "rpm": 1, "tpm": 15}
    assert await stat(w.bob, "/api/log/self/stat") == {"quota": 1000, "rpm": 1, "tpm": 200}


# ---- delete -------------------------------------------------------------------------------------------

async def test_delete_removes_older_rows_in_batches_and_logs_it(app: Running) -> None:
    w = await world(app)
    old = DELETE_BATCH + 5
    async with app.state.db.transaction() as tx:
        for n in range(old):
            tx.add(Log(user_id=w.alice_id, username="alice", type=LogType.CONSUME, created_at=T0 - 1 - n % 3))
    kept = [await w.add(created_at=T0), await w.add(user_id=w.bob_id, created_at=T0 + 5)]

    assert data_of(await w.admin.delete("/api/log/", params={"target_timestamp": T0})) == old
    assert await w.count(Log.type != LogType.SYSTEM) == 2
    assert await w.count(Log.id.in_(kept)) == 2
    async with app.state.db.transaction() as tx:
        system = (await tx.scalars(select(Log).where(Log.type == LogType.SYSTEM))).all()
    assert len(system) == 1
    entry = system[0]
    assert str(old) in entry.content and str(T0) in entry.content
    assert json.loads(entry.other) == {"target_timestamp": T0, "deleted": old}
    assert entry.username == "admin" and entry.created_at >= T0

    # nothing older left: count 0, still recorded
    assert data_of(await w.admin.delete("/api/log/", params={"target_timestamp": T0})) == 0
    assert await w.count(Log.type == LogType.SYSTEM) == 2
    # the cutoff is exclusive
    assert data_of(await w.admin.delete("/api/log/", params={"target_timestamp": T0 + 1})) == 1
    assert await w.count(Log.id.in_(kept)) == 1


async def test_delete_requires_a_positive_target_timestamp(app: Running) -> None:
    w = await world(app)
    await w.add(created_at=T0)
    fails(await w.admin.delete("/api/log/"), 400, "target_timestamp")
    for bad in ("", "0", "-5", "abc", "1.5", "1e9", "99999999999999999999", "0x10"):
        fails(await w.admin.delete("/api/log/", params={"target_timestamp": bad}), 400, "target_timestamp")
    assert await w.count() == 1
    fails(await w.alice.delete("/api/log/", params={"target_timestamp": T0 + 1}), 403)
    assert await w.count() == 1


# ---- bad input ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/api/log/", "/api/log/self", "/api/log/stat", "/api/log/self/stat"])
async def test_bad_numbers_are_400_naming_the_parameter(app: Running, path: str) -> None:
    await add_user(app.state, "admin", role=10)
    admin = await logged_in(app, "admin")
    names = ["start_timestamp", "end_timestamp"]
    if "stat" not in path:
        names.append("type")
    if "self" not in path:
        names.append("channel")
    for name in names:
        for bad in ("abc", "1.5", "-1", "1e3", "99999999999999999999", "١٢"):
            fails(await admin.get(path, params={name: bad}), 400, name)
    if "stat" not in path:
        fails(await admin.get(path, params={"type": 2**31}), 400, "type")
        assert data_of(await admin.get(path, params={"type": 2**31 - 1}))["total"] == 0
    # text with control characters is refused by name, never reaches the database
    fails(await admin.get(path, params={"model_name": "a\x00b"}), 400, "model_name")
    # ignored parameters are not parsed
    if "self" in path:
        data_of(await admin.get(path, params={"channel": "abc"}))
    if "stat" in path:
        data_of(await admin.get(path, params={"type": "abc", "request_id": "\x00"}))


async def test_search_keywords_never_fail(app: Running) -> None:
    w = await world(app)
    await w.add(content="ok")
    for keyword in ("'; drop table logs; --", "\\", "%%", "__", "é", "💡", "ok" * 100):
        data_of(await w.admin.get("/api/log/search", params={"keyword": keyword}))
        data_of(await w.alice.get("/api/log/self/search", params={"keyword": keyword}))
    fails(await w.admin.get("/api/log/search", params={"keyword": "a\x00"}), 400, "keyword")
    fails(await w.admin.get("/api/log/search", params={"keyword": "k" * 300}), 400, "keyword")
