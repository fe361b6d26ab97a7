"""The console's log filters and the operator's dashboard (docs/api/logs.md#logs,
docs/api/logs.md#usage-data), over HTTP against the real app on SQLite, MariaDB+Redis and PostgreSQL+Redis,
with rows inserted straight into SQL (the `World` of tests/test_logs.py).

Proved here:
- `model_name_part` on `GET /api/log/`, `/self`, `/stat` and `/self/stat`: a part of the model name,
  ignoring case, taken literally (`%` and `_` match themselves), combined with the other filters, and
  `/self` still shows only the caller's rows; `request_id` filters the admin and the own lists exactly;
- `GET /api/data/top`: the users, API keys (with their owner) and models with the most consume quota in
  the window, their calls and tokens, most first, cut at `limit`; model names that differ in case are
  two models; every channel with a consume or an error log, its calls, errors, quota, and its name and
  type from the routing table ("" and 0 for a channel deleted since); other log types, rows outside the
  inclusive window and error logs without a channel do not count; the window defaults to the last 7 days;
- bad values of every new parameter are a 400 naming it; a start after the end names `start_timestamp`.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from core.enums import LogType
from tests.harness import Running, data_of
from tests.harness import fails as envelope_fails
from tests.test_logs import T0, world

fails = partial(envelope_fails, prefix=True)  # a 400 names its field first
DAY = 86400


async def test_model_name_part_and_request_id_filter_the_lists_and_stats(app: Running) -> None:
    w = await world(app)
    a_gpt = await w.add(model_name="gpt-4o", quota=1, request_id="req-x")
    a_mini = await w.add(model_name="GPT-4o-mini", quota=2, created_at=T0 + 1)
    a_under = await w.add(model_name="claude_3", quota=4, created_at=T0 + 2)
    a_dash = await w.add(model_name="claude-3", quota=8, created_at=T0 + 3)
    a_pct = await w.add(model_name="o1%pro", quota=16, created_at=T0 + 4, type=LogType.ERROR)
    b_gpt = await w.add(user_id=w.bob_id, model_name="gpt-4o", quota=32, request_id="req-x")

    async def listed(path: str = "/api/log/", api: Any = None, **params: Any) -> list[int]:
        page = data_of(await (api or w.admin).get(path, params=params))
        assert page["total"] == len(page["items"])
        return sorted(item["id"] if path == "/api/log/" else item["created_at"] for item in page["items"])

    assert await listed(model_name_part="GPT") == sorted([a_gpt, a_mini, b_gpt])
    assert await listed(model_name_part=" 4O-MINI ") == [a_mini]  # trimmed, case ignored
    assert await listed(model_name_part="_") == [a_under]  # `_` is no wildcard
    assert await listed(model_name_part="e_3") == [a_under]
    assert await listed(model_name_part="%") == [a_pct]  # nor is `%`
    assert await listed(model_name_part="claude") == sorted([a_under, a_dash])
    assert await listed(model_name_part="4o", username="bob") == [b_gpt]
    assert await listed(model_name_part="claude", type=LogType.ERROR) == []
    assert await listed(model_name_part="gpt", model_name="gpt-4o") == sorted([a_gpt, b_gpt])  # exact stays
    assert await listed(model_name_part="") == sorted([a_gpt, a_mini, a_under, a_dash, a_pct, b_gpt])
    assert await listed(model_name_part="gemini") == []
    # the own list: only the caller's rows, with the same rules
    assert await listed("/api/log/self", w.alice, model_name_part="GPT") == [T0, T0 + 1]
    assert await listed("/api/log/self", w.bob, model_name_part="GPT") == [T0]
    assert await listed("/api/log/self", w.alice, model_name_part="%") == [T0 + 4]
    # request ids: exact, on both lists; an own list never shows another user's row of the same id
    assert await listed(request_id="req-x") == sorted([a_gpt, b_gpt])
    assert await listed("/api/log/self", w.alice, request_id="req-x") == [T0]
    assert await listed("/api/log/self", w.alice, request_id="REQ-X") == []
    assert await listed("/api/log/self", w.bob, request_id="req-x") == [T0]

    async def quota(path: str, api: Any, **params: Any) -> int:
        return int(data_of(await api.get(path, params=params))["quota"])

    assert await quota("/api/log/stat", w.admin, model_name_part="GPT-4O") == 1 + 2 + 32
    assert await quota("/api/log/stat", w.admin, model_name_part="%") == 0  # an error log: no spend
    assert await quota("/api/log/stat", w.admin, model_name_part="claude", username="alice") == 12
    assert await quota("/api/log/self/stat", w.alice, model_name_part="gpt") == 3
    assert await quota("/api/log/self/stat", w.bob, model_name_part="_3") == 0

    for path in ("/api/log/", "/api/log/self", "/api/log/stat", "/api/log/self/stat"):
        fails(await w.admin.get(path, params={"model_name_part": "a\x00b"}), 400, "model_name_part")
        fails(await w.admin.get(path, params={"model_name_part": "m" * 256}), 400, "model_name_part")
    for path in ("/api/log/", "/api/log/self"):
        fails(await w.admin.get(path, params={"request_id": "r" * 256}), 400, "request_id")


async def test_top_spenders_and_channel_activity(app: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    w = await world(app)
    ch, gone = w.channel_id, w.channel_id + 1000  # `gone`: no such channel in the routing table
    alice, bob = w.alice_id, w.bob_id
    await w.add(token_id=11, token_name="k-a1", model_name="GPT-4o", quota=100, prompt_tokens=10,
                completion_tokens=5, channel=ch)
    await w.add(token_id=11, token_name="k-a1", model_name="gpt-4o", quota=50, prompt_tokens=1,
                completion_tokens=1, channel=ch, created_at=T0 + 100)  # on the window's end
    await w.add(token_id=12, token_name="k-a2", model_name="gpt-4o", quota=30, channel=gone)
    await w.add(user_id=bob, token_id=21, token_name="k-b", model_name="claude", quota=500,
                prompt_tokens=100, completion_tokens=50, channel=ch)
    await w.add(user_id=bob, type=LogType.ERROR, model_name="claude", channel=ch)
    await w.add(user_id=bob, type=LogType.ERROR, model_name="claude", channel=gone)
    await w.add(type=LogType.ERROR, model_name="claude")  # no channel tried: counts for none
    await w.add(type=LogType.TOPUP, quota=10_000)
    await w.add(type=LogType.REFUND, quota=7_000, channel=ch)
    # rows of no counted type make no group: a user, key, model and channel seen only in them
    await w.add(user_id=bob + 100, username="carol", type=LogType.TOPUP, token_id=99, model_name="m-topup",
                quota=20_000, channel=gone + 1)
    await w.add(user_id=bob + 100, username="carol", type=LogType.MANAGE, channel=gone + 2)
    await w.add(token_id=11, model_name="gpt-4o", quota=9_999, channel=ch, created_at=T0 - 1)
    await w.add(token_id=11, model_name="gpt-4o", quota=9_999, channel=ch, created_at=T0 + 101)
    window = {"start_timestamp": T0, "end_timestamp": T0 + 100}

    top = data_of(await w.admin.get("/api/data/top", params=window))
    assert (top["start_timestamp"], top["end_timestamp"]) == (T0, T0 + 100)
    assert top["users"] == [
        {"user_id": bob, "username": "bob", "quota": 500, "calls": 1, "prompt_tokens": 100,
         "completion_tokens": 50},
        {"user_id": alice, "username": "alice", "quota": 180, "calls": 3, "prompt_tokens": 11,
         "completion_tokens": 6},
    ]
    assert [(k["user_id"], k["username"], k["token_id"], k["token_name"], k["quota"], k["calls"])
            for k in top["keys"]] == [(bob, "bob", 21, "k-b", 500, 1), (alice, "alice", 11, "k-a1", 150, 2),
                                      (alice, "alice", 12, "k-a2", 30, 1)]
    assert set(top["keys"][1]) == {"user_id", "username", "token_id", "token_name", "quota", "calls",
                                   "prompt_tokens", "completion_tokens"}
    assert [(m["model_name"], m["quota"], m["calls"], m["prompt_tokens"]) for m in top["models"]] == [
        ("claude", 500, 1, 100), ("GPT-4o", 100, 1, 10), ("gpt-4o", 80, 2, 1)]  # case tells models apart
    assert top["channels"] == [
        {"channel": ch, "channel_name": "primary-openai", "channel_type": 1, "calls": 3, "errors": 1,
         "quota": 650},
        {"channel": gone, "channel_name": "", "channel_type": 0, "calls": 1, "errors": 1, "quota": 30},
    ]

    short = data_of(await w.admin.get("/api/data/top", params=window | {"limit": 1}))
    assert [u["username"] for u in short["users"]] == ["bob"] and len(short["keys"]) == 1
    assert [m["model_name"] for m in short["models"]] == ["claude"]
    assert short["channels"] == top["channels"]  # every channel, whatever the limit
    quiet = data_of(await w.admin.get("/api/data/top", params={"start_timestamp": 1, "end_timestamp": 2}))
    assert (quiet["users"], quiet["keys"], quiet["models"], quiet["channels"]) == ([], [], [], [])

    # the default window: the last 7 days up to now
    now = T0 + 30 * DAY
    monkeypatch.setattr(app.clock, "now", lambda: float(now))
    await w.add(model_name="recent", quota=7, created_at=now - 10, channel=ch)
    await w.add(model_name="old", quota=9, created_at=now - 8 * DAY, channel=ch)
    recent = data_of(await w.admin.get("/api/data/top"))
    assert (recent["start_timestamp"], recent["end_timestamp"]) == (now - 7 * DAY, now)
    assert [m["model_name"] for m in recent["models"]] == ["recent"]
    assert [(c["channel"], c["calls"]) for c in recent["channels"]] == [(ch, 1)]
    since = data_of(await w.admin.get("/api/data/top", params={"start_timestamp": T0 + 101}))
    assert [(m["model_name"], m["quota"]) for m in since["models"]] == [("gpt-4o", 9_999), ("old", 9),
                                                                          ("recent", 7)]

    # bad input: a 400 naming the parameter; users may not look
    for bad in ("0", "51", "-1", "abc", "1.5", "99999999999999999999"):
        fails(await w.admin.get("/api/data/top", params={"limit": bad}), 400, "limit")
    assert len(data_of(await w.admin.get("/api/data/top", params=window | {"limit": 50}))["keys"]) == 3
    for name in ("start_timestamp", "end_timestamp"):
        fails(await w.admin.get("/api/data/top", params={name: "-5"}), 400, name)
    fails(await w.admin.get("/api/data/top", params={"start_timestamp": T0 + 1, "end_timestamp": T0}), 400,
          "start_timestamp")
    fails(await w.admin.get("/api/data/top", params={"start_timestamp": now + 1}), 400, "start_timestamp")
    fails(await w.alice.get("/api/data/top"), 403)
