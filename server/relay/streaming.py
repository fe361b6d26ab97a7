"""The streamed answer of a model call: upstream events to the caller as they arrive.

The 200 goes out only after an upstream 2xx (steps 1–13 are done by then, so earlier failures still retry
or answer a JSON error). The upstream's bytes are cut into whole events and each is handed to the
exchange's mapper (`server/upstream/formats/`), whose output is written before the next upstream read: a
pass-through writes the event's bytes unchanged, a conversion its mapped events. The hold is renewed
every minute while the stream runs.

A failure after the first byte ends the stream with one error event in the route's shape: a drop, a
timeout, no byte for `idle` seconds, an upstream event a conversion cannot map (`StreamBroken`), or the
end of the shutdown grace (`server/web/connections.py`: a stream still running when the server stops is
ended with a 503 error event, not cut, and settled on what it delivered). An SSE stream whose upstream is
silent gets a `: keep-alive` comment every `keepalive` seconds (`STREAM_KEEPALIVE`), the only bytes
Tollway adds to a pass-through stream. A client that goes away cancels the request, and with it the
upstream read at once.
"""

from __future__ import annotations

import asyncio
import time

import httpx

from quota.engine import QuotaEngine
from server.relay.call import Call, Sink
from server.upstream.faults import is_timeout
from server.upstream.formats.base import StreamBroken, StreamMapper
from server.upstream.formats.sse import Events
from server.web.connections import is_shutdown

RENEW_EVERY = 60.0
KEEPALIVE_COMMENT = b": keep-alive\n\n"


class Delivery:
    """What a stream delivered, for its settlement."""

    __slots__ = ("first_byte_ms", "interrupted", "last_write", "writing")

    def __init__(self) -> None:
        self.interrupted = False
        self.first_byte_ms: int | None = None
        self.last_write = time.monotonic()
        self.writing = False  # a write is in progress (the keep-alive task never writes inside one)

    async def write(self, response: Sink, data: bytes) -> None:
        if data:
            self.writing = True
            try:
                await response.send(data)
            finally:
                self.writing = False
            self.last_write = time.monotonic()


async def _keepalive(response: Sink, delivery: Delivery, every: float) -> None:
    """Write a comment whenever nothing was written for `every` seconds."""
    while True:
        await asyncio.sleep(max(0.0, delivery.last_write + every - time.monotonic()))
        if time.monotonic() - delivery.last_write >= every and not delivery.writing:
            await delivery.write(response, KEEPALIVE_COMMENT)


async def relay_stream(call: Call, response: Sink, mapper: StreamMapper, quota: QuotaEngine, idle: float,
                       delivery: Delivery, keepalive: float) -> None:
    """Write the upstream's events to `response` (already opened) through `mapper`, and end it."""
    upstream, hold = call.response, call.hold
    assert upstream is not None and hold is not None
    events = Events()
    renew_at = time.monotonic() + RENEW_EVERY
    failure: tuple[int, str, str] | None = None
    watchdog = (asyncio.get_running_loop().create_task(_keepalive(response, delivery, keepalive),
                                                       name=f"keepalive-{hold.hold_id}")
                if mapper.form.sse else None)

    async def write(data: bytes) -> None:
        await delivery.write(response, data)

    try:
        await write(mapper.start())
        while True:
            try:
                async with asyncio.timeout(idle):
                    chunk = await upstream.next_chunk()
            except TimeoutError:
                failure = (504, "upstream_timeout", "the upstream stream was idle for too long")
                break
            except httpx.TransportError as exc:
                failure = ((504, "upstream_timeout", "the upstream stream timed out") if is_timeout(exc)
                           else (503, "upstream_failed", "the upstream stream was interrupted"))
                break
            except asyncio.CancelledError as exc:
                if not is_shutdown(exc):
                    raise  # the client went away: nothing more to write
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
                failure = (503, "upstream_failed", "the server is stopping")
                break
            if not chunk:  # the end
                break
            if delivery.first_byte_ms is None:
                delivery.first_byte_ms = int((time.monotonic() - call.started) * 1000)
            try:
                for event in events.feed(chunk):
                    await write(mapper.event(event))
            except StreamBroken as broken:  # a conversion cannot map what the upstream sent
                await write(broken.written)
                failure = (502, "upstream_failed", broken.message)
                break
            if time.monotonic() >= renew_at:
                renew_at = time.monotonic() + RENEW_EVERY
                await quota.renew(hold)
        if failure is None:
            try:
                rest = events.rest()
                if rest:
                    await write(mapper.event(rest))
                await write(mapper.end())
            except StreamBroken as broken:
                await write(broken.written)
                failure = (502, "upstream_failed", broken.message)
        if failure is not None:
            delivery.interrupted = True
            status, code, message = failure
            await write(mapper.error(status, code, f"{message} (request id: {call.incoming.request_id})"))
    finally:
        if watchdog is not None:
            watchdog.cancel()
    await response.eof()
