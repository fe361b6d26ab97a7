"""The tag routes (`ChannelTags`, server/channels/tags.py): enable, disable or edit every channel of a
tag, and the models of a tag."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.channels.tag_schemas import TagBody, TagEdit, TagQuery
from server.web.access import Access, route
from server.web.envelope import ok
from server.web.state import principal_of, services_of

bp = Blueprint("channel_tags")


@route(bp, "POST", "/api/channel/tag/disabled", access=Access.ADMIN, body=TagBody, reply=int)
async def disable_tag(request: Request, body: TagBody) -> HTTPResponse:
    """Disable every channel of a tag (status 2).
    The reply is the number of channels whose status changed; a tag no channel has is a 404."""
    return ok(await services_of(request).channels.tags.set_tag_status(body.tag, enabled=False))


@route(bp, "POST", "/api/channel/tag/enabled", access=Access.ADMIN, body=TagBody, reply=int)
async def enable_tag(request: Request, body: TagBody) -> HTTPResponse:
    """Enable every channel of a tag (status 1).
    The reply is the number of channels whose status changed; a tag no channel has is a 404."""
    return ok(await services_of(request).channels.tags.set_tag_status(body.tag, enabled=True))


@route(bp, "PUT", "/api/channel/tag", access=Access.ADMIN, body=TagEdit, reply=int)
async def edit_tag(request: Request, body: TagEdit) -> HTTPResponse:
    """Edit every channel of a tag at once.
    Only fields with a value change (absent, null and "" leave a field as it is); `new_tag` renames the
    tag and `groups` sets the groups. A header override that would send a keyed channel's key elsewhere
    needs root. The reply is the number of channels with the tag; a tag no channel has is a 404."""
    return ok(await services_of(request).channels.tags.edit_tag(
        body.tag, body.changes(), actor_role=principal_of(request).role))


@route(bp, "GET", "/api/channel/tag/models", access=Access.ADMIN, query=TagQuery, reply=str)
async def tag_models(request: Request, query: TagQuery) -> HTTPResponse:
    """The models of a tag's channels, as one comma list.
    Each model once, in the order it first appears (channels by id); a missing tag is a 400, a tag no
    channel has a 404."""
    return ok(await services_of(request).channels.tags.tag_models(query.tag))
