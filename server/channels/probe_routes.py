"""The routes that test channels, tell how far a run has come and list an upstream's models
(`ChannelProbes`, server/channels/probe.py)."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from core.enums import ChannelRun
from server.channels.probe_schemas import (
    FetchModelsBody,
    RunProgress,
    RunQuery,
    TestQuery,
    TestReply,
    TestTime,
)
from server.channels.schemas import ChannelPath
from server.web.access import Access, Wire, route
from server.web.envelope import ok
from server.web.state import services_of

bp = Blueprint("channel_probes")


@route(bp, "GET", "/api/channel/test/<channel_id>", access=Access.ADMIN, path_params=ChannelPath,
       query=TestQuery, reply=TestReply, wire=Wire.RAW, calls_upstream=True)
async def test_channel(request: Request, channel_id: int, query: TestQuery) -> HTTPResponse:
    """Test a channel with one small real request to its upstream.
    The model is `model`, else the channel's `test_model`, else its first model: a moderation model is
    asked to moderate one word, a speech model to say one word in a built-in voice, any other model
    lists the upstream's models; with the key, model mapping and headers a call would use. `time` (in
    seconds) is in the reply and in `data`. A success records the test's time and latency; nothing is
    charged and no status changes. A type that cannot be tested is a 400; a failed test a 502 with the
    upstream's message (never a key) and `time` 0."""
    data = TestTime.of(await services_of(request).channels.probes.test_channel(channel_id, query.model))
    return ok(data, extra=dict(data))


@route(bp, "GET", "/api/channel/test", access=Access.ADMIN, reply=None, calls_upstream=True)
async def test_all_channels(request: Request) -> HTTPResponse:
    """Test every channel but those an admin disabled, in the background; the reply comes at once.
    A failure the automatic-disable rules act on, or an answer slower than `ChannelDisableThreshold`,
    disables an enabled channel whose `auto_ban` is 1 (when `AutomaticDisableChannelEnabled`); a passing
    test enables an automatically disabled channel again (when `AutomaticEnableChannelEnabled`). One run
    at a time in the whole deployment: a second one is a 409."""
    await services_of(request).channels.probes.start_test_all()
    return ok()


@route(bp, "GET", "/api/channel/progress", access=Access.ADMIN, query=RunQuery, reply=RunProgress)
async def run_progress(request: Request, query: RunQuery) -> HTTPResponse:
    """How far testing every channel (`run=test`) or updating every balance (`run=balance`) has come.
    Told on any worker or node: channels in the run, done, passed and failed, with the first 20 failures
    and the upstream's message; `running` false once it has ended (a finished run is told for a day).
    Every count is 0 when no run is known."""
    return ok(await services_of(request).channels.probes.run_progress(ChannelRun(query.run)))


@route(bp, "GET", "/api/channel/fetch_models/<channel_id>", access=Access.ADMIN, path_params=ChannelPath,
       reply=list[str], calls_upstream=True)
async def fetch_channel_models(request: Request, channel_id: int) -> HTTPResponse:
    """The models a channel's upstream lists, asked with the channel's first enabled key.
    Gemini channels read every page of Google's list (without the `models/` prefix); other types ask
    `/v1/models` the OpenAI way, with the channel's header override. Nothing is stored."""
    return ok(await services_of(request).channels.probes.fetch_models(channel_id))


@route(bp, "POST", "/api/channel/fetch_models", access=Access.ROOT, body=FetchModelsBody, reply=list[str],
       calls_upstream=True)
async def fetch_models(request: Request, body: FetchModelsBody) -> HTTPResponse:
    """The models an upstream lists for channel settings not saved yet.
    The first line of `key` (trimmed) is used; an empty `base_url` means the type's default address,
    and a private address is refused as when saving a channel. Nothing is stored."""
    return ok(await services_of(request).channels.probes.fetch_models_unsaved(
        channel_type=body.type, base_url=body.base_url, key=body.key))
