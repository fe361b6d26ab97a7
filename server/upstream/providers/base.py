"""The contract between the relay pipeline and a provider's wire format (`Provider`), and the small values
that cross it.

The pipeline (`server/relay/pipeline.py`) decides who may call what, where and at what price; a provider
knows how its protocol spells things: where the caller's key is, what a body must hold, which URL and
headers an upstream call takes, where the usage is, what its error bodies look like. Nothing outside
`server/upstream/providers/` knows a wire detail of a provider.

The request description (`UpstreamCall`) is plain data — method, URL, headers, body bytes, stream flag —
so the HTTP transport under it can change without touching a provider.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from core.enums import ChannelType
from core.headers import sendable

PROTECTED_HEADERS = frozenset({"authorization", "x-goog-api-key", "api-key", "x-api-key"})
"""Header names that carry an upstream credential, of any provider: a channel's `header_override` never
sets one (the channel's key is the only credential that goes upstream)."""


class UnreadableReply(ValueError):
    """An upstream reply to an administrative query (models, balance) that does not hold what it should."""


class Params(Protocol):
    """Read access to request headers or query parameters (case-insensitive for headers)."""

    def get(self, name: str, /) -> str | None: ...


class ChannelTarget(Protocol):
    """What a provider reads of a channel to address it: the routing table's `RoutedChannel` is one."""

    base_url: str
    header_override: dict[str, Any]


@dataclass(frozen=True, slots=True)
class UpstreamCall:
    """One upstream HTTP request, independent of the transport that sends it."""

    method: str
    url: str
    headers: dict[str, str]
    body: bytes
    stream: bool = False  # the reply is read as it arrives


@dataclass(frozen=True, slots=True)
class StreamForm:
    """How a stream is written to the caller: server-sent events as the upstream sent them (`sse`), or
    the events' data re-assembled into one JSON document (`head`, `separator` between events, `tail`)."""

    sse: bool
    content_type: str
    head: bytes = b""
    separator: bytes = b""
    tail: bytes = b""


SSE = StreamForm(sse=True, content_type="text/event-stream")


@dataclass(frozen=True, slots=True)
class Operation:
    """What the route's path asks for: the operation (`name`), the model when the path names it, and
    whether the answer streams (and in which form)."""

    name: str
    model: str | None = None
    stream: bool = False
    form: StreamForm | None = None


DEFAULT_CAP = 8192
"""The output cap sent to an upstream that requires one when the request names none and the option
`claude.default_max_tokens` gives none."""


@dataclass(frozen=True, slots=True)
class Asked:
    """What the gateway needs from a call's body, read from a parsed copy."""

    model: str
    texts: list[str]  # the prompt text, for the token estimate
    wants_audio: bool
    # the output reserved for up front: the request's cap; None when it names none (the reservation then
    # takes `PreConsumedCompletionTokens`)
    completion_tokens: int | None
    fields: dict[str, Any] | None = None  # the parsed body, when the upstream body may be rebuilt from it
    stream: bool = False  # the answer streams
    include_usage: bool = False  # an OpenAI stream's caller asked for the usage chunk
    floor: bool = True  # the prompt reserved is at least `PreConsumedQuota` (not for embeddings)
    counted: int = 0  # prompt tokens the caller sent as token ids (added to the estimate of `texts`)
    # the caller's headers the route's exchanges forward upstream (its format's `forwards`), by lowercase name
    headers: Mapping[str, str] | None = None
    request_id: str = ""  # the call's (a converted reply's `id` is built from it)
    # the output cap sent to an upstream that requires one when the request names none (a chat call
    # converted for Anthropic: option `claude.default_max_tokens`)
    default_cap: int = DEFAULT_CAP


@dataclass(frozen=True, slots=True)
class Usage:
    """A reply's usage in five counts, whatever the wire (docs/api/gateway.md#billing): input tokens not read
    from a cache, cache reads, cache writes kept 5 minutes and 1 hour, and output; plus the speech split of
    the output. `estimated`: a count is Tollway's own (the upstream reported none)."""

    input: int
    output: int
    cache_read: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    audio_output: int = 0
    text_output: int = 0
    estimated: bool = False

    @property
    def prompt(self) -> int:
        """Every input token, cached or not (the consume log's `prompt_tokens`)."""
        return self.input + self.cache_read + self.cache_write_5m + self.cache_write_1h

    @property
    def cache_write(self) -> int:
        return self.cache_write_5m + self.cache_write_1h


@dataclass(frozen=True, slots=True)
class UpstreamError:
    """A failed upstream answer as the provider reads it: the status the retry and disable rules see
    (a provider may count an answer as another status: Gemini's API_KEY_INVALID 400 is a 401) and the
    upstream's own message."""

    status: int
    message: str


@dataclass(frozen=True, slots=True)
class ListedModel:
    id: str
    created: int  # the earliest serving channel's creation time
    owned_by: str


@dataclass(frozen=True, slots=True)
class ModelPage:
    """One page of an upstream's model list; `next_page` is the token of the next, if any."""

    ids: list[str]
    next_page: str | None = None


@dataclass(frozen=True, slots=True)
class TestOutcome:
    ok: bool
    message: str  # "" when ok


@dataclass(frozen=True, slots=True)
class Money:
    """An amount in a currency (`USD`, `CNY`) as an upstream reports it."""

    amount: float
    currency: str = "USD"


@dataclass(frozen=True, slots=True)
class BalanceQuery:
    """How to read a channel's balance: `first` is sent; when `then` is set, `then(first's body)` is sent
    next; `read(first body, second body or b"")` is the balance, or `UnreadableReply`."""

    first: UpstreamCall
    then: Callable[[bytes], UpstreamCall] | None
    read: Callable[[bytes, bytes], Money]


class Provider(Protocol):
    """One provider's dialect: how its callers send their key, its error objects and model list, and how
    an admin reaches a channel of its type (models, test, balance). What a route's body holds and how a
    channel serves it are the route's format (`server/upstream/formats/`). Implementations:
    `gemini.GEMINI`, `openai.OPENAI`, `anthropic.ANTHROPIC`."""

    channel_type: ChannelType
    channel_types: frozenset[int]  # the channel types that serve its calls
    owned_by: str  # `owned_by` of its models in OpenAI-shaped model lists
    default_base: str
    request_id_headers: tuple[str, ...]  # the reply headers that carry our request id (every reply)

    # ---- the caller's request -------------------------------------------------------------------------
    def caller_key(self, headers: Params, args: Params) -> str:
        """The API key the caller sent, "" when none."""

    # ---- our answers in this wire ---------------------------------------------------------------------
    def refusal_status(self, status: int, code: str) -> int:
        """The HTTP status of a refusal of ours (`status`, `code`) on this wire."""

    def error_body(self, status: int, code: str, message: str, param: str | None, *, upstream: bool
                   ) -> bytes:
        """Our error object; `upstream` when it carries a non-retried upstream answer's status and message."""

    def is_error_body(self, body: bytes) -> bool:
        """An upstream error body already in this wire's shape (passed through as it came)."""

    def stream_error(self, status: int, message: str) -> bytes:
        """The error object that ends a stream cut short after its first byte."""

    def model_list(self, models: Sequence[ListedModel]) -> dict[str, Any]:
        """The model-list reply of this wire."""

    # ---- channel administration -----------------------------------------------------------------------
    def models_call(self, channel: ChannelTarget, key: str, page: str | None = None) -> UpstreamCall:
        """The upstream's own model list (one page)."""

    def read_models(self, body: bytes) -> ModelPage:
        """A reply to `models_call`; `UnreadableReply` when it is not one."""

    def test_call(self, channel: ChannelTarget, key: str, model: str, capabilities: Mapping[str, bool]
                  ) -> UpstreamCall:
        """The smallest request that proves `model` works on the channel."""

    def test_outcome(self, status: int, body: bytes) -> TestOutcome:
        """The verdict on a reply to `test_call`."""

    def upstream_error(self, status: int, body: bytes) -> UpstreamError:
        """Read a failed (non-2xx) upstream answer (`body` already redacted)."""

    def balance_query(self, channel: ChannelTarget, key: str, today: Any) -> BalanceQuery | None:
        """How to read the channel's balance (`today`: a `datetime.date`); None when there is no way."""


# ---- helpers the providers share --------------------------------------------------------------------------

def base_of(channel: ChannelTarget, default: str) -> str:
    return channel.base_url or default


def upstream_headers(channel: ChannelTarget, auth: dict[str, str], accept: str) -> dict[str, str]:
    """JSON headers, the channel's `header_override`, then the credential. Of the override, never a
    credential header nor one that frames the request (`core.headers`: refused on save, and skipped here
    for a channel stored before that rule)."""
    headers = {"Content-Type": "application/json", "Accept": accept}
    for name, value in channel.header_override.items():
        if isinstance(value, str) and name.lower() not in PROTECTED_HEADERS and sendable(name):
            for same in [h for h in headers if h.lower() == name.lower()]:  # replaced, not sent twice
                del headers[same]
            headers[name] = value
    headers.update(auth)
    return headers


def bearer(header: str) -> str:
    """The credential of an `Authorization` header: `Bearer <x>` or bare `<x>`."""
    header = header.strip()
    if header[:7].lower() == "bearer ":
        header = header[7:].strip()
    return header


def error_object(body: bytes) -> dict[str, Any] | None:
    """The `error` object of a JSON body, if it has one."""
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    error = value.get("error") if isinstance(value, dict) else None
    return error if isinstance(error, dict) else None


def message_of(body: bytes) -> str:
    """An upstream's own message (`error.message` or `message`), else the first 512 characters."""
    error = error_object(body)
    if error is not None and isinstance(error.get("message"), str):
        return str(error["message"])
    try:
        value = json.loads(body)
        if isinstance(value, dict) and isinstance(value.get("message"), str):
            return str(value["message"])
    except (ValueError, UnicodeDecodeError):
        pass
    return body[:512].decode("utf-8", "replace")


def json_object(body: bytes) -> dict[str, Any]:
    """A reply that must be a JSON object, else `UnreadableReply`."""
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise UnreadableReply("the reply is not JSON") from None
    if not isinstance(value, dict):
        raise UnreadableReply("the reply is not a JSON object")
    return value


def passed(status: int, body: bytes) -> TestOutcome:
    """A 2xx whose body is a JSON object passes (every test request answers one); anything else fails
    with the upstream's message."""
    if 200 <= status < 300:
        try:
            json_object(body)
        except UnreadableReply as exc:
            return TestOutcome(False, f"status code {status}, but {exc}")
        return TestOutcome(True, "")
    return TestOutcome(False, f"status code {status}: {message_of(body)}")
