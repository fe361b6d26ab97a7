"""The routes of the channel tools that call no upstream (`ChannelTools`, server/channels/tools.py):
delete every disabled channel, batch delete and tag, copy, abilities rebuild."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.channels.schemas import ChannelPath
from server.channels.tool_schemas import ChannelIds, ChannelIdsTag, CopyQuery, CreatedChannel, FixResult
from server.web.access import Access, route
from server.web.envelope import ok
from server.web.state import services_of

bp = Blueprint("channel_tools")


@route(bp, "DELETE", "/api/channel/disabled", access=Access.ADMIN, reply=int)
async def delete_disabled_channels(request: Request) -> HTTPResponse:
    """Delete every disabled channel (status 2 or 3) and its abilities.
    The reply is the number of channels deleted."""
    return ok(await services_of(request).channels.tools.delete_disabled())


@route(bp, "POST", "/api/channel/batch", access=Access.ADMIN, body=ChannelIds, reply=int)
async def delete_channels(request: Request, body: ChannelIds) -> HTTPResponse:
    """Delete several channels (1–1000 ids) and their abilities in one transaction.
    Unknown ids are skipped; the reply is the number of channels actually deleted."""
    return ok(await services_of(request).channels.tools.delete_many(body.ids))


@route(bp, "POST", "/api/channel/batch/tag", access=Access.ADMIN, body=ChannelIdsTag, reply=int)
async def tag_channels(request: Request, body: ChannelIdsTag) -> HTTPResponse:
    """Set the tag of several channels (1–1000 ids); a null or empty tag clears it.
    Unknown ids are skipped; the reply is the number of channels tagged."""
    return ok(await services_of(request).channels.tools.tag_many(body.ids, body.tag))


@route(bp, "POST", "/api/channel/copy/<channel_id>", access=Access.ADMIN, path_params=ChannelPath,
       query=CopyQuery, reply=CreatedChannel)
async def copy_channel(request: Request, channel_id: int, query: CopyQuery) -> HTTPResponse:
    """Copy a channel: the same keys and settings, named with `suffix` appended (default `_copy`).
    The copy is created now, has no test result, and with `reset_balance` (default true) starts with a
    zero balance and used quota. The reply is the new channel's id."""
    return ok(await services_of(request).channels.tools.copy_channel(
        channel_id, suffix=query.suffix, reset_balance=query.reset_balance))


@route(bp, "POST", "/api/channel/fix", access=Access.ADMIN, reply=FixResult)
async def fix_abilities(request: Request) -> HTTPResponse:
    """Rebuild every channel's abilities from the channel.
    Counts the channels rebuilt (`success`) and those that could not be (`fails`); a second rebuild
    while one runs on any worker or node is a 409."""
    return ok(await services_of(request).channels.tools.fix_abilities())
