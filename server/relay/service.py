"""The model-call pipeline (docs/API.md: #gateway-admission-order, #selection-and-retries, #billing):

    authenticate (steps 1–5) → rate limit (6) → body (7) → admit: model limits (8), ability (9),
    modality (10), price (11), reservation (12) → attempts over channels (13) → settle | release

Steps 1–11 are decided on this worker's cached view (key and user memos, options, routing table). The
reservation returns the version counters of that shared state (quota/versions.py): a worker that holds an
older version releases the hold, catches up and decides again, once. A refusal decided on the cached view
reads the counters first (one round trip on that path only). So a change an admin was told is done applies
to the very next call on every worker and node, and the common path makes no extra round trip.

One reservation covers every attempt. A success settles the actual cost from the upstream's usage and
queues exactly one consume log with the counters; any failure releases the whole hold. With Redis
configured nothing here touches SQL: keys and users come from the shared caches, channels from the
in-memory routing table, balances and the usage queue from the quota engine.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import httpx
from sanic import Request

from core.enums import KeyStatus, LogType
from quota.ratelimit import ModelRateLimiter, UserPolicy, policy_for
from quota.types import InsufficientQuota, Reservation
from server.channels.catalog import SPEECH_OUTPUT, capabilities
from server.channels.table import RoutedChannel
from server.context import State
from server.redaction import redact
from server.relay.caller import AUTO_GROUP, Caller, authenticate, exhausted, group_usable
from server.relay.errors import GatewayError, UpstreamPassthrough, upstream_message
from server.relay.faults import describe, is_timeout
from server.relay.pricing import Price, price_of
from server.relay.upstream import choose_key, judge, keyword_disables, map_model, mapped_status
from server.relay.usage import Usage

log = logging.getLogger("tollway.relay")

Build = Callable[[RoutedChannel, str, str], httpx.Request]  # (channel, key, upstream model) → request

# refusals decided on the worker's cached view: re-decided once if the worker turns out to be behind
CACHED_REFUSALS = frozenset({
    "invalid_api_key", "token_disabled", "token_expired", "token_exhausted", "user_disabled",
    "ip_not_allowed", "group_not_allowed", "model_not_allowed", "model_not_found", "unsupported_modality",
    "model_price_error",
})


@dataclass(frozen=True, slots=True)
class Ask:
    """What a call asks for, read from its body (row 7)."""

    model: str
    types: frozenset[int]  # the channel types that serve it
    wants_audio: bool
    prompt_tokens: int
    completion_tokens: int


@dataclass
class Ticket:
    """One admitted call: who, what, where it may be routed, its price and its hold."""

    caller: Caller
    model: str
    group: str
    types: frozenset[int]
    price: Price
    policy: UserPolicy
    reservation: Reservation
    request_id: str
    path: str
    prompt_tokens: int  # the estimate the hold was sized by (billed when the upstream reports no usage)
    started: float = field(default_factory=time.monotonic)
    tried: list[int] = field(default_factory=list)


@dataclass
class Success:
    channel: RoutedChannel
    key_index: int
    upstream_model: str
    response: httpx.Response  # streamed: the body is not read yet unless `body` is set
    body: bytes | None


async def rate_limit(state: State, caller: Caller) -> UserPolicy:
    """Row 6: the per-user model request limit (new-api's ModelRequestRateLimit options)."""
    group = caller.user.group if caller.group == AUTO_GROUP else caller.group
    s = state.options.settings
    policy = policy_for(enabled=s.rate_limit_enabled, minutes=s.rate_limit_minutes, total=s.rate_limit_count,
                        success=s.rate_limit_success_count, group_caps=s.rate_limit_groups.get(group))
    if policy.limited:
        result = await ModelRateLimiter(state.backend).admit(
            user_id=caller.user.id, key_id=caller.key.id, key_rpm=0, key_tpm=0, user_policy=policy)
        if not result.allowed:
            retry = max(1, int(result.retry_after + 0.999))
            raise GatewayError(429, "rate_limit_exceeded", "too many requests, please retry later",
                               headers={"Retry-After": str(retry)})
    return policy


def resolve_group(state: State, caller: Caller, model: str, types: Collection[int]) -> str:
    """The key group `auto` (docs/API.md#abilities-and-groups): the first group of `AutoGroups` usable by the
    user with an enabled ability for the model; failing that, the first that offers it at all (its channels
    are down: 503), else the first usable one (nothing offers the model: 404)."""
    if caller.group != AUTO_GROUP:
        return caller.group
    settings = state.options.settings
    usable = [g for g in settings.auto_groups if group_usable(settings, caller.user, g)]
    for group in usable:
        if state.channels.serving(group, model, types):
            return group
    for group in usable:
        if state.channels.offered(group, model, types):
            return group
    return usable[0] if usable else caller.user.group


async def open_ticket(state: State, request: Request, *, gemini: bool, ask: Callable[[], Ask]) -> Ticket:
    """Rows 1–12 on this worker's cached view, confirmed current by the versions the reservation returns
    (see the module docstring). `ask` parses the body; it runs once, after the rate limit. On success
    the hold is taken and must be settled or released."""
    policy: UserPolicy | None = None
    asked: Ask | None = None
    versions = state.versions
    for last in (False, True):
        basis = versions.held()  # the decisions below are taken on state at least this new
        try:
            caller = await authenticate(state, request, gemini=gemini)
            if policy is None:
                policy = await rate_limit(state, caller)
            if asked is None:
                asked = ask()
            ticket = await admit(state, request, caller, policy, asked)
        except GatewayError as refusal:
            if last or refusal.code not in CACHED_REFUSALS or not await versions.refresh(since=basis):
                raise
            continue
        seen = ticket.reservation.versions
        if not versions.newer(seen, basis):
            return ticket
        await versions.catch_up(seen)
        if last:  # changed again meanwhile: route by the newest table, keep the admission
            return ticket
        await release(state, ticket)
    raise AssertionError("unreachable")


async def admit(state: State, request: Request, caller: Caller, policy: UserPolicy, ask: Ask) -> Ticket:
    """Rows 8–12; on success the hold is taken and must be settled or released."""
    model, types = ask.model, ask.types
    key = caller.key
    if key.model_limits_enabled and model not in key.model_limits:
        raise GatewayError(403, "model_not_allowed", f"this API key may not use model {model}")
    group = resolve_group(state, caller, model, types)
    if not state.channels.offered(group, model, types):
        raise GatewayError(404, "model_not_found", f"model {model} is not offered in group {group}")
    settings = state.options.settings
    speaks = capabilities(model, settings.model_capabilities)[SPEECH_OUTPUT]
    if ask.wants_audio and not speaks:
        raise GatewayError(400, "unsupported_modality", f"model {model} does not support speech output")
    price = price_of(settings, model, group)
    if price is None:
        raise GatewayError(400, "model_price_error", f"model {model} has no price set")
    amount = price.cost(max(ask.prompt_tokens, settings.pre_consumed_quota), ask.completion_tokens,
                        settings.quota_per_unit)
    limited = not key.unlimited_quota
    try:
        reservation = await state.quota.reserve(caller.user.id, amount, key_id=key.id, key_limited=limited)
    except InsufficientQuota as short:
        if short.account == "key" and short.available <= 0:
            raise await exhausted(state, key) from None
        raise GatewayError(429, "insufficient_quota", "insufficient quota for this request",
                           headers={"x-should-retry": "false"}) from None
    if limited and amount == 0 and reservation.key_balance <= 0:  # a free call on a key with nothing left
        await state.quota.release(reservation)
        raise await exhausted(state, key)
    state.keys.touch(key.id)
    return Ticket(caller, model, group, types, price, policy, reservation, request.ctx.request_id,
                  request.path, ask.prompt_tokens)


async def call_upstream(state: State, ticket: Ticket, build: Build, *, stream: bool = False) -> Success:
    """Attempts over the channels; raises the step-13 errors or passes a non-retried 4xx through."""
    settings = state.options.settings
    attempts = 1 + settings.retry_times
    last_timeout = False
    for _ in range(attempts):
        channel = state.channels.pick(ticket.group, ticket.model, ticket.types, ticket.tried)
        if channel is None:
            break
        ticket.tried.append(channel.id)
        key_index = await choose_key(channel, state.backend)
        upstream_model = map_model(channel.model_mapping, ticket.model)
        request = build(channel, channel.keys[key_index], upstream_model)
        try:
            response = await state.upstream.send(request)
        except httpx.TransportError as exc:
            last_timeout = is_timeout(exc)
            reason = redact(describe(exc), channel.keys)
            log.warning("channel %d failed (request id %s): %s", channel.id, ticket.request_id, reason[:200])
            if keyword_disables(settings, reason):
                await _disable(state, channel, key_index, reason)
            continue
        status = response.status_code
        if 200 <= status < 300:
            if stream:
                return Success(channel, key_index, upstream_model, response, None)
            try:
                body = await response.aread()
            except httpx.TransportError as exc:
                last_timeout = is_timeout(exc)
                log.warning("channel %d %s its reply (request id %s)", channel.id,
                            "timed out in" if last_timeout else "dropped", ticket.request_id)
                continue
            finally:
                await response.aclose()
            return Success(channel, key_index, upstream_model, response, body)
        try:
            body = await response.aread()
        except httpx.TransportError:
            body = b""
        finally:
            await response.aclose()
        # What the upstream said is stored (disable reason), logged and passed through only redacted.
        body = redact(body, channel.keys)
        message = upstream_message(body)
        verdict = judge(settings, status, body, message)
        last_timeout = status in (408, 504)
        log.warning("channel %d answered %d (request id %s)", channel.id, status, ticket.request_id)
        if verdict.disable:
            await _disable(state, channel, key_index, f"status code {verdict.status}: {message}")
        if not verdict.retry:
            raise UpstreamPassthrough(mapped_status(channel, status), body,
                                      response.headers.get("content-type", "application/json"), message)
    if not ticket.tried:
        raise GatewayError(503, "channel_unavailable", f"no channel is available for model {ticket.model}")
    if last_timeout:
        raise GatewayError(504, "upstream_timeout", "the upstream provider timed out")
    raise GatewayError(503, "upstream_failed", "every upstream channel failed for this request")


async def _disable(state: State, channel: RoutedChannel, key_index: int, reason: str) -> None:
    if not state.options.settings.automatic_disable_channel_enabled or not channel.auto_ban:
        return
    try:
        await state.channels.auto_disable(channel, key_index if channel.multi_key else None, reason[:255])
    except Exception:  # a failed side effect never fails the request
        log.exception("could not auto-disable channel %d", channel.id)


async def settle(state: State, ticket: Ticket, success: Success, usage: Usage, *, stream: bool,
                 interrupted: bool = False, first_byte_ms: int | None = None) -> int:
    """Charge the actual cost (one consume log with the counters, exactly once); returns the cost."""
    caller, price = ticket.caller, ticket.price
    settings = state.options.settings
    cost = price.cost(usage.prompt, usage.completion, settings.quota_per_unit)
    now = state.clock.now_s()
    entry: dict[str, Any] | None = None
    if settings.log_consume_enabled:
        other: dict[str, Any] = {
            **price.other(), "channels_tried": list(ticket.tried),
            "audio_output_tokens": usage.audio_output, "text_output_tokens": usage.text_output,
            "stream_interrupted": interrupted, "is_model_mapped": success.upstream_model != ticket.model,
            "upstream_model_name": success.upstream_model, "request_path": ticket.path,
            "admin_info": {"use_channel": list(ticket.tried)},
        }
        if first_byte_ms is not None:
            other["frt"] = first_byte_ms
        entry = {
            "type": LogType.CONSUME, "created_at": now, "username": caller.user.username,
            "token_name": caller.key.name, "model_name": ticket.model, "prompt_tokens": usage.prompt,
            "completion_tokens": usage.completion,
            "use_time": int(time.monotonic() - ticket.started), "is_stream": stream, "group": ticket.group,
            "request_id": ticket.request_id, "quota": cost, "other": other,
            "content": f"{ticket.model}: {usage.prompt} prompt + {usage.completion} completion tokens",
        }
    settled = await state.quota.settle(ticket.reservation, cost, channel_id=success.channel.id, log=entry)
    key = caller.key
    if settled.key_balance is not None and not key.unlimited_quota and settled.key_balance <= 0:
        try:
            await state.keys.mark_status(key, KeyStatus.EXHAUSTED)
        except Exception:
            log.exception("could not mark key %d exhausted", key.id)
    if ticket.policy.limited:
        try:
            await ModelRateLimiter(state.backend).record(
                user_id=caller.user.id, key_id=key.id, key_tpm=0, tokens=usage.prompt + usage.completion,
                success=True, user_policy=ticket.policy)
        except Exception:
            log.exception("could not record the rate-limit charge")
    return cost


async def release(state: State, ticket: Ticket) -> None:
    try:
        await state.quota.release(ticket.reservation)
    except Exception:  # the sweeper releases it after the lease
        log.exception("could not release hold %s", ticket.reservation.hold_id)


def in_background(state: State, name: str, coro: Any) -> asyncio.Task[Any]:
    """Run `coro` to its end even if the request is cancelled (client gone); the app drains it."""
    task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(coro, name=name)
    state.tasks.adopt(task)
    return task
