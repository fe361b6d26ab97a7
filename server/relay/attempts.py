"""Step 13 of a model call: attempts over the channels until one answers 2xx
(docs/api/channels.md#selection-and-retries, #auto-disable).

Each attempt picks a channel (priority tier, weight) not tried yet in this call, a key of it (random or
polling), maps the model, lets the exchange of the channel's type (the route format's, for that type) build
the request, and sends it. A connection error, a timeout, a 2xx that is not the route's reply (not a JSON
object; not an event stream for a streamed call) or a status in `AutomaticRetryStatusCodes` tries the next
channel; a status in
`AutomaticDisableStatusCodes` (or a retryable failure whose message holds a disable keyword) takes the
channel — or the key of a multi-key channel — out of routing first; any other upstream answer goes back to
the caller (`UpstreamPassthrough`). What an upstream said is redacted with the channel's keys before it is
stored, logged or passed on.

Every attempt is counted by its channel and result, with its time to the head of the answer and its whole
time (a stream's when it ends); every attempt after the first is a retry; every automatic disable is
counted, with its reason, by the channel table (server/metrics/calls.py).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import httpx

from backend.base import KeyValue
from core.settings import Settings
from server import metrics
from server.components.channel_table import ChannelTable, RoutedChannel, choose_key, map_model
from server.errors import AllChannelsFailed, ChannelUnavailable, UpstreamPassthrough, UpstreamTimeout
from server.metrics import DisableReason, UpstreamResult, result_of_status
from server.redaction import redact
from server.relay.call import Call
from server.upstream.client import Upstream
from server.upstream.faults import describe, is_timeout, judge, keyword_disables
from server.upstream.providers.base import DEFAULT_CAP, Asked, UnreadableReply

log = logging.getLogger("tollway.relay")


def is_event_stream(content_type: str | None) -> bool:
    return content_type is not None and content_type.split(";")[0].strip().lower() == "text/event-stream"


def mapped_status(channel: RoutedChannel, status: int) -> int:
    """`status_code_mapping` rewrites only what the caller sees."""
    value = channel.status_code_mapping.get(str(status))
    try:
        mapped = int(value) if value is not None else status
    except (TypeError, ValueError):
        return status
    return mapped if 100 <= mapped <= 599 else status


def for_conversion(asked: Asked, request_id: str, settings: Settings) -> Asked:
    """What a conversion needs besides the body: the request id (a converted reply's `id`) and, when the
    request names no output cap, the `max_tokens` a conversion for Anthropic sends
    (`claude.default_max_tokens`). Pass-through calls never pay for the copy."""
    if asked.completion_tokens is not None:
        return replace(asked, request_id=request_id)
    caps = settings.claude_default_max_tokens
    return replace(asked, request_id=request_id,
                   default_cap=caps.get(asked.model) or caps.get("default") or DEFAULT_CAP)


async def attempt(call: Call, settings: Settings, channels: ChannelTable, backend: KeyValue,
                  upstream: Upstream) -> None:
    """Fill in the call's answering channel and response (its answer too unless streamed), or raise the
    step-13 errors, or pass a non-retried upstream answer through."""
    route, op, asked = call.route, call.op, call.asked
    assert op is not None and asked is not None
    model, request_id = asked.model, call.incoming.request_id
    last_timeout = False
    for attempt_number in range(1 + settings.retry_times):
        channel = channels.pick(call.group, model, route.channel_types, call.tried)
        if channel is None:
            break
        if attempt_number:
            metrics.retried(model)
        call.tried.append(channel.id)
        call.last = channel
        key_index = await choose_key(channel, backend)
        upstream_model = map_model(channel.model_mapping, model)
        exchange = route.exchange(channel.type)
        if exchange.conversion is not None and not asked.request_id:  # once, for the first that converts
            asked = call.asked = for_conversion(asked, request_id, settings)
        request = exchange.request(channel, channel.keys[key_index], op, asked, upstream_model,
                                   call.incoming.body)
        kind, channel_id = channel.type, channel.id
        sent = time.perf_counter()
        try:
            response = await upstream.open(request)
        except httpx.TransportError as exc:
            last_timeout = is_timeout(exc)
            failed = UpstreamResult.TIMEOUT if last_timeout else UpstreamResult.CONNECT_ERROR
            metrics.upstream_attempt(kind, channel_id, failed, ttfb=None, seconds=time.perf_counter() - sent)
            reason = redact(describe(exc), channel.keys)
            log.warning("channel %d failed (request id %s): %s", channel.id, request_id, reason[:200])
            if keyword_disables(settings, reason):
                await _disable(settings, channels, channel, key_index, reason, DisableReason.UPSTREAM_KEYWORD)
            continue
        ttfb = time.perf_counter() - sent
        status = response.status
        if 200 <= status < 300:
            if asked.stream and not is_event_stream(response.headers.get("content-type")):
                # not a stream (an HTML page, a JSON answer that ignored `stream`): the next channel
                await response.close()
                metrics.upstream_attempt(kind, channel_id, UpstreamResult.BAD_REPLY, ttfb=ttfb,
                                         seconds=time.perf_counter() - sent)
                log.warning("channel %d answered a stream with %s (request id %s)", channel.id,
                            (response.headers.get("content-type") or "no content type")[:80], request_id)
                continue
            if asked.stream:  # its duration is observed when the stream ends (pipeline `_stream`)
                call.sent = sent
                metrics.upstream_attempt(kind, channel_id, UpstreamResult.OK, ttfb=ttfb, seconds=None)
            else:
                try:
                    body = await response.read()
                except httpx.TransportError as exc:
                    last_timeout = is_timeout(exc)
                    failed = UpstreamResult.TIMEOUT if last_timeout else UpstreamResult.BAD_REPLY
                    metrics.upstream_attempt(kind, channel_id, failed, ttfb=ttfb,
                                             seconds=time.perf_counter() - sent)
                    log.warning("channel %d %s its reply (request id %s)", channel.id,
                                "timed out in" if last_timeout else "dropped", request_id)
                    continue
                finally:
                    await response.close()
                try:  # a 2xx that is not the route's reply (an HTML page, a cut JSON): the next channel
                    call.answer = exchange.reply(op, asked, body)
                except UnreadableReply as unreadable:
                    metrics.upstream_attempt(kind, channel_id, UpstreamResult.BAD_REPLY, ttfb=ttfb,
                                             seconds=time.perf_counter() - sent)
                    log.warning("channel %d answered 2xx with %s (request id %s)", channel.id, unreadable,
                                request_id)
                    continue
                metrics.upstream_attempt(kind, channel_id, UpstreamResult.OK, ttfb=ttfb,
                                         seconds=time.perf_counter() - sent)
            call.channel, call.exchange = channel, exchange
            call.upstream_model, call.response = upstream_model, response
            return
        try:
            body = await response.read()
        except httpx.TransportError:
            body = b""
        finally:
            await response.close()
        metrics.upstream_attempt(kind, channel_id, result_of_status(status), ttfb=ttfb,
                                 seconds=time.perf_counter() - sent)
        # What the upstream said is stored (disable reason), logged and passed through only redacted.
        body = redact(body, channel.keys)
        error = exchange.upstream_error(status, body)
        verdict = judge(settings, error.status, error.message)
        last_timeout = status in (408, 504)
        log.warning("channel %d answered %d (request id %s)", channel.id, status, request_id)
        if verdict.disable:
            reason = f"status code {error.status}: {error.message}"
            why = DisableReason.UPSTREAM_KEYWORD if verdict.by_keyword else DisableReason.UPSTREAM_STATUS
            await _disable(settings, channels, channel, key_index, reason, why)
        if not verdict.retry:  # a converted call's error is reshaped into the route's error object
            raise UpstreamPassthrough(mapped_status(channel, status), body, error.message,
                                      same_wire=exchange.conversion is None)
    if not call.tried:
        raise ChannelUnavailable(f"no channel is available for model {model}")
    if last_timeout:
        raise UpstreamTimeout()
    raise AllChannelsFailed()


async def _disable(settings: Settings, channels: ChannelTable, channel: RoutedChannel, key_index: int,
                   reason: str, why: DisableReason) -> None:
    if not settings.automatic_disable_channel_enabled or not channel.auto_ban:
        return
    try:
        await channels.auto_disable(channel, key_index if channel.multi_key else None, reason[:255], why=why)
    except Exception:  # a failed side effect never fails the request
        log.exception("could not auto-disable channel %d", channel.id)
