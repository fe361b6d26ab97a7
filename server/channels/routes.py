"""The channel routes proper (`ChannelCrud`, server/channels/crud.py): create, update, read, list, search,
delete and the model catalog lists. The other channel routes have a module per service: tag_routes.py,
key_routes.py, probe_routes.py, balance_routes.py and tool_routes.py, each with its blueprint
(registered in server/app.py); a handler calls exactly one service."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.channels.crud import models_catalog, status_filter
from server.channels.schemas import (
    CatalogModel,
    ChannelCreate,
    ChannelListQuery,
    ChannelPage,
    ChannelPath,
    ChannelSearchQuery,
    ChannelUpdate,
    ChannelView,
)
from server.web.access import Access, route
from server.web.envelope import ok
from server.web.state import principal_of, services_of

bp = Blueprint("channels")


async def _page(request: Request, query: ChannelListQuery, *, keyword: str = "", group: str = "",
                model: str = "", tag: str = "", type_counts: bool) -> HTTPResponse:
    crud = services_of(request).channels.crud
    flt = crud.search_filter(keyword=keyword, group=group, model=model, tag=tag,
                             statuses=status_filter(query.status), channel_type=query.type)
    return ok(await crud.list_channels(query.page(), flt, id_sort=query.id_sort, tag_mode=query.tag_mode,
                                       type_counts=type_counts))


@route(bp, "GET", "/api/channel/", access=Access.ADMIN, query=ChannelListQuery, reply=ChannelPage)
async def list_channels(request: Request, query: ChannelListQuery) -> HTTPResponse:
    """List channels, by priority (or id), with the number of channels of each type.
    Keys are never shown."""
    return await _page(request, query, type_counts=True)


@route(bp, "GET", "/api/channel/search", access=Access.ADMIN, query=ChannelSearchQuery, reply=ChannelPage)
async def search_channels(request: Request, query: ChannelSearchQuery) -> HTTPResponse:
    """Search channels by keyword, group, model, tag, status and type.
    A keyword that is a whole key finds the channel holding it; a tag matches whole, case-sensitive."""
    return await _page(request, query, keyword=query.keyword, group=query.group, model=query.model,
                       tag=query.tag, type_counts=False)


@route(bp, "GET", "/api/channel/models", access=Access.ADMIN, reply=list[CatalogModel])
async def catalog_models(request: Request) -> HTTPResponse:
    """The built-in model catalog (the models Tollway knows without asking a provider)."""
    return ok(models_catalog())


@route(bp, "GET", "/api/channel/models_enabled", access=Access.ADMIN, reply=list[str])
async def enabled_models(request: Request) -> HTTPResponse:
    """The models some enabled channel serves."""
    return ok(services_of(request).channels.crud.enabled_models())


@route(bp, "GET", "/api/channel/<channel_id>", access=Access.ADMIN, path_params=ChannelPath,
       reply=ChannelView)
async def get_channel(request: Request, channel_id: int) -> HTTPResponse:
    """One channel (its key is never shown)."""
    return ok(await services_of(request).channels.crud.get_channel(channel_id))


@route(bp, "POST", "/api/channel/", access=Access.ADMIN, body=ChannelCreate, reply=list[int])
async def create_channels(request: Request, body: ChannelCreate) -> HTTPResponse:
    """Create one channel, one per key line (batch), or one channel with several keys.
    `name` and `type` are required; a `base_url` must not point at a private address. The reply is the
    new ids, in key order."""
    return ok(await services_of(request).channels.crud.create_channels(
        mode=body.mode, multi_key_mode=body.multi_key_mode,
        name_from_key=body.batch_add_set_key_prefix_2_name, fields=body.channel.fields(),
    ))


@route(bp, "PUT", "/api/channel/", access=Access.ADMIN, body=ChannelUpdate, reply=ChannelView)
async def update_channel(request: Request, body: ChannelUpdate) -> HTTPResponse:
    """Edit a channel.
    Only the fields sent change (null clears an optional field). Changing where a keyed channel's key
    is sent (type, base URL, header override, proxy) needs root or the key in the same request."""
    return ok(await services_of(request).channels.crud.update_channel(
        body.id, body.fields(), key_mode=body.key_mode, multi_key_mode=body.multi_key_mode,
        actor_role=principal_of(request).role,
    ))


@route(bp, "DELETE", "/api/channel/<channel_id>", access=Access.ADMIN, path_params=ChannelPath, reply=None)
async def delete_channel(request: Request, channel_id: int) -> HTTPResponse:
    """Delete a channel (it stops serving at once)."""
    await services_of(request).channels.crud.delete_channel(channel_id)
    return ok()
