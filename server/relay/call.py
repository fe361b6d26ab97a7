"""What one model call carries through the pipeline (`server/relay/pipeline.py`).

`Incoming` is the request as the route's edge hands it over — headers, query, body, path, client IP,
request id and a way to open a streamed reply — so that no step but the route itself touches a Sanic
`Request`. `Call` is filled in by the steps in order; `Reply` is what a plain call answers. Of an upstream's
answer, a reply passes on only the headers `FORWARDED_HEADERS` allows (`passthrough_headers`).
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Protocol

from quota.ratelimit import UserPolicy
from quota.types import Reservation
from server.components.channel_table import RoutedChannel
from server.components.pricing import Price
from server.relay.caller import Caller
from server.upstream.client import UpstreamResponse
from server.upstream.formats.base import Answer, Exchange, Format
from server.upstream.providers.base import Asked, Operation, Params


class Sink(Protocol):
    """A streamed reply being written (Sanic's `HTTPResponse` from `request.respond`)."""

    async def send(self, data: bytes) -> None: ...

    async def eof(self) -> None: ...


class Respond(Protocol):
    """Opens the streamed reply: status and headers go out, then `send` the body."""

    def __call__(self, *, status: int, headers: dict[str, str]) -> Awaitable[Sink]: ...


@dataclass(frozen=True, slots=True)
class Incoming:
    headers: Params
    args: Params
    body: bytes
    path: str
    client_ip: str
    request_id: str
    respond: Respond


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes
    content_type: str
    headers: dict[str, str]


@dataclass(slots=True)
class Call:
    """One model call: who, what, where it may be routed, its price, its hold, and what answered."""

    incoming: Incoming
    route: Format  # what the route speaks; `exchange` is how the answering channel serves it
    target: str
    started: float = 0.0  # time.monotonic() when the hold was taken (use time, first byte)
    op: Operation | None = None
    caller: Caller | None = None
    policy: UserPolicy | None = None
    rate_due: bool = False  # the per-user limit applies and is not charged yet (the reservation carries it)
    asked: Asked | None = None
    prompt_tokens: int = 0  # the estimate the hold was sized by (billed when the upstream reports no usage)
    group: str = ""
    price: Price | None = None
    hold: Reservation | None = None
    tried: list[int] = field(default_factory=list)
    last: RoutedChannel | None = None  # the channel of the latest attempt (the call's metric labels)
    sent: float = 0.0  # time.perf_counter() when the answering attempt was sent (a stream's duration)
    # the attempt that answered 2xx
    channel: RoutedChannel | None = None
    exchange: Exchange | None = None
    upstream_model: str = ""
    response: UpstreamResponse | None = None  # streamed: its body is read by the stream step
    answer: Answer | None = None  # a plain call's reply as the caller gets it
    reply: Reply | None = None
    settled: bool = False  # set when the settlement starts: from then on the hold is never released

    @property
    def model(self) -> str:
        assert self.asked is not None
        return self.asked.model


FORWARDED_HEADERS = ("content-type",)
"""The only upstream response headers a caller ever gets (an allow-list): everything else an upstream
sends — cookies, organisation and project ids, rate-limit counters, its own request ids, any `X-…` —
stays here. Our `X-Request-Id` is added, and what we set ourselves (a stream's `Cache-Control`, the
`Retry-After` of our own 429s)."""


def passthrough_headers(response: UpstreamResponse, call: Call) -> dict[str, str]:
    """The headers of a reply built from an upstream answer: `FORWARDED_HEADERS` and our request id (in
    each header the route's wire carries it in)."""
    headers: dict[str, str] = {}
    for name in FORWARDED_HEADERS:
        value = response.headers.get(name)
        if value is not None:
            headers[name] = value
    request_id = call.incoming.request_id
    for name in call.route.dialect.request_id_headers:
        headers[name] = request_id
    return headers
