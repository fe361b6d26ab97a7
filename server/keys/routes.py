"""`/api/token/…` (a user's own API keys) and `GET /api/usage/token/` (authenticated by the key itself),
gateway.md §7."""

from __future__ import annotations

from typing import Any

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.errors import BadRequest, Unauthorized
from server.keys import service
from server.web.access import Access, route
from server.web.body import Fields, path_id, query_str
from server.web.envelope import ok
from server.web.pagination import Page
from server.web.state import principal_of, state_of

bp = Blueprint("keys")
ID_MAX = 10**18 - 1


def _changes(f: Fields) -> dict[str, Any]:
    """The present (non-null) editable fields, type-checked."""
    out: dict[str, Any] = {}
    for name in ("name", "group"):
        if f.present(name):
            out[name] = f.string(name, trim=True)
    for name in ("model_limits", "allow_ips"):  # lists: each entry is trimmed by the service
        if f.present(name):
            out[name] = f.string(name)
    for name in ("expired_time", "remain_quota", "status"):
        if f.present(name):
            out[name] = f.integer(name)
    for name in ("unlimited_quota", "model_limits_enabled"):
        if f.present(name):
            out[name] = f.boolean(name)
    return out


def _flag(request: Request, name: str) -> bool:
    return (request.args.get(name, "") or "").strip().lower() not in ("", "0", "false")


@route(bp, "GET", "/api/token/", access=Access.USER)
async def list_tokens(request: Request) -> HTTPResponse:
    return ok(await service.list_keys(state_of(request), principal_of(request), Page.from_args(request.args)))


@route(bp, "GET", "/api/token/search", access=Access.USER)
async def search_tokens(request: Request) -> HTTPResponse:
    return ok(await service.list_keys(
        state_of(request), principal_of(request), Page.from_args(request.args),
        keyword=query_str(request, "keyword"), token=query_str(request, "token", trim=False),
    ))


@route(bp, "GET", "/api/token/<token_id>", access=Access.USER)
async def get_token(request: Request, token_id: str) -> HTTPResponse:
    return ok(await service.get_key(state_of(request), principal_of(request), path_id(token_id)))


@route(bp, "POST", "/api/token/<token_id>/key", access=Access.USER, critical=True)
async def reveal_token_key(request: Request, token_id: str) -> HTTPResponse:
    return ok(await service.reveal_key(state_of(request), principal_of(request), path_id(token_id)))


@route(bp, "POST", "/api/token/", access=Access.USER)
async def create_token(request: Request) -> HTTPResponse:
    changes = _changes(Fields.of(request))
    return ok(await service.create_key(state_of(request), principal_of(request), changes))


@route(bp, "PUT", "/api/token/", access=Access.USER)
async def update_token(request: Request) -> HTTPResponse:
    f = Fields.of(request)
    key_id = f.integer("id", required=True, min_value=1, max_value=ID_MAX)
    return ok(await service.update_key(state_of(request), principal_of(request), key_id, _changes(f),
                                       status_only=_flag(request, "status_only")))


@route(bp, "DELETE", "/api/token/<token_id>", access=Access.USER)
async def delete_token(request: Request, token_id: str) -> HTTPResponse:
    await service.delete_key(state_of(request), principal_of(request), path_id(token_id))
    return ok()


@route(bp, "POST", "/api/token/batch", access=Access.USER)
async def delete_tokens(request: Request) -> HTTPResponse:
    ids = Fields.of(request).data.get("ids")
    if not isinstance(ids, list) or not ids:
        raise BadRequest("ids: must be a non-empty array of token ids")
    if len(ids) > service.BATCH_MAX:
        raise BadRequest(f"ids: at most {service.BATCH_MAX} ids")
    if not all(type(i) is int and 1 <= i <= ID_MAX for i in ids):
        raise BadRequest("ids: must contain positive integers only")
    return ok(await service.delete_keys(state_of(request), principal_of(request), ids))


@route(bp, "GET", "/api/usage/token/", access=Access.API_KEY)
async def token_usage(request: Request) -> HTTPResponse:
    header = (request.headers.get("authorization", "") or "").strip()
    if header[:7].lower() == "bearer ":
        header = header[7:].strip()
    if not header:
        raise Unauthorized("an API key is required (Authorization: Bearer sk-…)")
    return ok(await service.usage(state_of(request), header))
