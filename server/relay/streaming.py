"""The streamed answer of a model call: upstream events to the caller as they arrive.

The 200 goes out only after an upstream 2xx (steps 1–13 are done by then, so earlier failures still retry
or answer a JSON error). In the SSE form the upstream's bytes are written unchanged; in a JSON form each
event's data is written between the form's head, separators and tail. The usage of the last event that
reports one is what the call is charged on. A failure after the first byte (a drop, a timeout, or no byte
for `idle` seconds) ends the stream with the provider's error object; the hold is renewed every minute
while the stream runs. So does the end of the shutdown grace (`server/web/connections.py`): a stream still
running when the server stops is ended with a 503 error object, not cut, and settled on what it delivered.
"""

from __future__ import annotations

import asyncio
import time

import httpx

from quota.engine import QuotaEngine
from server.relay.call import Call, Sink
from server.upstream.faults import is_timeout
from server.upstream.providers.base import SseSplitter, StreamForm, Usage
from server.web.connections import is_shutdown

RENEW_EVERY = 60.0


class Delivery:
    """What a stream delivered, for its settlement."""

    __slots__ = ("first_byte_ms", "interrupted", "usage")

    def __init__(self) -> None:
        self.usage: Usage | None = None
        self.interrupted = False
        self.first_byte_ms: int | None = None


async def relay_stream(call: Call, response: Sink, form: StreamForm, quota: QuotaEngine, idle: float,
                       delivery: Delivery) -> None:
    """Write the upstream's events to `response` (already opened) and end it."""
    upstream, provider, hold = call.response, call.provider, call.hold
    assert upstream is not None and hold is not None
    sse, separator = form.sse, form.separator
    splitter = SseSplitter()
    renew_at = time.monotonic() + RENEW_EVERY
    delivered = 0
    if form.head:
        await response.send(form.head)
    failure: tuple[int, str] | None = None
    while True:
        try:
            async with asyncio.timeout(idle):
                chunk = await upstream.next_chunk()
        except TimeoutError:
            failure = (504, "the upstream stream was idle for too long")
            break
        except httpx.TransportError as exc:
            failure = ((504, "the upstream stream timed out") if is_timeout(exc)
                       else (503, "the upstream stream was interrupted"))
            break
        except asyncio.CancelledError as exc:
            if not is_shutdown(exc):
                raise  # the client went away: nothing more to write
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            failure = (503, "the server is stopping")
            break
        if not chunk:  # the end
            break
        if delivery.first_byte_ms is None:
            delivery.first_byte_ms = int((time.monotonic() - call.started) * 1000)
        events = splitter.feed(chunk)
        if sse:
            await response.send(chunk)
        for event in events:
            data = SseSplitter.data_of(event)
            delivery.usage = provider.usage_of_event(data) or delivery.usage
            if not sse and data:
                await response.send((separator if delivered else b"") + data)
            delivered += 1
        if time.monotonic() >= renew_at:
            renew_at = time.monotonic() + RENEW_EVERY
            await quota.renew(hold)
    if failure is None:
        for event in splitter.rest():
            data = SseSplitter.data_of(event)
            delivery.usage = provider.usage_of_event(data) or delivery.usage
            if not sse and data:
                await response.send((separator if delivered else b"") + data)
            delivered += 1
    else:
        delivery.interrupted = True
        payload = provider.stream_error(failure[0], f"{failure[1]} (request id: {call.incoming.request_id})")
        await response.send(form.error_event(payload, delivered))
    if form.tail:
        await response.send(form.tail)
    await response.eof()
