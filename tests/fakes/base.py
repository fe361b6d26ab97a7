"""A tiny real HTTP/1.1 server that fake upstream providers (Gemini, OpenAI) are built on.

The gateway's end-to-end tests point channels at these fakes, so they must behave like a real upstream on
the wire: a real socket on 127.0.0.1 (port 0, a free one), keep-alive, chunked responses flushed chunk by
chunk, and the failures a real provider shows — an error status in the provider's own body format, a slow
answer, a connection closed without any response, a stream cut after its first chunk.

It is our own asyncio code rather than a framework (Sanic, aiohttp): closing a connection before
answering, or in the middle of a chunked body, is one line here and a fight with a framework's protocol.

A subclass implements `route` (the normal answers), `error_reply` (the injected failures, in the provider's
wire format), and `api_key` / `key_error` (what `valid_keys` checks). Three failures are the same for
every provider: `hang` (accept the request and never answer, until the fake stops), `garbage` (a 200 whose
body is not JSON), `huge` (a 200 JSON body of `HUGE_BYTES`, streamed in 1 MB chunks) and `not_http` (an
answer that is not HTTP at all — `NOT_HTTP`, what a `base_url` pointing at another service's port gets —
then the connection closes).

Two switches imitate what real providers send that a gateway must not pass on: `extra_headers` are added
to every reply (`Set-Cookie`, organisation and rate-limit headers, …), and `echo_key` makes every error
message quote the key the request carried (some providers do). A third, `compress`, gzips every whole
(not chunked) reply to a request whose `Accept-Encoding` names gzip, with `Content-Encoding: gzip`, as
providers behind a CDN do.
"""

from __future__ import annotations

import asyncio
import gzip
import itertools
import json
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType
from typing import Any, ClassVar, Self
from urllib.parse import parse_qsl, unquote

MAX_HEAD = 64 * 1024
"""The longest request line + headers accepted (the StreamReader's default limit)."""

BASE_FAILURES = frozenset({"400", "401", "403", "429", "500", "slow", "drop", "drop_mid_stream",
                           "stall_mid_stream", "hang", "garbage", "huge", "not_http"})
HUGE_BYTES = 6 * 1024 * 1024
"""The size of a `huge` answer: more than the 5 MB an administrative call reads."""
GARBAGE = b"<html><body>\x00 this is not JSON \xff\xfe</body>"
NOT_HTTP = b"SSH-2.0-OpenSSH_9.6\r\nProtocol mismatch.\r\n"
"""The answer of a `not_http` failure: another service's greeting, no HTTP status line."""


@dataclass
class Recorded:
    """One request as the fake received it."""

    method: str
    path: str
    """Percent-decoded path (`/v1beta/models/m:generateContent` even when the colon came as `%3A`)."""
    raw_path: str
    """The path exactly as sent on the request line, without the query."""
    query: dict[str, str]
    headers: dict[str, str]
    """Lowercased names; a repeated header is joined with ", "."""
    body: bytes
    json: Any
    """The body parsed as JSON, or None when it is empty or not JSON."""
    connection: int
    """Which TCP connection carried it (1, 2, …): equal numbers mean keep-alive reused the connection."""
    head: bytes = b""
    """The request line and header lines exactly as they came (up to and including the blank line)."""


@dataclass
class Reply:
    """What to answer. `chunks` set means a chunked (streamed) body, one flush per chunk."""

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] | None = None


def json_reply(status: int, payload: Any, *, content_type: str = "application/json",
               headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, json.dumps(payload).encode(), content_type, dict(headers or {}))


class _BadRequest(Exception):
    """The bytes received are not an HTTP/1.1 request we can read."""


class FakeServer:
    """Base of the fake providers: start/stop, recording, failure injection, key checking.

    Use as `async with FakeX() as fake:` (or `await fake.start()` … `await fake.stop()`), then `fake.url`.
    """

    failure_modes: ClassVar[frozenset[str]] = BASE_FAILURES

    def __init__(self, *, valid_keys: Iterable[str] | None = None, slow_seconds: float = 5.0,
                 chunk_delay: float = 0.01) -> None:
        self.received: list[Recorded] = []
        self.valid_keys: set[str] | None = set(valid_keys) if valid_keys is not None else None
        self.slow_seconds = slow_seconds
        self.chunk_delay = chunk_delay
        self.chunks_sent = 0
        """Streamed chunks written and flushed so far (all responses together)."""
        self.extra_headers: dict[str, str] = {}
        """Headers added to every reply, errors included."""
        self.echo_key = False
        """When True, error messages quote the request's key (see `echoed`)."""
        self.compress = False
        """When True, a whole reply is gzipped for a request that accepts gzip (`Content-Encoding`)."""
        self.cut_after = 1
        """`drop_mid_stream` / `stall_mid_stream` break a streamed reply after this many chunks."""
        self.port = 0
        self._stream_gate: asyncio.Event | None = None
        self._failure: str | None = None
        self._failures_left: int | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        self._connection_ids = itertools.count(1)
        self._held: Callable[[Recorded], bool] | None = None
        self._gate: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- life cycle -------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> Self:
        self._loop = asyncio.get_running_loop()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0, limit=MAX_HEAD)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        """Stop listening and end every open connection at once (a `slow` sleep included)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    # -- failure injection ------------------------------------------------------------------------------

    def fail(self, mode: str, times: int | None = None) -> None:
        """Answer the next `times` requests (None: all of them) with the failure `mode`."""
        if mode not in self.failure_modes:
            raise ValueError(f"unknown failure mode {mode!r}; one of {sorted(self.failure_modes)}")
        if times is not None and times < 1:
            raise ValueError("times must be at least 1 (or None for every request)")
        self._failure, self._failures_left = mode, times

    def reset(self) -> None:
        """Answer normally again (the recorded requests are kept: `received.clear()` empties them)."""
        self._failure, self._failures_left = None, None

    @property
    def failure(self) -> str | None:
        """The failure mode in force, or None."""
        return self._failure

    def _take_failure(self) -> str | None:
        mode = self._failure
        if mode is not None and self._failures_left is not None:
            self._failures_left -= 1
            if self._failures_left <= 0:
                self.reset()
        return mode

    # -- recording helpers ------------------------------------------------------------------------------

    @property
    def last(self) -> Recorded:
        """The most recent request (AssertionError when none came)."""
        assert self.received, f"{type(self).__name__} received no request"
        return self.received[-1]

    def requests_to(self, path_part: str) -> list[Recorded]:
        """The recorded requests whose decoded path contains `path_part`."""
        return [r for r in self.received if path_part in r.path]

    # -- provider hooks ---------------------------------------------------------------------------------

    def route(self, request: Recorded) -> Reply:
        raise NotImplementedError

    def error_reply(self, mode: str, request: Recorded) -> Reply:
        raise NotImplementedError

    def api_key(self, request: Recorded) -> str | None:
        raise NotImplementedError

    def key_error(self, request: Recorded, key: str | None) -> Reply:
        raise NotImplementedError

    def reply_headers(self) -> dict[str, str]:
        """Headers added to every reply (a request id, …)."""
        return {}

    def echoed(self, message: str, request: Recorded) -> str:
        """`message`, quoting the request's key when `echo_key` is on."""
        return f"{message} (key: {self.api_key(request)})" if self.echo_key else message

    # -- holding requests -------------------------------------------------------------------------------

    def hold(self, when: Callable[[Recorded], bool]) -> None:
        """Keep every request that `when` matches unanswered until `release()`, so that a test can look at
        a run halfway through. Callable from any thread."""
        assert self._loop is not None, "start the fake first"
        self._held, self._gate = when, asyncio.Event()

    def hold_stream(self) -> None:
        """Send the first chunk of every streamed reply, then wait for `release_stream` before the rest."""
        assert self._loop is not None, "start the fake first"
        self._stream_gate = asyncio.Event()

    def release_stream(self) -> None:
        """Send the rest of the held streams. Callable from any thread."""
        gate, self._stream_gate = self._stream_gate, None
        if gate is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(gate.set)

    def release(self) -> None:
        """Answer the held requests and hold no more. Callable from any thread."""
        gate, self._held = self._gate, None
        if gate is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(gate.set)

    # -- request handling -------------------------------------------------------------------------------

    async def _answer(self, request: Recorded) -> tuple[Reply | None, str | None]:
        """The reply (None: close without answering, after writing `NOT_HTTP` when the second item is
        "not_http") and how to break it after its first chunk: "cut" (close the connection) or "stall"
        (wait `slow_seconds`, then close), None to send it whole."""
        self.received.append(request)
        if self._held is not None and self._gate is not None and self._held(request):
            await self._gate.wait()
        mode = self._take_failure()
        broken = {"drop_mid_stream": "cut", "stall_mid_stream": "stall"}.get(mode or "")
        if mode in ("drop", "not_http"):
            return None, mode
        if mode == "hang":
            await asyncio.sleep(86_400)  # until `stop` cancels the connection
        if mode == "garbage":
            return Reply(200, GARBAGE, "text/html"), None
        if mode == "huge":
            mb = 1024 * 1024
            chunks = [b'{"data": "'] + [b"x" * mb] * (HUGE_BYTES // mb) + [b'"}']
            return Reply(200, chunks=chunks), None
        if mode == "slow":
            await asyncio.sleep(self.slow_seconds)
        elif mode is not None and broken is None:
            return self.error_reply(mode, request), None
        if self.valid_keys is not None:
            key = self.api_key(request)
            if key is None or key not in self.valid_keys:
                return self.key_error(request, key), broken
        try:
            reply = self.route(request)
        except Exception:  # a bug in the fake: say so plainly, never as a provider error
            reply = Reply(500, f"fake server bug:\n{traceback.format_exc()}".encode(), "text/plain")
        return reply, broken

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # The connection's task is ours (not asyncio.streams'), so `stop` can cancel it quietly.
        task = asyncio.get_running_loop().create_task(self._serve_connection(reader, writer))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = next(self._connection_ids)
        try:
            while True:
                try:
                    request = await _read_request(reader, writer, connection)
                except _BadRequest as exc:
                    await self._write(writer, Reply(400, str(exc).encode(), "text/plain"), False, None)
                    break
                if request is None:
                    break
                reply, broken = await self._answer(request)
                if reply is None:
                    if broken == "not_http":
                        writer.write(NOT_HTTP)
                        await writer.drain()
                    break
                if self.compress and reply.chunks is None and _accepts_gzip(request):
                    reply = Reply(reply.status, gzip.compress(reply.body), reply.content_type,
                                  {**reply.headers, "content-encoding": "gzip"})
                keep_alive = _wants_keep_alive(request) and broken is None
                await self._write(writer, reply, keep_alive, broken)
                if not keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _write(self, writer: asyncio.StreamWriter, reply: Reply, keep_alive: bool,
                     broken: str | None) -> None:
        headers = {"content-type": reply.content_type, **self.reply_headers(), **self.extra_headers,
                   **reply.headers, "connection": "keep-alive" if keep_alive else "close"}
        if reply.chunks is None:
            headers["content-length"] = str(len(reply.body))
        else:
            headers["transfer-encoding"] = "chunked"
        head = f"HTTP/1.1 {reply.status} {HTTPStatus(reply.status).phrase}\r\n"
        head += "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
        writer.write(head.encode("latin-1"))
        if reply.chunks is None:
            # drop_mid_stream / stall_mid_stream on a plain body: half of it, then the connection closes
            # (at once, or after `slow_seconds`).
            writer.write(reply.body[: len(reply.body) // 2] if broken else reply.body)
            await writer.drain()
            if broken == "stall":
                await asyncio.sleep(self.slow_seconds)
            return
        chunks = [c for c in reply.chunks if c]  # an empty chunk would end the body
        for index, chunk in enumerate(chunks):
            if index:
                await asyncio.sleep(self.chunk_delay)
            if index == 1 and self._stream_gate is not None:  # `hold_stream`: the rest waits
                await self._stream_gate.wait()
            writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            await writer.drain()
            self.chunks_sent += 1
            if broken and index + 1 >= self.cut_after:
                if broken == "stall":
                    await asyncio.sleep(self.slow_seconds)
                return
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def _accepts_gzip(request: Recorded) -> bool:
    return "gzip" in request.headers.get("accept-encoding", "").lower()


def _wants_keep_alive(request: Recorded) -> bool:
    return "close" not in request.headers.get("connection", "").lower()


async def _read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        connection: int) -> Recorded | None:
    """The next request on the connection, or None when the client closed it between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise _BadRequest("incomplete request head") from None
        return None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _BadRequest(f"bad request line {lines[0]!r}")
    method, target, _version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise _BadRequest(f"bad header line {line!r}")
        name, value = name.strip().lower(), value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    if headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    body = await _read_body(reader, headers)
    raw_path, _, query = target.partition("?")
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    return Recorded(method=method.upper(), path=unquote(raw_path), raw_path=raw_path,
                    query=dict(parse_qsl(query, keep_blank_values=True)), headers=headers, body=body,
                    json=parsed, connection=connection, head=head)


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = b""
        while True:
            size_line = await reader.readuntil(b"\r\n")
            try:
                size = int(size_line.split(b";")[0].strip(), 16)
            except ValueError:
                raise _BadRequest("bad chunk size") from None
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                    pass
                return body
            body += await reader.readexactly(size)
            await reader.readexactly(2)
    length = headers.get("content-length")
    if length is None:
        return b""
    if not length.isdigit():
        raise _BadRequest("bad content-length")
    return await reader.readexactly(int(length))
