"""Two nodes on one database (MariaDB, then PostgreSQL) and one Redis: a channel created, changed or
deleted through one node routes (or stops routing) on the other
within a second — broadcast, no periodic sync (docs/API.md#channel-routes)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tests.harness import Running
from tests.test_channels import GEMINI, admin_of, create, data_of


async def within_a_second(check: Callable[[], bool]) -> bool:
    for _ in range(21):
        if check():
            return True
        await asyncio.sleep(0.05)
    return check()


def routed_to(node: Running, model: str, group: str = "default") -> int | None:
    channel = node.state.channels.pick(group, model, {GEMINI})
    return channel.id if channel is not None else None


async def test_channel_changes_on_one_node_route_on_the_other(nodes: tuple[Running, Running]) -> None:
    one, two = nodes
    admin = await admin_of(one)
    [cid] = await create(admin, models="gemini-2.5-flash")
    assert routed_to(one, "gemini-2.5-flash") == cid  # before the reply, on the handling node
    assert await within_a_second(lambda: routed_to(two, "gemini-2.5-flash") == cid)

    data_of(await admin.put("/api/channel/", json={"id": cid, "models": "gemini-2.5-pro", "group": "vip"}))
    assert routed_to(one, "gemini-2.5-pro", "vip") == cid and routed_to(one, "gemini-2.5-flash") is None
    assert await within_a_second(lambda: routed_to(two, "gemini-2.5-pro", "vip") == cid
                                 and routed_to(two, "gemini-2.5-flash") is None)

    data_of(await admin.put("/api/channel/", json={"id": cid, "status": 2}))
    assert await within_a_second(lambda: routed_to(two, "gemini-2.5-pro", "vip") is None)
    data_of(await admin.put("/api/channel/", json={"id": cid, "status": 1, "key": "AIza-rotated"}))
    assert await within_a_second(lambda: (c := two.state.channels.get(cid)) is not None
                                 and c.keys == ["AIza-rotated"] and c.status == 1)

    data_of(await admin.delete(f"/api/channel/{cid}"))
    assert one.state.channels.get(cid) is None
    assert await within_a_second(lambda: two.state.channels.get(cid) is None)
