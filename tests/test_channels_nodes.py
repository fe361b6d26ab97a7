"""Two nodes on one database (MariaDB, then PostgreSQL) and one Redis: a channel created, changed or
deleted through one node — one by one, by tag or in a batch — routes (or stops routing) on the other
within a second — broadcast, no periodic sync (docs/api/channels.md#channel-routes); so does a channel
disabled by a failed channel test or a used-up balance; the abilities rebuild, the test of every channel and
the balance update of every channel are each refused on one node while they run on the other."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from backend.locks import exclusive
from server.channels.balances import BALANCE_LOCK
from server.channels.probe import TEST_LOCK
from server.channels.tools import FIX_LOCK
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI
from tests.harness import Running, logged_in
from tests.test_channels import GEMINI, admin_of, create, data_of, fails
from tests.test_channels_probe import run_finished


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


async def test_a_tag_disabled_or_a_batch_deleted_on_one_node_stops_routing_on_the_other(
        nodes: tuple[Running, Running]) -> None:
    one, two = nodes
    admin = await admin_of(one)
    [tagged] = await create(admin, models="gemini-2.5-flash", tag="fleet", priority=5)
    [spare] = await create(admin, models="gemini-2.5-flash", name="spare")
    assert await within_a_second(lambda: routed_to(two, "gemini-2.5-flash") == tagged)
    assert data_of(await admin.post("/api/channel/tag/disabled", json={"tag": "fleet"})) == 1
    assert routed_to(one, "gemini-2.5-flash") == spare  # before the reply, on the handling node
    assert await within_a_second(lambda: routed_to(two, "gemini-2.5-flash") == spare)
    assert data_of(await admin.post("/api/channel/tag/enabled", json={"tag": "fleet"})) == 1
    assert await within_a_second(lambda: routed_to(two, "gemini-2.5-flash") == tagged)

    assert data_of(await admin.post("/api/channel/batch", json={"ids": [tagged, spare]})) == 2
    assert one.state.channels.get(tagged) is None and routed_to(one, "gemini-2.5-flash") is None
    assert await within_a_second(lambda: two.state.channels.get(tagged) is None
                                 and routed_to(two, "gemini-2.5-flash") is None)


async def test_the_abilities_rebuild_runs_once_across_nodes(nodes: tuple[Running, Running]) -> None:
    one, two = nodes
    admin_one = await admin_of(one)
    admin_two = await logged_in(two, "chadmin")
    await create(admin_one, models="gemini-2.5-flash")
    async with exclusive(one.state.backend, FIX_LOCK, ttl=60):  # a rebuild in progress on node one
        fails(await admin_two.post("/api/channel/fix"), 409, "a rebuild of the abilities is already running")
    assert data_of(await admin_two.post("/api/channel/fix")) == {"success": 1, "fails": 0}


async def test_a_channel_disabled_by_a_test_or_its_balance_stops_routing_on_the_other_node(
        nodes: tuple[Running, Running]) -> None:
    one, two = nodes
    admin = await admin_of(one)
    async with FakeGemini(valid_keys=["AIza-good"]) as gemini, FakeOpenAI() as broke:
        broke.balance = 0.0
        [failing] = await create(admin, base_url=gemini.url, key="AIza-bad", models="gemini-2.5-flash")
        [used_up] = await create(admin, type=1, base_url=broke.url, key="sk-used-up", models="m-used-up")
        assert await within_a_second(lambda: routed_to(two, "gemini-2.5-flash") == failing)
        data_of(await admin.get("/api/channel/test"))
        await run_finished(one)
        assert routed_to(one, "gemini-2.5-flash") is None
        assert await within_a_second(lambda: routed_to(two, "gemini-2.5-flash") is None)

        assert await within_a_second(lambda: (c := two.state.channels.get(used_up)) is not None
                                     and c.status == 1)
        assert data_of(await admin.get("/api/channel/update_balance")) == {"updated": 1, "failed": 0}
        assert await within_a_second(lambda: (c := two.state.channels.get(used_up)) is not None
                                     and c.status == 3)


async def test_the_test_and_balance_runs_run_once_across_nodes(nodes: tuple[Running, Running]) -> None:
    one, two = nodes
    await admin_of(one)
    admin_two = await logged_in(two, "chadmin")
    async with exclusive(one.state.backend, TEST_LOCK, ttl=60):  # a test run in progress on node one
        fails(await admin_two.get("/api/channel/test"), 409, "a test of every channel is already running")
    async with exclusive(one.state.backend, BALANCE_LOCK, ttl=60):
        fails(await admin_two.get("/api/channel/update_balance"), 409,
              "a balance update of every channel is already running")
    data_of(await admin_two.get("/api/channel/test"))
    await run_finished(two)
    assert data_of(await admin_two.get("/api/channel/update_balance")) == {"updated": 0, "failed": 0}
