"""The worker's background tasks (`server/context.py` `Tasks`) at shutdown: `drain` lets an adopted task (a
model call's settlement, which must outlive its request) finish before it cancels anything, and still
cancels the tasks that have no graceful stop."""

from __future__ import annotations

import asyncio

from server.context import Tasks


async def test_drain_lets_an_adopted_settlement_finish_and_cancels_the_rest() -> None:
    tasks = Tasks()
    may_finish = asyncio.Event()
    settled: list[str] = []

    async def settlement() -> None:
        await may_finish.wait()  # still running when the drain begins
        settled.append("once")

    async def listener() -> None:
        await asyncio.Event().wait()  # runs until cancelled, like the invalidation listener

    adopted = asyncio.get_running_loop().create_task(settlement(), name="settle-1")
    tasks.adopt(adopted)
    tasks.start("listener", listener())
    await asyncio.sleep(0)
    asyncio.get_running_loop().call_soon(may_finish.set)  # the settlement's last step, once drain waits

    await tasks.drain(grace=30.0)

    assert settled == ["once"] and not adopted.cancelled()
    assert tasks.names == []  # the listener was cancelled and is gone too
