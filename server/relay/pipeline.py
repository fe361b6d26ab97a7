"""The model-call pipeline: one ordered list of small steps over one `Call`
(docs/api/gateway.md#gateway-admission-order, docs/api/channels.md#selection-and-retries,
docs/api/gateway.md#billing).

    read_target   the route's path: operation and model                         (404 / 400 before the key)
    decide        steps 1–12 on this worker's cached view, confirmed current:
                    authenticate (1–5) → limit_rate (6) → read_body (7) → admit: model limits (8), ability
                    (9), modality (10), price (11) → reserve (12)
    attempt       step 13: channels in turn until one answers 2xx (server/relay/attempts.py)
    respond       the upstream's answer, unchanged; a stream as it arrives (server/relay/streaming.py)
    settle        the actual cost, one consume log (server/relay/usage_log.py)
                                                                   ── and, in `finally`, the one release

A call that ends with an error instead hands one error log to the worker's buffer (server/relay/
failures.py: a known key's calls only; written by a background task, bounded per key). Every call is
counted once, with the label of how it ended (server/relay/outcomes.py).

The per-user rate limit (step 6, server/relay/user_limit.py) is decided in its place and admitted by the
reservation's own atomic step (`reserve(limits=…)`); a refusal by steps 7–11 admits it alone first, so the
429 still comes first. Its usage is charged by the settlement (`settle(charges=…)`).

Steps 1–11 are decided on this worker's cached view (key and user memos, options, routing table). The
reservation returns the version counters of that shared state (backend/versions.py): a worker that holds an
older version gives the hold back, catches up and decides again, once. A refusal decided on the cached
view reads the counters first (one round trip on that path only). So a change an admin was told is done
applies to the very next call on every worker and node, and the common path makes no extra round trip.

One reservation covers every attempt. A success settles the actual cost from the usage the upstream
reported (else Tollway's count, marked estimated) and queues exactly one consume log with the counters; a
call that ends any other way releases its whole hold, in the one `finally` of `Relay.call`. With Redis
configured nothing here touches SQL. Everything a wire decides — where the key is, what the body holds,
the upstream URL, how the reply and its stream map, the usage — is asked of the call's route format and
of the exchange of the channel that answers (server/upstream/formats/base.py); the steps are the same
for every route.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import replace
from typing import Any, Protocol

from backend.base import KeyValue, Limit, RateLimits
from backend.versions import VersionTracker
from core.enums import KeyStatus
from quota.engine import QuotaEngine
from quota.types import InsufficientQuota, RateLimited
from server import metrics
from server.clock import Clock
from server.components.catalog import SPEECH_OUTPUT, capabilities
from server.components.channel_table import ChannelTable
from server.components.keys import KeyDirectory
from server.components.options import Options
from server.components.pricing import price_of
from server.components.users import UserDirectory
from server.errors import (
    GatewayError,
    GroupNotAllowed,
    InvalidApiKey,
    IpNotAllowed,
    ModelNotAllowed,
    ModelNotFound,
    ModelPriceError,
    NotEnoughQuota,
    RateLimitExceeded,
    TokenDisabled,
    TokenExhausted,
    TokenExpired,
    UnsupportedModality,
    UserDisabled,
)
from server.metrics import Outcome
from server.relay import attempts, failures
from server.relay.call import Call, Incoming, Reply, passthrough_headers
from server.relay.caller import Caller, authenticate, call_group, exhausted, list_groups
from server.relay.outcomes import outcome_of
from server.relay.streaming import Delivery, relay_stream
from server.relay.usage_log import consume_log, streamed_usage
from server.relay.user_limit import UserLimits, user_policy
from server.upstream.client import Upstream, UpstreamResponse
from server.upstream.estimate import count_all
from server.upstream.formats.base import Format
from server.upstream.providers import owned_by
from server.upstream.providers.base import ListedModel, Provider, Usage

log = logging.getLogger("tollway.relay")

Step = Callable[[Call], Awaitable[None] | None]  # a synchronous step returns None

CACHED_REFUSALS = (InvalidApiKey, TokenDisabled, TokenExpired, TokenExhausted, UserDisabled, IpNotAllowed,
                   GroupNotAllowed, ModelNotAllowed, ModelNotFound, UnsupportedModality, ModelPriceError)
"""Refusals decided on the worker's cached view: re-decided once if the worker turns out to be behind."""

class Tasks(Protocol):
    def adopt(self, task: asyncio.Task[Any]) -> None:
        """Own a task that must run to its end even if the request that started it is cancelled."""


class CallStore(KeyValue, RateLimits, Protocol):
    """What a model call uses of the shared store: the rate limits (`ModelRateLimiter`) and the counter that
    rotates a channel's keys (`choose_key`)."""


class Relay:
    """The gateway of one worker, built from the worker's components (never from a request)."""

    def __init__(self, *, keys: KeyDirectory, users: UserDirectory, options: Options, channels: ChannelTable,
                 quota: QuotaEngine, backend: CallStore, versions: VersionTracker, upstream: Upstream,
                 clock: Clock, tasks: Tasks, stream_idle_timeout: float, stream_keepalive: float,
                 error_logs: failures.ErrorLogSink) -> None:
        self.keys, self.users, self.options, self.channels = keys, users, options, channels
        self.quota, self.backend, self.versions, self.upstream = quota, backend, versions, upstream
        self.clock, self.tasks, self.stream_idle_timeout = clock, tasks, stream_idle_timeout
        self.stream_keepalive = stream_keepalive
        self.error_logs = error_logs
        self.user_limits = UserLimits(backend, quota.partition)
        # the model call, in order
        self.steps: tuple[Step, ...] = (self.read_target, self.decide, self.attempt, self.respond,
                                        self.settle)
        # steps 1–12, on the cached view; `decide` runs them, at most twice
        self.admission: tuple[Step, ...] = (self.authenticate, self.limit_rate, self.read_body, self.admit,
                                            self.reserve)

    async def call(self, incoming: Incoming, route: Format, target: str) -> Reply | None:
        """One model call: the reply of a plain call, None once a stream has been written."""
        call = Call(incoming, route, target)
        outcome = Outcome.SUCCESS
        try:
            for step in self.steps:
                pending = step(call)
                if pending is not None:
                    await pending
            return call.reply
        except BaseException as ended:
            outcome = outcome_of(ended)
            failures.record(self.error_logs, self.options.settings, call, ended, self.clock.now_s())
            raise
        finally:
            if call.hold is not None and not call.settled:
                await self._release(call)
            # a charged call is a success however it ended (a stream cut by its client is still charged)
            last = call.last
            metrics.count_call(call.model if call.price is not None else metrics.OTHER_MODEL, call.route.name,
                               Outcome.SUCCESS if call.settled else outcome,
                               last.type if last is not None else 0, last.id if last is not None else 0)

    # ---- the steps --------------------------------------------------------------------------------------

    def read_target(self, call: Call) -> None:
        call.op = call.route.operation(call.target, call.incoming.args)

    async def decide(self, call: Call) -> None:
        """Steps 1–12 on this worker's cached view, confirmed current by the versions the reservation
        returns (see the module docstring). The rate limit and the body are read once."""
        versions = self.versions
        for last in (False, True):
            if call.hold is not None:  # decided on an older view: give the hold back, decide again
                await self._release(call)
            basis = versions.held()  # the decisions below are taken on state at least this new
            try:
                for step in self.admission:
                    pending = step(call)
                    if pending is not None:
                        await pending
            except GatewayError as refusal:
                if call.rate_due:  # step 6 comes before the refusal of a later step: a 429 first
                    await self._admit_rate(call)
                cached = isinstance(refusal, CACHED_REFUSALS)
                if last or not cached or not await versions.refresh(since=basis):
                    raise
                continue
            assert call.hold is not None
            seen = call.hold.versions
            if not versions.newer(seen, basis):
                return
            await versions.catch_up(seen)
            if last:  # changed again meanwhile: route by the newest table, keep the admission
                return

    async def authenticate(self, call: Call) -> None:
        incoming = call.incoming
        raw = call.route.dialect.caller_key(incoming.headers, incoming.args)
        call.caller = await authenticate(self.keys, self.users, self.options, self.clock, raw,
                                         incoming.client_ip)

    def limit_rate(self, call: Call) -> None:
        """Step 6: the per-user model request limit (new-api's ModelRequestRateLimit options). Decided
        here, admitted and charged by the reservation (step 12) in its own Lua call; a refusal by steps
        7–12 first admits it alone (`decide`), so a caller over the limit still gets the 429 first."""
        if call.policy is not None:  # the first pass decided it
            return
        call.policy = user_policy(self.options.settings, self._caller(call))
        call.rate_due = call.policy.limited

    def read_body(self, call: Call) -> None:
        """Step 7: what the body asks for, read once (a 400 naming the field), with the caller headers
        the route's exchanges forward (`Format.forwards`: none but for Anthropic's `anthropic-version`)."""
        if call.asked is None:
            assert call.op is not None
            route, headers = call.route, call.incoming.headers
            asked = route.read_body(call.op, call.incoming.body)
            if route.forwards:
                asked = replace(asked, headers={name: str(value) for name in route.forwards
                                                if (value := headers.get(name)) is not None})
            call.asked = asked
            call.prompt_tokens = count_all(asked.texts) + asked.counted

    def admit(self, call: Call) -> None:
        """Steps 8–11: the key's model limits, an ability for the model, speech output, a price."""
        caller, model, types = self._caller(call), call.model, call.route.channel_types
        key = caller.key
        if key.model_limits_enabled and model not in key.model_limits:
            raise ModelNotAllowed(f"this API key may not use model {model}")
        settings = self.options.settings
        group = call_group(settings, self.channels, caller, model, types)
        if not self.channels.offered(group, model, types):
            raise ModelNotFound(f"model {model} is not offered in group {group}")
        speaks = capabilities(model, settings.model_capabilities)[SPEECH_OUTPUT]
        assert call.asked is not None
        if call.asked.wants_audio and not speaks:
            raise UnsupportedModality(f"model {model} does not support speech output")
        price = price_of(settings, model, group, accept_unset=caller.user.accept_unset_model_ratio_model)
        if price is None:
            raise ModelPriceError(f"model {model} has no price set")
        call.group, call.price = group, price

    async def reserve(self, call: Call) -> None:
        """Step 12: one hold for every attempt, on the user's balance and a limited key's."""
        caller, price, asked = self._caller(call), call.price, call.asked
        assert price is not None and asked is not None
        key = caller.key
        settings = self.options.settings
        prompt = max(call.prompt_tokens, settings.pre_consumed_quota) if asked.floor else call.prompt_tokens
        output = asked.completion_tokens
        if output is None:
            output = settings.pre_consumed_completion_tokens
        amount = price.cost(Usage(prompt, output), settings.quota_per_unit)
        limited = not key.unlimited_quota
        limits: Sequence[Limit] = ()
        if call.rate_due:  # step 6, admitted in the same atomic step (charged even if the balance refuses)
            assert call.policy is not None
            limits = self.user_limits.lists(caller.user.id, key.id, call.policy)[0]
        try:
            call.hold = await self.quota.reserve(caller.user.id, amount, key_id=key.id, key_limited=limited,
                                                 limits=limits)
        except RateLimited as refused:
            call.rate_due = False
            raise RateLimitExceeded(refused.retry_after) from None
        except InsufficientQuota as short:
            call.rate_due = False

            if short.account == "key" and short.available <= 0:
                raise await exhausted(self.keys, key) from None
            raise NotEnoughQuota() from None
        call.rate_due = False
        if limited and amount == 0 and call.hold.key_balance <= 0:  # a free call on a key with nothing left
            raise await exhausted(self.keys, key)  # the hold goes back with the refusal
        call.started = time.monotonic()
        self.keys.touch(key.id)

    def attempt(self, call: Call) -> Awaitable[None]:
        return attempts.attempt(call, self.options.settings, self.channels, self.backend, self.upstream)

    def respond(self, call: Call) -> Awaitable[None] | None:
        """The upstream's 2xx answer as it came (status, bytes, content type); a stream is written now."""
        response, exchange, op, asked = call.response, call.exchange, call.op, call.asked
        assert op is not None and asked is not None and response is not None and exchange is not None
        if asked.stream:
            return self._stream(call, response)
        answer = call.answer  # read by the attempt that answered (a 2xx it could not read was retried)
        assert answer is not None
        kind = response.headers.get("content-type")
        call.reply = Reply(response.status, answer.body, "application/json" if kind is None else kind,
                           passthrough_headers(response, call))
        return None

    def settle(self, call: Call) -> Awaitable[Any] | None:
        if call.settled:  # a stream settles as it ends (`_stream`)
            return None
        answer = call.answer
        assert answer is not None
        usage = answer.usage or Usage(call.prompt_tokens, count_all(answer.texts), estimated=True)
        return self._settle(call, usage, stream=False)

    # ---- the model lists ----------------------------------------------------------------------------

    async def models(self, incoming: Incoming, provider: Provider, types: Collection[int]) -> dict[str, Any]:
        """The models the key may call on channels of `types`, in the provider's list shape (steps 1–5)."""
        await self.versions.refresh()  # list what was added or removed up to this moment, on any worker
        raw = provider.caller_key(incoming.headers, incoming.args)
        caller = await authenticate(self.keys, self.users, self.options, self.clock, raw, incoming.client_ip)
        served = self.channels.models(list_groups(self.options.settings, caller), types)
        listed = []
        for model in sorted(served):
            if caller.key.model_limits_enabled and model not in caller.key.model_limits:
                continue
            earliest = min(served[model], key=lambda c: (c.created_time, c.id))
            listed.append(ListedModel(model, earliest.created_time, owned_by(earliest.type)))
        return provider.model_list(listed)

    async def count_tokens(self, incoming: Incoming, route: Format) -> int:
        """Tollway's estimate of a body's prompt, for the caller of a key (steps 1–5 and 7 only: no
        upstream, no reservation, no charge, no log; the model need not be served)."""
        await self.versions.refresh()  # a key disabled a moment ago, on any worker, is refused
        raw = route.dialect.caller_key(incoming.headers, incoming.args)
        await authenticate(self.keys, self.users, self.options, self.clock, raw, incoming.client_ip)
        asked = route.read_body(route.operation("", incoming.args), incoming.body)
        return count_all(asked.texts) + asked.counted

    # ---- helpers ----------------------------------------------------------------------------------------

    @staticmethod
    def _caller(call: Call) -> Caller:
        assert call.caller is not None
        return call.caller

    async def _admit_rate(self, call: Call) -> None:
        """Step 6 on its own (one Lua call): for a call refused before its reservation."""
        assert call.policy is not None
        call.rate_due = False
        await self.user_limits.admit_alone(self._caller(call), call.policy)

    async def _stream(self, call: Call, upstream: UpstreamResponse) -> None:
        """Write the stream; however it ends (finished, cut, client gone), settle what was delivered in a
        task the worker owns, so a cancelled request still charges exactly once."""
        op, asked, exchange, channel = call.op, call.asked, call.exchange, call.channel
        assert op is not None and asked is not None and exchange is not None and channel is not None
        assert call.hold is not None
        mapper = exchange.stream(op, asked, channel, count_all)
        delivery = Delivery()
        try:
            headers = passthrough_headers(upstream, call)
            headers["content-type"] = mapper.form.content_type  # the form we send
            headers["Cache-Control"] = "no-cache"
            response = await call.incoming.respond(status=upstream.status, headers=headers)
            await relay_stream(call, response, mapper, self.quota, self.stream_idle_timeout, delivery,
                               self.stream_keepalive)
        except BaseException:
            delivery.interrupted = True
            raise
        finally:
            await upstream.close()
            metrics.upstream_done(channel.type, time.perf_counter() - call.sent)
            call.settled = True
            settling = self._settle(call, streamed_usage(mapper, call.prompt_tokens, delivery.interrupted),
                                    stream=True, interrupted=delivery.interrupted,
                                    first_byte_ms=delivery.first_byte_ms)
            task = asyncio.get_running_loop().create_task(settling, name=f"settle-{call.hold.hold_id}")
            self.tasks.adopt(task)
            await asyncio.shield(task)

    async def _settle(self, call: Call, usage: Usage, *, stream: bool, interrupted: bool = False,
                      first_byte_ms: int | None = None) -> int:
        """Charge the actual cost (one consume log with the counters, exactly once); returns the cost."""
        call.settled = True  # from here on the hold is settled or, if that fails, swept: never released
        caller, price, hold, channel = self._caller(call), call.price, call.hold, call.channel
        assert price is not None and hold is not None and channel is not None
        settings = self.options.settings
        cost = price.cost(usage, settings.quota_per_unit)
        entry = (consume_log(call, caller, price, usage, cost, self.clock.now_s(), stream=stream,
                             interrupted=interrupted, first_byte_ms=first_byte_ms).to_log()
                 if settings.log_consume_enabled else None)
        policy = call.policy
        charges: Sequence[Limit] = ()
        if policy is not None and policy.limited:  # the usage, charged with the settlement: exactly once
            charges = self.user_limits.lists(caller.user.id, caller.key.id, policy)[1]
        settled = await self.quota.settle(hold, cost, channel_id=channel.id, log=entry, charges=charges)
        metrics.charged(call.model, usage.prompt, usage.output, cost)
        key = caller.key
        if settled.key_balance is not None and not key.unlimited_quota and settled.key_balance <= 0:
            try:
                await self.keys.mark_status(key, KeyStatus.EXHAUSTED)
            except Exception:
                log.exception("could not mark key %d exhausted", key.id)
        return cost

    async def _release(self, call: Call) -> None:
        hold, call.hold = call.hold, None
        if hold is None:
            return
        try:
            await self.quota.release(hold)
        except Exception:  # the sweeper releases it after the lease
            log.exception("could not release hold %s", hold.hold_id)
