"""The three model calls end to end: Gemini generateContent (plain and streaming, G1), OpenAI
moderations (G2), and the two model lists (docs/API.md#gateway).

Streaming: auth, validation, reservation and channel selection finish before the first byte; the 200 goes
out only after an upstream 2xx. With `?alt=sse` the upstream bytes are written as they arrive; without it
the events are re-assembled into Google's JSON-array form. A failure after the first byte ends the stream
with an error event; the call is then settled on what was delivered (last `usageMetadata` seen, else the
prompt estimate), also when the client went away (the settlement runs as an owned task that outlives the
cancelled request).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any
from urllib.parse import unquote

import httpx
from sanic import Request
from sanic.response import HTTPResponse, raw
from sanic.response import json as json_response

from core.enums import ChannelType
from server.channels.table import RoutedChannel
from server.context import State
from server.relay import service
from server.relay.bodies import check_model_name, parse_generate, parse_moderation
from server.relay.caller import AUTO_GROUP, Caller, authenticate, group_usable
from server.relay.errors import GatewayError, google_error_payload
from server.relay.estimate import count_all
from server.relay.faults import is_timeout
from server.relay.upstream import gemini_request, openai_request
from server.relay.usage import SseSplitter, Usage, usage_of_body, usage_of_event

log = logging.getLogger("tollway.relay")
GEMINI_TYPES = frozenset({ChannelType.GEMINI})
OPENAI_TYPES = frozenset({ChannelType.OPENAI})
OWNED_BY: dict[int, str] = {ChannelType.OPENAI: "openai", ChannelType.GEMINI: "google"}
METHODS = ("generateContent", "streamGenerateContent")
FORWARDED_HEADERS = ("content-type",)
"""The only upstream response headers a caller ever gets (an allow-list): everything else an upstream
sends — cookies, organisation and project ids, rate-limit counters, its own request ids, any `X-…` —
stays here. Our `X-Request-Id` is added, and what we set ourselves (a stream's `Cache-Control`, the
`Retry-After` of our own 429s)."""


def parse_target(target: str) -> tuple[str, str]:
    """`{model}:{method}` (one path segment, `%3A` = `:`, a leading `models/` stripped once)."""
    target = unquote(target)
    if target.startswith("models/"):
        target = target[len("models/"):]
    model, sep, method = target.rpartition(":")
    if not sep or method not in METHODS:
        raise GatewayError(404, "not_found", f"unknown method {method or target!r}")
    if not model or "/" in model:
        raise GatewayError(400, "invalid_request", "model: must not be empty")
    return check_model_name(model), method


def _passthrough_headers(response: httpx.Response, request_id: str) -> dict[str, str]:
    """The headers of a reply built from an upstream answer: `FORWARDED_HEADERS` and our request id."""
    headers = {name: response.headers[name] for name in FORWARDED_HEADERS if name in response.headers}
    headers["X-Request-Id"] = request_id
    return headers


# ---- G1 ----------------------------------------------------------------------------------------------

async def generate(state: State, request: Request, target: str) -> HTTPResponse | None:
    model, method = parse_target(target)
    body = request.body

    def ask() -> service.Ask:
        parsed = parse_generate(body)
        completion = parsed.max_output_tokens or (2 * parsed.content_chars if parsed.wants_audio else 0)
        return service.Ask(model, GEMINI_TYPES, parsed.wants_audio, count_all(parsed.texts), completion)

    ticket = await service.open_ticket(state, request, gemini=True, ask=ask)
    prompt = ticket.prompt_tokens
    stream = method == "streamGenerateContent"

    def build(channel: RoutedChannel, key: str, upstream_model: str) -> httpx.Request:
        return gemini_request(state.upstream, channel, key, upstream_model, body, stream=stream)

    try:
        success = await service.call_upstream(state, ticket, build, stream=stream)
    except BaseException:
        await service.release(state, ticket)
        raise
    if not stream:
        assert success.body is not None
        usage = usage_of_body(success.body) or Usage(prompt, 0)
        await service.settle(state, ticket, success, usage, stream=False)
        return raw(success.body, status=success.response.status_code,
                   content_type=success.response.headers.get("content-type", "application/json"),
                   headers=_passthrough_headers(success.response, ticket.request_id))
    sse = request.args.get("alt") == "sse"
    await _stream(state, request, ticket, success, prompt, sse)
    return None


async def _stream(state: State, request: Request, ticket: service.Ticket, success: service.Success,
                  prompt: int, sse: bool) -> None:
    upstream = success.response
    usage: Usage | None = None
    interrupted = False
    first_byte_ms: int | None = None
    splitter = SseSplitter()
    renew_at = time.monotonic() + 60
    idle = state.config.stream_idle_timeout
    delivered = 0
    try:
        headers = _passthrough_headers(upstream, ticket.request_id)
        headers["content-type"] = "text/event-stream" if sse else "application/json"  # the form we send
        headers["Cache-Control"] = "no-cache"
        response = await request.respond(status=upstream.status_code, headers=headers)
        if not sse:
            await response.send(b"[")
        chunks = upstream.aiter_raw()
        failure: tuple[int, str] | None = None
        while True:
            try:
                async with asyncio.timeout(idle):
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                break
            except TimeoutError:
                failure = (504, "the upstream stream was idle for too long")
                break
            except httpx.TransportError as exc:
                failure = ((504, "the upstream stream timed out") if is_timeout(exc)
                           else (503, "the upstream stream was interrupted"))
                break
            if first_byte_ms is None:
                first_byte_ms = int((time.monotonic() - ticket.started) * 1000)
            events = splitter.feed(chunk)
            if sse:
                await response.send(chunk)
            for event in events:
                data = SseSplitter.data_of(event)
                usage = usage_of_event(data) or usage
                if not sse and data:
                    await response.send((b",\r\n" if delivered else b"") + data)
                delivered += 1
            if time.monotonic() >= renew_at:
                renew_at = time.monotonic() + 60
                await state.quota.renew(ticket.reservation)
        if failure is None:
            for event in splitter.rest():
                data = SseSplitter.data_of(event)
                usage = usage_of_event(data) or usage
                if not sse and data:
                    await response.send((b",\r\n" if delivered else b"") + data)
                delivered += 1
        if failure is not None:
            interrupted = True
            payload = google_error_payload(failure[0], failure[1], ticket.request_id)
            if sse:
                await response.send(b"data: " + payload + b"\r\n\r\n")
            else:
                await response.send((b",\r\n" if delivered else b"") + payload)
        if not sse:
            await response.send(b"]")
        await response.eof()
    except BaseException:
        interrupted = True
        raise
    finally:
        await upstream.aclose()
        settled = service.settle(state, ticket, success, usage or Usage(prompt, 0), stream=True,
                                 interrupted=interrupted, first_byte_ms=first_byte_ms)
        task = service.in_background(state, f"settle-{ticket.reservation.hold_id}", settled)
        await asyncio.shield(task)


# ---- G2 ----------------------------------------------------------------------------------------------

async def moderate(state: State, request: Request) -> HTTPResponse:
    original = request.body
    fields: dict[str, Any] = {}

    def ask() -> service.Ask:
        parsed = parse_moderation(original)
        fields.update(parsed.data)
        return service.Ask(parsed.model, OPENAI_TYPES, False, count_all(parsed.texts), 0)

    ticket = await service.open_ticket(state, request, gemini=False, ask=ask)
    prompt = ticket.prompt_tokens

    def build(channel: RoutedChannel, key: str, upstream_model: str) -> httpx.Request:
        body = original
        if upstream_model != ticket.model:
            data: dict[str, Any] = dict(fields)
            data["model"] = upstream_model
            body = json.dumps(data, ensure_ascii=False).encode()
        return openai_request(state.upstream, channel, key, "/v1/moderations", body)

    try:
        success = await service.call_upstream(state, ticket, build)
    except BaseException:
        await service.release(state, ticket)
        raise
    assert success.body is not None
    await service.settle(state, ticket, success, Usage(prompt, 0), stream=False)
    return raw(success.body, status=success.response.status_code,
               content_type=success.response.headers.get("content-type", "application/json"),
               headers=_passthrough_headers(success.response, ticket.request_id))


# ---- model lists ---------------------------------------------------------------------------------------

def _list_groups(state: State, caller: Caller) -> list[str]:
    """The groups whose models a key may list: its own, or for `auto` the usable `AutoGroups`."""
    if caller.group != AUTO_GROUP:
        return [caller.group]
    settings = state.options.settings
    return [g for g in settings.auto_groups if group_usable(settings, caller.user, g)]


async def openai_models(state: State, request: Request) -> HTTPResponse:
    await state.versions.refresh()  # list what was added or removed up to this moment, on any worker
    caller = await authenticate(state, request, gemini=False)
    served = state.channels.models(_list_groups(state, caller), GEMINI_TYPES | OPENAI_TYPES)
    data = []
    for model in sorted(served):
        if caller.key.model_limits_enabled and model not in caller.key.model_limits:
            continue
        channels = served[model]
        earliest = min(channels, key=lambda c: (c.created_time, c.id))
        owner = OWNED_BY.get(earliest.type, "custom")
        data.append({"id": model, "object": "model", "created": earliest.created_time, "owned_by": owner})
    return json_response({"object": "list", "data": data}, headers={"X-Request-Id": request.ctx.request_id})


async def gemini_models(state: State, request: Request) -> HTTPResponse:
    await state.versions.refresh()
    caller = await authenticate(state, request, gemini=True)
    served = state.channels.models(_list_groups(state, caller), GEMINI_TYPES)
    models = [{"name": f"models/{m}", "displayName": m,
               "supportedGenerationMethods": ["generateContent", "streamGenerateContent"]}
              for m in sorted(served)
              if not caller.key.model_limits_enabled or m in caller.key.model_limits]
    return json_response({"models": models}, headers={"X-Request-Id": request.ctx.request_id})
