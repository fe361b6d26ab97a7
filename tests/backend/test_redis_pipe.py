"""The pipelined connection's group commit (backend/redis_pipe.py): commands issued while a batch is
in flight go out together once it is answered, each caller still gets its own reply, and a connection lost
with a batch in flight fails that batch's callers (the idempotent ones retry) while the commands that were
still waiting — never written — go out again on a fresh connection.

The lost connections are played by a small RESP server of the test's own (`Peer`): it can close a
connection after reading a given number of commands, or hold its replies, which a real Redis does not do
on demand."""

from __future__ import annotations

import asyncio
from typing import Any

import hiredis
import pytest

from backend.base import BackendUnavailable
from backend.redis import RedisBackend, guarded, idempotent
from backend.redis_pipe import RedisPipe
from tests.services import REDIS_URL, redis_ping, unavailable


class CountingTransport:
    """The connection's transport, counting its writes (each one a `write` system call and, in Redis, a
    read and a pass of its event loop)."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport
        self.writes = 0

    def write(self, data: bytes) -> None:
        self.writes += 1
        self.transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


async def _staggered(pipe: RedisPipe, n: int) -> str:
    for _ in range(n):  # each caller issues its command in a turn of the loop of its own
        await asyncio.sleep(0)
    return str(await pipe.execute("ECHO", f"call {n}"))


async def test_concurrent_calls_share_writes_and_each_gets_its_own_reply() -> None:
    try:
        await redis_ping()
    except Exception as exc:
        unavailable("redis", exc)
    pipe = RedisPipe(REDIS_URL, connect_timeout=5)
    try:
        assert await pipe.execute("ECHO", "connect") == "connect"
        connection = pipe._connection
        assert connection is not None
        counting = CountingTransport(connection.transport)
        connection.transport = counting  # type: ignore[assignment]
        replies = await asyncio.gather(*(_staggered(pipe, n) for n in range(50)))
        assert replies == [f"call {n}" for n in range(50)]
        assert counting.writes < 50  # one write per call without the grouping: each was in a turn of its own
        assert await pipe.execute("ECHO", "alone") == "alone"  # nothing in flight: out at once
    finally:
        await pipe.close()


class Peer:
    """A RESP server that echoes each command's last argument and records what each connection received.
    With `lose_after`, the first connection answers that many commands only, and closes when told
    (`close`) once it has read `close_after`; `hold` cleared keeps the replies back."""

    def __init__(self, lose_after: int | None = None, close_after: int = 0) -> None:
        self.lose_after = lose_after
        self.close_after = close_after
        self.received: list[list[str]] = []  # per connection, the last argument of each command
        self.hold = asyncio.Event()
        self.hold.set()
        self.close = asyncio.Event()
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"redis://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/0"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        losing = not self.received and self.lose_after is not None
        got: list[str] = []
        self.received.append(got)
        parser = hiredis.Reader(encoding="utf-8")
        try:
            while data := await reader.read(65536):
                parser.feed(data)
                while (command := parser.gets()) is not False:
                    got.append(command[-1])
                    if losing and len(got) > (self.lose_after or 0):
                        continue
                    await self.hold.wait()
                    writer.write(hiredis.pack_command((command[-1],))[len(b"*1\r\n"):])  # a bulk string
                if losing and len(got) >= self.close_after:
                    await self.close.wait()
                    return
        finally:
            writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


class Caller:
    """Calls over `pipe` under the backend's wrappers: `again` may run twice, `once` must not. Like a
    store, it names the backend whose deadline (10 s) bounds its calls (nothing is connected through it)."""

    def __init__(self, pipe: RedisPipe) -> None:
        self.pipe = pipe
        self.backend = RedisBackend(REDIS_URL, "t:pipe:", timeout=10.0)

    @idempotent
    async def again(self, value: str) -> str:
        return str(await self.pipe.execute("ECHO", value))

    @guarded
    async def once(self, value: str) -> str:
        return str(await self.pipe.execute("ECHO", value))


async def test_a_lost_batch_fails_its_callers_and_the_waiting_commands_go_out_again() -> None:
    peer = Peer(lose_after=1, close_after=3)
    pipe = RedisPipe(await peer.start(), connect_timeout=5)
    caller = Caller(pipe)
    try:
        async with asyncio.timeout(30):  # a hang guard, not a speed assertion
            assert await caller.once("connect") == "connect"
            once = asyncio.ensure_future(caller.once("a"))  # one batch: issued in the same turn
            again = asyncio.ensure_future(caller.again("b"))
            while len(peer.received[0]) < 3:
                await asyncio.sleep(0.001)
            waiting = asyncio.ensure_future(caller.once("c"))  # issued with a batch in flight: waits
            await asyncio.sleep(0.05)
            peer.close.set()
            with pytest.raises(BackendUnavailable, match="Connection closed by server"):
                await once  # it may have run: not run again
            assert await again == "b"  # it may have run, and may run twice: run again
            assert await waiting == "c"  # it was never written: sent on the fresh connection
        assert peer.received[0] == ["connect", "a", "b"]
        assert sorted(peer.received[1]) == ["b", "c"]
    finally:
        await pipe.close()
        await peer.stop()


async def test_a_caller_that_gives_up_before_its_batch_goes_out_is_never_sent() -> None:
    peer = Peer()
    pipe = RedisPipe(await peer.start(), connect_timeout=5)
    try:
        async with asyncio.timeout(30):  # a hang guard, not a speed assertion
            assert await pipe.execute("ECHO", "connect") == "connect"
            peer.hold.clear()
            in_flight = asyncio.ensure_future(pipe.execute("ECHO", "first"))
            await asyncio.sleep(0.05)
            gives_up = asyncio.ensure_future(pipe.execute("ECHO", "cancelled"))
            await asyncio.sleep(0)
            gives_up.cancel()
            peer.hold.set()
            assert await in_flight == "first"
            assert await pipe.execute("ECHO", "after") == "after"  # the connection is still in step
        assert peer.received == [["connect", "first", "after"]]
    finally:
        await pipe.close()
        await peer.stop()
