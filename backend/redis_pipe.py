"""One pipelined Redis connection per worker for the Lua scripts (`LuaScript`), the model call's hot path.

Through redis-py most of a script call's CPU in the worker was not the socket write
(docs/PERFORMANCE.md#figures-behind-the-code);
the rest was the client around it: taking a connection from the blocking pool and giving it back
(an asyncio lock and condition), the retry and observability wrappers, encoding, and a timeout per read.
Here concurrent calls share one connection and are pipelined: each command is packed by hiredis, and the
replies — which Redis sends in order — complete the callers' futures in order as hiredis parses them.

Writes are grouped (group commit): a command issued while nothing is in flight on the connection goes
out at the end of this turn of the event loop, with whatever else was issued in that turn; a command
issued while a batch is in flight waits, and everything that waited goes out in one write once the last
reply of that batch is in. At concurrency 1 nothing ever waits, so no latency is added; a command waits
at most one round trip (the batch ahead of it). Redis reads, runs and answers a batch in one pass of its
event loop (a read and a write system call per pass, not per command), and the slower Redis answers —
the busier it is — the more commands wait for one batch. Measured, it did not move Redis's CPU per
call (docs/PERFORMANCE.md#redis-and-the-quota-sync): with one write per turn of the worker's loop
the commands already went out several to a write at concurrency 16; the grouping is a bound for a
busier Redis, not a gain at this load.

Everything else (sessions, caches, pub/sub, the sync's reads) stays on redis-py's pool.

The semantics the callers rely on are the pool's (`backend/redis.py`):

- A connection the server closed is seen by the event loop (end of file) and replaced before anything is
  written on it; commands still waiting for their batch when the connection is lost were never written,
  and go out again on the fresh connection (once: `NotSent`). A close seen only after a command was
  written — the loop was busy during a Redis restart — fails every command of the batch in flight on
  that connection with redis-py's `ConnectionError`
  (`Connection closed by server.`): the server may or may not have run them, and the caller's `_wrap`
  retries only the idempotent ones, on a fresh connection.
- An error reply is redis-py's `ResponseError` (`NoScriptError` for NOSCRIPT); an unreachable server is
  an `OSError`; both become `BackendUnavailable` in `_wrap`, whose deadline bounds the whole call. A
  caller that gives up (timeout, cancellation) leaves its reply to be read and dropped: the connection
  stays in step; a command whose caller gave up before its batch went out is not sent at all.
- `redis://` and `unix://` URLs, with a password, a user name and a database; `rediss://` keeps redis-py.

On a Redis Cluster, `ClusterPipes` keeps one such connection per master and sends a script to the master
of its first key's slot, as redis-py's cluster client knows the slot map. A reply that says the command
did not run there — MOVED, ASK (the slot moved or is moving), TRYAGAIN, CLUSTERDOWN — hands the command
to the cluster client, which follows the redirection and learns the new map; a lost connection fails the
call as on one server (and the caller's `_wrap` marks the map stale, as after any failed call: the next
command learns it again — after a failover, the promoted replica).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, cast

import hiredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import parse_url
from redis.exceptions import ConnectionError as LostConnection
from redis.exceptions import NoScriptError, ResponseError

CLOSED = "Connection closed by server."


class NotSent(LostConnection):
    """The connection was lost before the command was written: it did not run, and may be sent again."""


class _Connection(asyncio.Protocol):
    """The protocol of one connection: the futures of the batch in flight, waiting for their replies in
    the order the commands went out, and the commands queued for the next batch."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.waiting: deque[asyncio.Future[Any]] = deque()
        self.reader = hiredis.Reader(replyError=ResponseError, encoding="utf-8")
        self.queued: list[tuple[bytes, asyncio.Future[Any]]] = []
        self.flush_due = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are no subclass of asyncio's

    def data_received(self, data: bytes) -> None:
        reader, waiting = self.reader, self.waiting
        reader.feed(data)
        while True:
            reply = reader.gets()
            if reply is False:
                break
            if not waiting:  # nothing asked for it: the stream is out of step, drop the connection
                self._fail(LostConnection("unexpected reply from Redis"))
                return
            future = waiting.popleft()
            if future.done():  # the caller gave up (timeout, cancellation)
                continue
            if isinstance(reply, ResponseError):
                message = str(reply)
                future.set_exception(NoScriptError(message) if message.startswith("NOSCRIPT") else reply)
            else:
                future.set_result(reply)
        if not waiting and self.queued:  # the batch is answered: the next one goes out
            self._flush_soon()

    def eof_received(self) -> bool:
        return False  # the transport closes itself: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(LostConnection(CLOSED))

    def _fail(self, error: Exception) -> None:
        self.closed = True
        waiting, self.waiting = self.waiting, deque()
        queued, self.queued = self.queued, []
        for future in waiting:
            if not future.done():
                future.set_exception(error)
        for _, future in queued:
            if not future.done():
                future.set_exception(NotSent(CLOSED))
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def send(self, command: bytes, future: asyncio.Future[Any]) -> None:
        """Queue `command` for the next batch: at the end of this turn of the loop if nothing is in flight,
        else once the batch in flight is answered."""
        self.queued.append((command, future))
        if not self.waiting:
            self._flush_soon()

    def _flush_soon(self) -> None:
        if not self.flush_due:
            self.flush_due = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        self.flush_due = False
        if self.closed or self.transport is None or self.transport.is_closing():
            self._fail(LostConnection(CLOSED))
            return
        queued, self.queued = self.queued, []
        out: list[bytes] = []
        for command, future in queued:
            if not future.done():  # else its caller gave up: it is never sent
                out.append(command)
                self.waiting.append(future)
        if out:
            self.transport.write(b"".join(out) if len(out) > 1 else out[0])


class RedisPipe:
    """`execute(*command)` over one pipelined connection, opened on first use and again after a close."""

    def __init__(self, url: str, *, connect_timeout: float) -> None:
        options = parse_url(url)
        if url.startswith("rediss:"):
            raise ValueError("RedisPipe: TLS connections stay on redis-py")
        self.path: str | None = options.get("path")
        self.host = str(options.get("host", "localhost"))
        self.port = int(options.get("port", 6379))
        self.db = int(options.get("db", 0) or 0)
        self.username: str | None = options.get("username")
        self.password: str | None = options.get("password")
        self.connect_timeout = connect_timeout
        self._connection: _Connection | None = None
        self._lock: asyncio.Lock | None = None

    @staticmethod
    def supports(url: str) -> bool:
        return url.startswith(("redis:", "unix:"))

    async def execute(self, *command: Any) -> Any:
        packed = hiredis.pack_command(command)
        try:
            return await self._send(packed)
        except NotSent:  # the connection was lost while it waited for its batch: it did not run
            return await self._send(packed)

    async def _send(self, packed: bytes) -> Any:
        connection = self._connection
        if connection is None or connection.closed:
            connection = await self._connect()
        future: asyncio.Future[Any] = connection.loop.create_future()
        connection.send(packed, future)
        return await future

    async def _connect(self) -> _Connection:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            connection = self._connection
            if connection is not None and not connection.closed:
                return connection
            loop = asyncio.get_running_loop()
            async with asyncio.timeout(self.connect_timeout):
                if self.path is not None:
                    _, connection = await loop.create_unix_connection(_Connection, self.path)
                else:
                    _, connection = await loop.create_connection(_Connection, self.host, self.port)
                try:
                    await self._hello(connection)
                except BaseException:
                    connection._fail(LostConnection(CLOSED))
                    raise
            self._connection = connection
            return connection

    async def _hello(self, connection: _Connection) -> None:
        """AUTH and SELECT, as redis-py's connection does on connect."""
        loop = asyncio.get_running_loop()
        commands: list[tuple[Any, ...]] = []
        if self.password is not None:
            user = (self.username,) if self.username else ()
            commands.append(("AUTH", *user, self.password))
        if self.db:
            commands.append(("SELECT", self.db))
        for command in commands:
            future: asyncio.Future[Any] = loop.create_future()
            connection.send(hiredis.pack_command(command), future)
            await future

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection._fail(LostConnection("closed by the client"))


NOT_RUN = ("MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN")  # cluster replies of a command that did not run


class ClusterPipes:
    """`execute(*command)` of a Lua script (`EVALSHA sha numkeys key …`) over the pipelined connection to
    the master of its keys' slot (see the module docstring); anything else goes through `client`."""

    def __init__(self, client: RedisCluster, *, connect_timeout: float) -> None:
        self.client = client
        self.connect_timeout = connect_timeout
        self._pipes: dict[str, RedisPipe] = {}

    async def execute(self, *command: Any) -> Any:
        client = self.client
        if command[0] != "EVALSHA" or int(command[2]) < 1:
            return await client.execute_command(*command)
        await client.initialize()  # a no-op once the slot map is known
        node = client.nodes_manager.get_node_from_slot(client.keyslot(command[3]))
        pipe = self._pipes.get(node.name)
        if pipe is None:
            host = f"[{node.host}]" if ":" in node.host else node.host  # an IPv6 address
            pipe = self._pipes[node.name] = RedisPipe(f"redis://{host}:{node.port}/0",
                                                      connect_timeout=self.connect_timeout)
        try:
            return await pipe.execute(*command)
        except NoScriptError:
            raise
        except ResponseError as exc:
            if not str(exc).startswith(NOT_RUN):
                raise
            return await client.execute_command(*command)  # redirected there; it learns the new map

    async def close(self) -> None:
        pipes, self._pipes = self._pipes, {}
        for pipe in pipes.values():
            await pipe.close()
