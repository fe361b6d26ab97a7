"""The upstream calls made on an admin's behalf: a channel test, a channel's balance, an upstream's model
list (docs/api/channels.md#channel-tests-balances-and-model-lists).

`UpstreamAdmin` is built once per worker (server/container.py) from the worker's upstream client and the
provider registry, and handed to the channel service, which decides what to call and what to do with the
answer; this module only sends, bounds and reads. Every call goes through the same `Upstream` as the model
calls — the same pooled transport and the same destination policy, so a private address is refused unless
`UPSTREAM_ALLOW_PRIVATE` allows it — under tighter bounds:

- the whole operation (every page of a model list, both requests of a balance) ends within `timeout`
  seconds (`ADMIN_UPSTREAM_TIMEOUT`, 15 by default), answers included: an upstream that hangs or drips
  is cut off at the deadline;
- at most `max_body` bytes (5 MB) of an answer are read: the body is streamed (`Upstream.open(call,
  seconds=...)`, then `next_chunk()` through `read_capped`, decoded by its `Content-Encoding`) and
  reading stops at the limit;
- anything that goes wrong — no connection, a refused destination, a timeout, an answer too large or
  unreadable, a non-2xx — is an `UpstreamFailed` (502) saying what happened and what the upstream said.

What an upstream said is redacted (`server.redaction.redact`) with the channel's keys before it goes
anywhere, and a key that cannot travel in an HTTP header is refused (400) before anything is sent: a key
never reaches a reply, a log line or an error message. The wire of each provider — URLs, headers, fields
— is in `server/upstream/providers/`; the automatic-disable rules a failed test is judged by are the
gateway's own (`faults.judge`).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from core.enums import ChannelType
from core.settings import Settings
from server.errors import BadRequest, UpstreamFailed
from server.redaction import redact
from server.upstream.client import BodyTooLarge, Upstream, read_capped
from server.upstream.faults import describe, judge, keyword_disables
from server.upstream.providers import default_base, lister
from server.upstream.providers.balances import BALANCE_TYPES, balance_query
from server.upstream.providers.base import Money, Provider, UnreadableReply, UpstreamCall

log = logging.getLogger("tollway.relay.admin")

MB = 1024 * 1024
MAX_BODY = 5 * MB
MAX_PAGES = 100  # a paged model list is followed this far at most
MESSAGE_MAX = 500
KEY_MAX = 4096  # characters: a key longer than this cannot be a provider key


@dataclass(slots=True)
class Target:
    """Where an administrative call goes: the channel's type, its address (resolved: never empty) and the
    headers its `header_override` adds. Satisfies the providers' `ChannelTarget`."""

    channel_type: int
    base_url: str
    header_override: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Tested:
    """The verdict of a channel test: `seconds` to the whole answer; on a failure what went wrong
    (redacted) and whether it is one the automatic-disable rules act on."""

    ok: bool
    seconds: float
    message: str = ""
    disables: bool = False


class _Failed(Exception):
    """A call that did not produce a usable answer; the message is redacted."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def header_safe(value: str) -> bool:
    """Text an HTTP header can carry as is: visible Latin-1 characters, spaces and tabs."""
    return all(c == "\t" or " " <= c <= "~" or "\xa0" <= c <= "\xff" for c in value)


class UpstreamAdmin:
    """The administrative upstream calls of one worker (see the module docstring)."""

    def __init__(self, upstream: Upstream, providers: Mapping[int, Provider], *, timeout: float = 15.0,
                 max_body: int = MAX_BODY) -> None:
        self.upstream = upstream
        self.providers = providers
        self.timeout = timeout
        self.max_body = max_body

    # ---- what can be asked of a channel type ----------------------------------------------------------

    def testable(self, channel_type: int) -> bool:
        """A channel test sends one of the type's own requests: only served types have them."""
        return channel_type in self.providers

    balance_types: frozenset[int] = BALANCE_TYPES
    """The channel types whose balance can be queried."""

    def balance_supported(self, channel_type: int) -> bool:
        return channel_type in self.balance_types

    def target(self, channel_type: int, base_url: str, header_override: Mapping[str, Any] | None = None
               ) -> Target:
        """The resolved address of a channel: its `base_url`, else its type's default; a 400 naming
        `base_url` when the type has none."""
        base = base_url.strip().rstrip("/") or default_base(channel_type)
        if not base:
            raise BadRequest(f"base_url: channel type {channel_type} has no default address; set base_url")
        return Target(channel_type, base, dict(header_override or {}))

    # ---- the operations -------------------------------------------------------------------------------

    async def test(self, target: Target, key: str, upstream_model: str, capabilities: Mapping[str, bool],
                   settings: Settings, *, known: Collection[str] = ()) -> Tested:
        """Send the smallest request that proves `upstream_model` works on the channel (the provider's
        `test_call`) and judge the answer. Never raises for an upstream failure: a failure is a `Tested`
        whose `disables` says whether the automatic-disable rules act on it."""
        provider = self.providers[target.channel_type]
        secrets = (key, *known)
        call = provider.test_call(target, self._checked_key(key), upstream_model, capabilities)
        started = time.monotonic()
        try:
            status, body = await self._exchange(call, secrets, started + self.timeout)
        except _Failed as failed:  # no answer: disables only by a keyword, as for a model call
            return Tested(False, 0.0, failed.message, keyword_disables(settings, failed.message))
        seconds = time.monotonic() - started
        outcome = provider.test_outcome(status, body)
        if outcome.ok:
            return Tested(True, seconds)
        if 200 <= status < 300:
            return Tested(False, seconds, _short(outcome.message))
        error = provider.upstream_error(status, body)
        verdict = judge(settings, error.status, error.message)
        return Tested(False, seconds, _short(outcome.message), verdict.disable)

    async def models(self, target: Target, key: str, *, known: Collection[str] = ()) -> list[str]:
        """The upstream's own model list, every page (at most `MAX_PAGES`), each id once, in its order."""
        provider = lister(target.channel_type)
        secrets = (key, *known)
        key = self._checked_key(key)
        deadline = time.monotonic() + self.timeout
        ids: list[str] = []
        page: str | None = None
        try:
            for _ in range(MAX_PAGES):
                call = provider.models_call(target, key, page)
                body = await self._ok_body(provider, call, secrets, deadline)
                try:
                    listed = provider.read_models(body)
                except UnreadableReply as exc:
                    raise _Failed(f"the model list cannot be read: {exc}") from None
                ids += [i for i in listed.ids if i not in ids]
                page = listed.next_page
                if page is None:
                    break
        except _Failed as failed:
            raise UpstreamFailed(failed.message) from None
        return ids

    async def balance(self, target: Target, key: str, today: datetime.date, *, seconds: float | None = None,
                      known: Collection[str] = ()) -> Money:
        """The channel's balance as the upstream reports it (`balances.py`), within `seconds` (default and
        at most: the client's timeout); a type that publishes none is a 400."""
        query = balance_query(target.channel_type, target, self._checked_key(key), today)
        if query is None:
            raise BadRequest(f"balance query is not supported for channel type {target.channel_type}")
        secrets = (key, *known)
        provider = self.providers[ChannelType.OPENAI]  # every balance API answers errors OpenAI's way
        deadline = time.monotonic() + min(seconds or self.timeout, self.timeout)
        try:
            first = await self._ok_body(provider, query.first, secrets, deadline)
            second = b""
            if query.then is not None:
                try:
                    then = query.then(first)
                except UnreadableReply as exc:
                    raise _Failed(f"the balance cannot be read: {exc}") from None
                second = await self._ok_body(provider, then, secrets, deadline)
            try:
                return query.read(first, second)
            except UnreadableReply as exc:
                raise _Failed(f"the balance cannot be read: {redact(str(exc), secrets)}") from None
        except _Failed as failed:
            raise UpstreamFailed(failed.message) from None

    # ---- sending ----------------------------------------------------------------------------------------

    @staticmethod
    def _checked_key(key: str) -> str:
        if not key:
            raise BadRequest("key: the channel has no key")
        if len(key) > KEY_MAX or not header_safe(key) or "\t" in key:
            raise BadRequest(f"key: must be at most {KEY_MAX} visible characters that an HTTP header can "
                             "carry")
        return key

    async def _ok_body(self, provider: Provider, call: UpstreamCall, secrets: Collection[str],
                       deadline: float) -> bytes:
        """The body of a 2xx answer, else `_Failed` with the upstream's (redacted) message."""
        status, body = await self._exchange(call, secrets, deadline)
        if not 200 <= status < 300:
            error = provider.upstream_error(status, body)
            raise _Failed(_short(f"status code {status}: {error.message}"))
        return body

    async def _exchange(self, call: UpstreamCall, secrets: Collection[str], deadline: float
                        ) -> tuple[int, bytes]:
        """Send `call` and read its answer by `deadline` (a `time.monotonic()` value), at most `max_body`
        bytes; (status, redacted body) or `_Failed`."""
        for name, value in call.headers.items():
            if not header_safe(value):
                raise BadRequest(f"header_override: the value of {name!r} cannot be sent in an HTTP header")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Failed(f"no answer within {self.timeout:g} s")
        try:
            async with asyncio.timeout(remaining):
                response = await self.upstream.open(call, seconds=remaining)
                try:
                    body = await read_capped(response, self.max_body)
                finally:
                    await response.close()
        except (TimeoutError, httpx.TimeoutException):  # the deadline, or the transport's own timeout
            raise _Failed(f"no answer within {self.timeout:g} s") from None
        except BodyTooLarge:
            raise _Failed(f"the answer is larger than {self.max_body / MB:g} MB") from None
        except httpx.TransportError as exc:
            reason = redact(str(exc) or describe(exc), secrets)  # the transport's own words (a refusal's)
            log.info("administrative upstream call failed: %s", reason[:200])
            raise _Failed(_short(f"the upstream could not be reached or dropped the connection ({reason})")
                          ) from None
        except (httpx.InvalidURL, ValueError, UnicodeError) as exc:
            raise _Failed(_short(f"the request could not be sent ({redact(str(exc), secrets)})")) from None
        return response.status, redact(body, secrets)


def _short(message: str) -> str:
    return message if len(message) <= MESSAGE_MAX else message[:MESSAGE_MAX - 1] + "…"
