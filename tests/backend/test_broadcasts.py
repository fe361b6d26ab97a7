"""The invalidation listener dispatches each message to the one component that registered its prefix
(the longest prefix wins), runs the resubscribe handlers after
every subscription, and goes on after a handler fails."""

from __future__ import annotations

import asyncio

import pytest

from backend.broadcasts import Broadcasts
from backend.memory import MemoryBackend


async def test_dispatch_picks_the_longest_prefix_and_bare_names() -> None:
    seen: list[tuple[str, str]] = []
    broadcasts = Broadcasts(MemoryBackend())

    def recorder(tag: str):  # type: ignore[no-untyped-def]
        async def handle(message: str) -> None:
            seen.append((tag, message))
        return handle

    broadcasts.register("rec:", recorder("any record"))
    broadcasts.register("rec:key:", recorder("key"))
    broadcasts.register("channels:", recorder("channels"))
    assert await broadcasts.dispatch("rec:key:abc")
    assert await broadcasts.dispatch("rec:user:7")
    assert await broadcasts.dispatch("channels:17")
    assert not await broadcasts.dispatch("unknown:1")
    assert seen == [("key", "rec:key:abc"), ("any record", "rec:user:7"), ("channels", "channels:17")]
    with pytest.raises(ValueError):
        broadcasts.register("rec:key:", recorder("again"))


async def test_the_listener_resyncs_on_subscribe_and_survives_a_failing_handler() -> None:
    backend = MemoryBackend()
    broadcasts = Broadcasts(backend)
    resyncs: list[int] = []
    handled: list[str] = []

    async def resync() -> None:
        resyncs.append(1)

    async def flaky(message: str) -> None:
        if message.endswith("boom"):
            raise RuntimeError("handler failed")
        handled.append(message)

    broadcasts.on_resubscribe(resync)
    broadcasts.register("x:", flaky)
    task = asyncio.create_task(broadcasts.listen())
    for _ in range(100):
        if resyncs:
            break
        await asyncio.sleep(0.01)
    await broadcasts.publish("x:boom")
    await broadcasts.publish("x:ok")
    for _ in range(100):
        if handled:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    assert resyncs == [1] and handled == ["x:ok"]
