"""`KeyDirectory`, the cached view of API keys the gateway reads on every model call
(docs/api/accounts.md#api-keys).

Proved here:
- `lookup` accepts the key with or without `sk-`, answers None for anything that is not 48
  `[A-Za-z0-9]` without touching the cache or SQL, and returns deleted keys marked `deleted`;
- an edit, a disable or a delete is seen by the node that made it at once, and by a second node sharing
  the database and Redis within 1 s (invalidation broadcast);
- `mark_status` persists expired / exhausted only from enabled;
- `touch` + flush writes `accessed_time` in one batch, also when the flusher is stopped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import select

from models.keys import ApiKey
from server.components.keys import KeyState
from server.keys.service import new_key
from tests.harness import Api, Running, add_user, logged_in


async def user_api(app: Running, name: str = "alice") -> Api:
    await add_user(app.state, name)
    return await logged_in(app, name)


async def create(api: Api, **fields: Any) -> dict[str, Any]:
    response = await api.post("/api/token/", json=fields)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


async def put(api: Api, path: str = "/api/token/", **fields: Any) -> None:
    response = await api.put(path, json=fields)
    assert response.status_code == 200, response.text


async def accessed(app: Running, key_id: int) -> int:
    async with app.state.db.transaction() as tx:
        value = await tx.scalar(select(ApiKey.accessed_time).where(ApiKey.id == key_id))
    assert value is not None
    return int(value)


async def eventually(check: Callable[[], Awaitable[bool]], seconds: float = 1.0) -> bool:
    """Whether `check` holds within `seconds` (bounds a lost broadcast; no speed is asserted)."""
    for _ in range(int(seconds / 0.05) + 1):
        if await check():
            return True
        await asyncio.sleep(0.05)
    return await check()


async def test_lookup_returns_the_key_state(app: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    alice = await user_api(app)
    token = await create(alice, name="gw", expired_time=app.state.clock.now_s() + 600, unlimited_quota=True,
                         model_limits_enabled=True, model_limits="m1, m2", allow_ips="10.0.0.0/8",
                         group="vip")
    keys = app.state.keys
    state = await keys.lookup(token["key"])
    bare = token["key"].removeprefix("sk-")
    assert state == KeyState(
        id=token["id"], user_id=alice.user_id or 0, name="gw", status=1, expired_time=token["expired_time"],
        unlimited_quota=True, model_limits_enabled=True, model_limits=("m1", "m2"), allow_ips="10.0.0.0/8",
        group="vip", deleted=False, digest=app.state.box.digest(bare),
    )
    assert await keys.lookup(bare) == state
    assert await keys.lookup(token["key"]) == state  # from the cache now
    assert await keys.lookup(new_key()) is None
    assert await keys.lookup(f"sk-{new_key()}") is None

    async def no_cache(*_args: Any) -> None:
        raise AssertionError("a malformed key must not reach the cache")

    monkeypatch.setattr(keys.cache, "get", no_cache)
    for raw in ("", "sk-", bare[:47], bare + "x", f"sk-{bare}-7", f"Bearer {bare}", f"SK-{bare}",
                f"sk-sk-{bare}", bare[:47] + "é", bare[:47] + "_", f" {bare}", "x" * 10_000):
        assert await keys.lookup(raw) is None, raw
    monkeypatch.undo()

    # an edit on this node is seen at once
    await put(alice, id=token["id"], name="renamed", model_limits="", group="")
    fresh = await keys.lookup(token["key"])
    assert fresh is not None and (fresh.name, fresh.model_limits, fresh.group) == ("renamed", (), "")
    await put(alice, "/api/token/?status_only=1", id=token["id"], status=2)
    assert (await keys.lookup(token["key"])) == replace(fresh, status=2)
    assert (await alice.delete(f"/api/token/{token['id']}")).status_code == 200
    gone = await keys.lookup(token["key"])
    assert gone is not None and gone.deleted


async def test_mark_status_persists_expired_and_exhausted_only_from_enabled(app: Running) -> None:
    alice = await user_api(app)
    one = await create(alice, name="one")
    two = await create(alice, name="two", remain_quota=100)
    keys = app.state.keys
    first = await keys.lookup(one["key"])
    assert first is not None and not first.expired(app.state.clock.now_s())
    assert await keys.mark_status(first, 4) is True
    after = await keys.lookup(one["key"])
    assert after is not None and after.status == 4
    assert await keys.mark_status(first, 3) is False  # not enabled any more: unchanged
    assert (await keys.lookup(one["key"])).status == 4  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="status"):
        await keys.mark_status(first, 2)

    await put(alice, "/api/token/?status_only=1", id=two["id"], status=2)
    second = await keys.lookup(two["key"])
    assert second is not None
    assert await keys.mark_status(second, 3) is False  # a disabled key stays disabled
    assert (await keys.lookup(two["key"])).status == 2  # type: ignore[union-attr]
    await put(alice, "/api/token/?status_only=1", id=two["id"], status=1)
    enabled = await keys.lookup(two["key"])
    assert enabled is not None and enabled.status == 1
    assert await keys.mark_status(enabled, 3) is True
    expired = await keys.lookup(two["key"])
    assert expired is not None and expired.status == 3 and expired.expired(app.state.clock.now_s())
    shown = (await alice.get(f"/api/token/{two['id']}")).json()["data"]
    assert shown["status"] == 3


async def test_touch_and_flush_write_accessed_time(app: Running) -> None:
    alice = await user_api(app)
    one = await create(alice, name="one")
    two = await create(alice, name="two")
    keys = app.state.keys
    assert await keys.flush() == 0
    app.clock.shift(120)
    touched = app.state.clock.now_s()
    keys.touch(one["id"])
    keys.touch(one["id"])
    assert await accessed(app, one["id"]) == one["created_time"]  # nothing written on touch
    assert await keys.flush() == 1
    assert touched <= await accessed(app, one["id"]) <= app.state.clock.now_s()  # a second may begin
    assert await accessed(app, two["id"]) == two["created_time"]

    # the background flusher: a stop flushes what is pending before it returns
    app.clock.shift(120)
    touched = app.state.clock.now_s()
    keys.touch(two["id"])
    stop = asyncio.Event()
    flusher = asyncio.create_task(keys.flush_forever(stop, every=3600))
    await asyncio.sleep(0)
    stop.set()
    await asyncio.wait_for(flusher, 30)
    assert touched <= await accessed(app, two["id"]) <= app.state.clock.now_s()
    assert await keys.flush() == 0
    assert "key-access-flush" in app.state.tasks.names


# ---- two nodes ------------------------------------------------------------------------------------------



async def test_key_changes_on_one_node_apply_on_the_other_within_a_second(
        nodes: tuple[Running, Running]) -> None:
    one, two = nodes
    alice = await user_api(one)
    token = await create(alice, name="shared")
    raw = token["key"]
    seen = await two.state.keys.lookup(raw)
    assert seen is not None and seen.status == 1  # now cached on node two
    usage = two.client()
    bearer = {"Authorization": f"Bearer {raw}"}
    assert (await usage.get("/api/usage/token/", headers=bearer)).status_code == 200

    async def status_on_two() -> int | None:
        state = await two.state.keys.lookup(raw)
        return None if state is None else state.status

    await put(alice, "/api/token/?status_only=1", id=token["id"], status=2)
    assert await eventually(lambda: _equals(status_on_two(), 2))
    await put(alice, id=token["id"], name="edited", model_limits="only-this")

    async def edited() -> bool:
        state = await two.state.keys.lookup(raw)
        return state is not None and state.model_limits == ("only-this",)

    assert await eventually(edited)
    assert (await alice.delete(f"/api/token/{token['id']}")).status_code == 200

    async def deleted() -> bool:
        state = await two.state.keys.lookup(raw)
        return state is not None and state.deleted

    assert await eventually(deleted)
    assert (await usage.get("/api/usage/token/", headers=bearer)).status_code == 401


async def _equals(value: Awaitable[Any], expected: Any) -> bool:
    return await value == expected
