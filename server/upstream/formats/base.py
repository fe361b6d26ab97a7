"""The seam between the model-call pipeline and the wire formats (docs/GATEWAY.md#the-format-layer).

    caller ──route format──▶ pipeline (admission, hold, selection, retries, settlement, logs, metrics)
                                │  for the channel each attempt picks:
                                ▼
                         route.exchange(channel type) ──▶ upstream request, reply, stream, usage

A **route format** (`Format`) is what one route speaks to its caller: how the path names the operation,
what the body must hold (`Asked`), and the dialect whose keys, error objects and model lists it uses
(`Provider`). An **exchange** (`Exchange`) is how a channel of one type serves that route: the upstream
request it sends, and how the upstream's reply and stream events become the caller's bytes and the call's
usage. A pass-through exchange forwards bytes; a conversion (another wire upstream) maps them. Adding a
wire is a module that declares a `Format` and the exchanges that serve it: the pipeline asks only what is
declared here, for every route alike.

A stream is mapped event by event (`StreamMapper.event`): what it returns is written before the next
upstream read, so nothing is held back to join or re-frame events. The mapper keeps the last cumulative
usage the upstream reported and the text it delivered, for a settlement on what the caller got. A
conversion that meets an upstream event it cannot map (an error event, a fragment of a block already
closed) raises `StreamBroken`: the stream then ends with the route's error event, as a cut stream does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from server.upstream.estimate import count_all
from server.upstream.providers.base import (
    Asked,
    ChannelTarget,
    Operation,
    Params,
    Provider,
    StreamForm,
    UpstreamCall,
    UpstreamError,
    Usage,
)


def dumps(value: Any) -> str:
    """Compact JSON, as the formats write it (non-ASCII kept as is)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def estimated(asked: Asked, texts: list[str]) -> Usage:
    """Tollway's own counts for a reply that reports no usage: the prompt estimate, and the reply's texts
    counted as one (a converted reply shows them, and the call is billed on them)."""
    return Usage(count_all(asked.texts) + asked.counted, count_all(["".join(texts)]), estimated=True)


Counter = Callable[[list[str]], int]
"""Tollway's own token count of some texts (`server/upstream/estimate.py` `count_all`)."""


class StreamBroken(Exception):
    """An upstream stream a conversion cannot go on mapping; `written`: what the event mapped to before
    the break (written first). The message reaches the caller: it names no upstream detail."""

    def __init__(self, message: str, written: bytes = b"") -> None:
        super().__init__(message)
        self.message, self.written = message, written


class Channel(ChannelTarget, Protocol):
    """What an exchange reads of the channel an attempt picked (`RoutedChannel` is one)."""

    type: int
    stream_include_usage: bool


@dataclass(frozen=True, slots=True)
class Answer:
    """A complete (non-streamed) 2xx reply as the caller gets it: its bytes, the usage the upstream
    reported (None: none), and the texts of the reply, counted when there is no usage (an exchange may
    leave them out when it found usage)."""

    body: bytes
    usage: Usage | None
    texts: list[str]


class StreamMapper(Protocol):
    """One streamed reply, mapped to the caller's wire as it arrives. `event` gets each upstream event
    whole (its raw bytes, `\\n` line ends) and returns the bytes to write now (b"": nothing)."""

    form: StreamForm
    usage: Usage | None  # the last cumulative usage the upstream reported

    def delivered(self) -> list[str]:
        """The content delivered to the caller so far (text, tool names and arguments, in the pieces
        it came in: joined before they are counted), for a count when the upstream reported no usage;
        nothing when no content reached the caller."""

    def start(self) -> bytes:
        """Written right after the headers."""

    def event(self, raw: bytes) -> bytes:
        """The bytes one upstream event becomes."""

    def end(self) -> bytes:
        """Written when the upstream ended normally (after its last event)."""

    def error(self, status: int, code: str, message: str) -> bytes:
        """The one event that ends a stream cut after its first byte."""


class Exchange(Protocol):
    """How a channel of one type serves a route format: request, reply, stream, errors. `conversion`:
    (caller wire, upstream wire), e.g. ("openai", "anthropic"), when the exchange converts; None when it
    passes bytes through (an upstream error body then goes back as it came; a converted call's is
    reshaped into the route's error object)."""

    conversion: tuple[str, str] | None

    def request(self, channel: Channel, key: str, op: Operation, asked: Asked, upstream_model: str,
                body: bytes) -> UpstreamCall:
        """The upstream request (`body`: the caller's bytes, forwarded as sent unless mapped)."""

    def reply(self, op: Operation, asked: Asked, body: bytes) -> Answer:
        """A 2xx reply, as the caller gets it; `UnreadableReply` when it is not the route's reply (the
        attempt then counts as failed, and the next channel is tried)."""

    def stream(self, op: Operation, asked: Asked, channel: Channel, count: Counter) -> StreamMapper:
        """A mapper for one streamed reply."""

    def upstream_error(self, status: int, body: bytes) -> UpstreamError:
        """A failed (non-2xx) upstream answer (`body` already redacted)."""


class Format(Protocol):
    """What one route speaks to its caller (see the module docstring)."""

    name: str  # the `route` label of the metrics and the logs
    dialect: Provider  # the caller's keys, our error objects, the model list
    channel_types: frozenset[int]  # the types with an exchange for this format
    forwards: tuple[str, ...]  # caller headers an exchange may send upstream (`Asked.headers`), lowercase

    def operation(self, target: str, args: Params) -> Operation:
        """The operation the path names; 404/400 from the error tree."""

    def read_body(self, op: Operation, body: bytes) -> Asked:
        """Validate the body before anything is reserved or sent: a 400 naming the field."""

    def exchange(self, channel_type: int) -> Exchange:
        """The exchange of a channel of one of `channel_types` (KeyError for another)."""
