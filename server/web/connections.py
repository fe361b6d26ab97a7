"""A worker's HTTP/1.1 connections: how long a client may take to send a request, how long a response may
stall, and how connections end when the server stops.

Sanic's own timers (`REQUEST_TIMEOUT`, `RESPONSE_TIMEOUT`) measure the time since the last byte received
or sent, so a client that sends one header line every few seconds, or its body one byte at a time, kept
its connection (and a slot of the worker) for ever; and the same timer, applied while a handler works,
cut a model call whose upstream took longer than 60 s. `Connection` replaces those timers with deadlines:

- the head (request line and headers) must be complete `REQUEST_HEAD_TIMEOUT` seconds after the
  connection opened (its first request) or after the first byte of the request (later requests on a
  kept-alive connection); past it the client gets a 408 and the connection is closed;
- the body must be complete `REQUEST_BODY_TIMEOUT` seconds after the head, however it trickles in, also
  when nobody reads it (a refused request whose body is still arriving); past it: 408 and close (after an
  error answer Sanic would go on reading the rest of the body, with no deadline: the connection is closed
  as soon as the 408 is written, or `CUT_LINGER` seconds after the deadline);
- a request ended at a deadline is answered with its 408 and nothing else: Sanic runs the app's request
  middleware before an error answer too, which counted the guard's rate limits for it (a login whose body
  trickled in used up the critical limit and was answered 429), and would look its caller up; the app's
  pipeline skips the guard's steps when `ended_at_deadline(request)` (server/app.py). The request's
  metrics and access line name the status it is answered with, the 408, not a 500;
- between requests a connection may stay idle `KEEP_ALIVE_TIMEOUT` seconds (`server/app.py`);
- while the handler works (the whole request received, nothing answered yet) the connection sets no
  deadline: the work has its own (`UPSTREAM_TIMEOUT`, `REDIS_TIMEOUT`, …), and a slow client cannot
  prolong it;
- once the response has begun, it may go `send_idle` seconds without a byte sent (a client that stops
  reading, or a stream whose upstream is silent longer than the relay's own `STREAM_IDLE_TIMEOUT`
  handling), then the connection is closed. A long stream that keeps sending is never cut.

When the server stops (SIGTERM, SIGINT), Sanic closes the idle connections and calls `close_if_idle` on
the others: a busy connection is told to close after its response (`Connection: close`), and given
`SHUTDOWN_GRACE` seconds. A request still running then is ended: its task is cancelled with
`SHUTTING_DOWN`; a model stream catches it and ends itself cleanly with the provider's error event
(`server/relay/streaming.py`), anything else answers 503 if it has not answered yet.

The checks run on a timer per connection, at each deadline and at least every `tick` seconds (a quarter of
the shortest limit), so a connection ends at its deadline, not up to a whole period later.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from time import monotonic, perf_counter
from typing import Any

from sanic import Request
from sanic.exceptions import RequestTimeout, ServiceUnavailable
from sanic.log import error_logger

from server import logging_setup, metrics
from server.config import Config
from server.web.sanic_internals import HttpProtocol, Stage

SHUTTING_DOWN = "tollway: the server is stopping"
"""The message of the cancellation that ends a request still running when the shutdown grace is over."""

KEEP_ALIVE_TIMEOUT = 75.0
"""Seconds a connection may stay idle between two requests."""

SEND_IDLE_MARGIN = 15.0
"""A response may stall this much longer than `STREAM_IDLE_TIMEOUT` (after which the relay itself ends a
silent stream with an error event) before the connection is closed."""

CUT_LINGER = 5.0
"""Seconds a request ended at a deadline may take to write its answer (the 408) before the connection is
closed anyway."""

END_MARGIN = 5.0
"""Seconds after the shutdown grace for the requests ended then to write their last bytes and settle,
before Sanic aborts what is left (its `GRACEFUL_SHUTDOWN_TIMEOUT` is the grace plus this)."""


def is_shutdown(error: asyncio.CancelledError) -> bool:
    """Whether `error` is the cancellation that ends a request at the end of the shutdown grace."""
    return bool(error.args) and error.args[0] == SHUTTING_DOWN


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The deadlines of one connection, in seconds (see the module docstring)."""

    head: float
    body: float
    keep_alive: float
    send_idle: float
    grace: float

    @classmethod
    def of(cls, config: Config) -> ConnectionLimits:
        return cls(head=config.request_head_timeout, body=config.request_body_timeout,
                   keep_alive=KEEP_ALIVE_TIMEOUT, send_idle=config.stream_idle_timeout + SEND_IDLE_MARGIN,
                   grace=config.shutdown_grace)

    @property
    def tick(self) -> float:
        """The longest wait between two checks: a new deadline never starts less than this far away."""
        return max(0.05, min(self.head, self.body, self.keep_alive, self.send_idle) / 4)


def ended_at_deadline(request: Request) -> bool:
    """Whether a connection deadline ended `request` (its answer is the 408 the deadline chose; for a head
    that never arrived whole, `request` is the stand-in Sanic makes to answer it)."""
    protocol = getattr(request.stream, "protocol", None)
    return isinstance(protocol, Connection) and protocol.deadline_passed


class Connection(HttpProtocol):
    """Sanic's HTTP/1.1 protocol with whole-request deadlines and a bounded, clean shutdown."""

    __slots__ = ("_access_log", "_body_since", "_cut_at", "_grace_end", "_head_since", "_limits")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._limits = ConnectionLimits.of(self.app.ctx.config)
        self._access_log: bool = self.app.ctx.config.access_log
        # when the head being received began: the first request's at the opening of the connection
        self._head_since: float | None = monotonic()
        self._body_since: float | None = None  # when the head of the request in progress was complete
        self._grace_end: asyncio.TimerHandle | None = None
        self._cut_at: float | None = None  # when a deadline ended the request in progress
        self.request_handler = self._handle

    async def _handle(self, request: Request) -> None:
        """Sanic calls this as soon as a head is parsed: the body's deadline starts now."""
        self._head_since = None
        self._body_since = monotonic()
        logging_setup.begin_request()  # the previous request's id and user are not this one's
        try:
            await self.app.handle_request(request)
        finally:
            self._count(request)

    @property
    def deadline_passed(self) -> bool:
        """Whether a deadline has ended the request in progress (the connection ends with it)."""
        return self._cut_at is not None

    def _count(self, request: Request) -> None:
        """`tollway_http_requests_total` and the duration histogram: by the route's template, every
        request (the model calls run without the app's middleware, so it is counted here); and its access
        line when `ACCESS_LOG` asks for one. A request cancelled before it answered (a deadline, the end of
        the shutdown grace) is counted with the status of the error it is about to be answered with."""
        http = self._http
        if http is None:
            return
        route = request.route
        template = getattr(route.ctx, "path_template", route.path) if route is not None else metrics.UNMATCHED
        response = http.response
        pending = getattr(http, "exception", None)
        status = response.status if response is not None else getattr(pending, "status_code", 500)
        seconds = perf_counter() - http.perft0
        metrics.observe_http(template, request.method, status, seconds)
        if self._access_log:
            logging_setup.access_line(logging_setup.AccessFields(
                method=request.method, route=template, status=status, duration_ms=round(seconds * 1000, 3),
                client_ip=getattr(request.ctx, "client_ip", None)))

    def data_received(self, data: bytes) -> None:
        if self._head_since is None:
            http = self._http
            if http is not None and http.stage is Stage.IDLE and not getattr(http, "request_body", None):
                self._head_since = monotonic()  # the first byte of the next request
        super().data_received(data)

    def _verdict(self, now: float) -> tuple[float | None, Exception | None, bool]:
        """(the next deadline or None, the error to answer with, whether the connection ends now)."""
        http, limits = self._http, self._limits
        stage = http.stage
        error: Exception | None
        if getattr(http, "request_body", None) and self._body_since is not None:  # a body is arriving
            deadline = self._body_since + limits.body
            error = RequestTimeout(f"the request body did not arrive within {limits.body:g} s")
        elif stage is Stage.REQUEST or (stage is Stage.IDLE and self._head_since is not None):
            if self._head_since is None:  # a pipelined request already in the buffer
                self._head_since = now
            deadline = self._head_since + limits.head
            error = RequestTimeout(f"the request head did not arrive within {limits.head:g} s")
        elif stage is Stage.IDLE:
            deadline, error = self._time + limits.keep_alive, None
        elif stage is Stage.HANDLER:
            return None, None, False  # the handler's own deadlines apply (no websocket routes here)
        else:  # RESPONSE, FAILED: a response has begun
            deadline, error = self._time + limits.send_idle, ServiceUnavailable("Response Timeout")
        return deadline, error, now >= deadline

    def check_timeouts(self) -> None:
        """Sanic's periodic check, with the deadlines of the module docstring."""
        http, task = self._http, self._task
        if not task or http is None:
            return
        wait = self._limits.tick
        try:
            now = monotonic()
            if self._cut_at is not None:
                # Once the 408 is written, Sanic would go on reading the rest of a body, with no deadline:
                # the connection ends here instead.
                if http.stage is Stage.IDLE or now - self._cut_at >= CUT_LINGER:
                    self.close()
                    return
                wait = 0.05
            else:
                deadline, error, expired = self._verdict(now)
                if expired:
                    if error is not None and http.stage is not Stage.IDLE:
                        http.exception = error  # answered by Sanic's handler of the cancellation below
                    task.cancel("tollway: a connection deadline passed")
                    self._cut_at = now
                    wait = 0.05
                elif deadline is not None:
                    wait = min(wait, max(deadline - now, 0.01))
        except Exception:
            error_logger.exception("connection deadline check failed")
        self._callback_check_timeouts = self.loop.call_later(wait, self.check_timeouts)

    def close_if_idle(self) -> bool:
        """At shutdown: close an idle connection now; let a busy one finish its request within the grace,
        then close it (its response says `Connection: close`)."""
        if super().close_if_idle():
            return True
        http = self._http
        if http is not None:
            http.keep_alive = False
        if self._grace_end is None:
            self._grace_end = self.loop.call_later(self._limits.grace, self._end_for_shutdown)
        return False

    def _end_for_shutdown(self) -> None:
        """The grace is over: end the request still running (a stream ends itself cleanly; else 503)."""
        http, task = self._http, self._task
        if http is None or task is None or task.done():
            return
        if http.stage in (Stage.REQUEST, Stage.HANDLER):
            http.exception = ServiceUnavailable("the server is stopping")
        task.cancel(SHUTTING_DOWN)

    def close(self, timeout: float | None = None) -> None:
        if self._grace_end is not None:
            self._grace_end.cancel()
        super().close(timeout)
