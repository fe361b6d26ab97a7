"""`/api/token/…` (a user's own API keys) and `GET /api/usage/token/` (authenticated by the key itself)."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.errors import Unauthenticated
from server.keys.schemas import (
    RevealedKey,
    TokenBatch,
    TokenFields,
    TokenListQuery,
    TokenPath,
    TokenSearchQuery,
    TokenUpdate,
    TokenUpdateQuery,
    TokenUsage,
    TokenView,
)
from server.web.access import Access, route
from server.web.envelope import ok
from server.web.pagination import Paged
from server.web.state import principal_of, services_of

bp = Blueprint("keys")


@route(bp, "GET", "/api/token/", access=Access.USER, query=TokenListQuery, reply=Paged[TokenView],
       secret=True)
async def list_tokens(request: Request, query: TokenListQuery) -> HTTPResponse:
    """List your API keys.
    Keys are masked; everyone, root included, sees only their own keys."""
    return ok(await services_of(request).keys.list_keys(principal_of(request), query.page()))


@route(bp, "GET", "/api/token/search", access=Access.USER, query=TokenSearchQuery, reply=Paged[TokenView],
       secret=True)
async def search_tokens(request: Request, query: TokenSearchQuery) -> HTTPResponse:
    """Search your API keys by name or by the key itself.
    `token` must be a whole key (with or without `sk-`): a partial key matches nothing."""
    return ok(await services_of(request).keys.list_keys(principal_of(request), query.page(),
                                                        keyword=query.keyword, token=query.token))


@route(bp, "GET", "/api/token/<token_id>", access=Access.USER, path_params=TokenPath, reply=TokenView,
       secret=True)
async def get_token(request: Request, token_id: int) -> HTTPResponse:
    """One of your API keys (masked)."""
    return ok(await services_of(request).keys.get_key(principal_of(request), token_id))


@route(bp, "POST", "/api/token/<token_id>/key", access=Access.USER, critical=True, path_params=TokenPath,
       reply=RevealedKey, secret=True)
async def reveal_token_key(request: Request, token_id: int) -> HTTPResponse:
    """Show one of your API keys in full.
    `key` is the 48 characters without `sk-`, as new-api answers (its console, and ours, show and copy
    `sk-` + key); rate-limited like the other sensitive routes."""
    return ok(await services_of(request).keys.reveal_key(principal_of(request), token_id))


@route(bp, "POST", "/api/token/", access=Access.USER, body=TokenFields, reply=TokenView, secret=True)
async def create_token(request: Request, body: TokenFields) -> HTTPResponse:
    """Create an API key.
    The reply shows the whole key (`sk-…`) this once; later reads mask it. A user has at most 1000 live
    keys; `status` is ignored (a new key is enabled)."""
    return ok(await services_of(request).keys.create_key(principal_of(request), body.changes()))


@route(bp, "PUT", "/api/token/", access=Access.USER, body=TokenUpdate, query=TokenUpdateQuery,
       reply=TokenView, secret=True)
async def update_token(request: Request, body: TokenUpdate, query: TokenUpdateQuery) -> HTTPResponse:
    """Edit one of your API keys.
    Only the fields sent change; with `status_only`, only `status`. Stored values sent back unchanged
    are accepted; enabling a key checks that it has neither expired nor run out."""
    return ok(await services_of(request).keys.update_key(principal_of(request), body.id, body.changes(),
                                                         status_only=query.status_only))


@route(bp, "DELETE", "/api/token/<token_id>", access=Access.USER, path_params=TokenPath, reply=None)
async def delete_token(request: Request, token_id: int) -> HTTPResponse:
    """Delete one of your API keys (it stops working at once)."""
    await services_of(request).keys.delete_key(principal_of(request), token_id)
    return ok()


@route(bp, "POST", "/api/token/batch", access=Access.USER, body=TokenBatch, reply=int)
async def delete_tokens(request: Request, body: TokenBatch) -> HTTPResponse:
    """Delete several of your API keys.
    Ids that are not your live keys are skipped; the reply is how many were deleted."""
    return ok(await services_of(request).keys.delete_keys(principal_of(request), body.ids))


@route(bp, "GET", "/api/usage/token/", access=Access.API_KEY, reply=TokenUsage)
async def token_usage(request: Request) -> HTTPResponse:
    """The balance of the API key sent in `Authorization: Bearer`.
    Answers for a key whatever its status (disabled, expired, exhausted), but not for a deleted one."""
    header = (request.headers.get("authorization", "") or "").strip()
    if header[:7].lower() == "bearer ":
        header = header[7:].strip()
    if not header:
        raise Unauthenticated("an API key is required (Authorization: Bearer sk-…)")
    return ok(await services_of(request).keys.usage(header))
