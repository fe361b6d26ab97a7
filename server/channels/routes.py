"""The admin channel routes (management.md C.1–C.3): create, update, read, list, search, delete, and the
model catalog lists."""

from __future__ import annotations

import json
from typing import Any

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.channels import service
from server.channels.rules import INT_FIELDS, JSON_FIELDS, TEXT_FIELDS
from server.errors import BadRequest
from server.web.access import Access, route
from server.web.body import Fields, path_id, query_str
from server.web.envelope import ok
from server.web.pagination import Page
from server.web.state import principal_of, state_of

bp = Blueprint("channels")
ID_MAX = 10**18 - 1
KEYWORD_MAX = 8192  # a whole (multi-)key may be searched for


def channel_fields(f: Fields) -> dict[str, Any]:
    """The channel fields present in a body, typed: text trimmed (never the key), JSON fields as text
    (an object is accepted and serialized), `None` for an explicit null."""
    out: dict[str, Any] = {}
    for name in TEXT_FIELDS:
        if name not in f.data:
            continue
        value = f.data[name]
        if name in JSON_FIELDS and isinstance(value, dict):
            out[name] = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        else:
            out[name] = f.string(name, trim=True)
    for name in INT_FIELDS:
        if name in f.data:
            out[name] = f.integer(name)
    if "key" in f.data:
        out["key"] = f.string("key")
    return out


def _flag(request: Request, name: str) -> bool:
    return (request.args.get(name, "") or "").strip().lower() in ("1", "true")


def _type_arg(request: Request) -> int | None:
    raw = (request.args.get("type", "") or "").strip()
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 9 else None


async def _page(request: Request, *, keyword: str = "", group: str = "", model: str = "",
                type_counts: bool) -> HTTPResponse:
    state = state_of(request)
    flt = service.search_filter(state, keyword=keyword, group=group, model=model,
                                statuses=service.status_filter(request.args.get("status", "") or ""),
                                channel_type=_type_arg(request))
    return ok(await service.list_channels(state, Page.from_args(request.args), flt,
                                          id_sort=_flag(request, "id_sort"),
                                          tag_mode=_flag(request, "tag_mode"), type_counts=type_counts))


@route(bp, "GET", "/api/channel/", access=Access.ADMIN)
async def list_channels(request: Request) -> HTTPResponse:
    return await _page(request, type_counts=True)


@route(bp, "GET", "/api/channel/search", access=Access.ADMIN)
async def search_channels(request: Request) -> HTTPResponse:
    return await _page(request, keyword=query_str(request, "keyword", max_len=KEYWORD_MAX),
                       group=query_str(request, "group"), model=query_str(request, "model"),
                       type_counts=False)


@route(bp, "GET", "/api/channel/models", access=Access.ADMIN)
async def catalog_models(request: Request) -> HTTPResponse:
    return ok(service.models_catalog())


@route(bp, "GET", "/api/channel/models_enabled", access=Access.ADMIN)
async def enabled_models(request: Request) -> HTTPResponse:
    return ok(service.enabled_models(state_of(request)))


@route(bp, "GET", "/api/channel/<channel_id>", access=Access.ADMIN)
async def get_channel(request: Request, channel_id: str) -> HTTPResponse:
    return ok(await service.get_channel(state_of(request), path_id(channel_id)))


@route(bp, "POST", "/api/channel/", access=Access.ADMIN)
async def create_channels(request: Request) -> HTTPResponse:
    f = Fields.of(request)
    channel = f.data.get("channel")
    if channel is None:
        raise BadRequest("channel: is required")
    if not isinstance(channel, dict):
        raise BadRequest("channel: must be an object")
    return ok(await service.create_channels(
        state_of(request),
        mode=f.string("mode", required=True, trim=True),
        multi_key_mode=f.string("multi_key_mode", trim=True),
        name_from_key=f.boolean("batch_add_set_key_prefix_2_name", default=False),
        fields=channel_fields(Fields(channel)),
    ))


@route(bp, "PUT", "/api/channel/", access=Access.ADMIN)
async def update_channel(request: Request) -> HTTPResponse:
    f = Fields.of(request)
    return ok(await service.update_channel(
        state_of(request), f.integer("id", required=True, min_value=1, max_value=ID_MAX), channel_fields(f),
        key_mode=f.string("key_mode", trim=True), multi_key_mode=f.string("multi_key_mode", trim=True),
        actor_role=principal_of(request).role,
    ))


@route(bp, "DELETE", "/api/channel/<channel_id>", access=Access.ADMIN)
async def delete_channel(request: Request, channel_id: str) -> HTTPResponse:
    await service.delete_channel(state_of(request), path_id(channel_id))
    return ok()
