"""`/api/redemption/…` (the admin's redemption codes) and `POST /api/user/topup` (redeeming one)."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.redemptions.schemas import (
    Redeem,
    RedemptionCreate,
    RedemptionListQuery,
    RedemptionPath,
    RedemptionSearchQuery,
    RedemptionUpdate,
    RedemptionUpdateQuery,
    RedemptionView,
)
from server.web.access import Access, route
from server.web.envelope import ok
from server.web.no_store import Secret
from server.web.pagination import Paged
from server.web.state import principal_of, services_of

bp = Blueprint("redemptions")


@route(bp, "GET", "/api/redemption/", access=Access.ADMIN, query=RedemptionListQuery,
       reply=Paged[RedemptionView], secret=True)
async def list_redemptions(request: Request, query: RedemptionListQuery) -> HTTPResponse:
    """List redemption codes.
    Live (not deleted) codes, newest first, keys in full."""
    return ok(await services_of(request).redemptions.list_codes(query.page()))


@route(bp, "GET", "/api/redemption/search", access=Access.ADMIN, query=RedemptionSearchQuery,
       reply=Paged[RedemptionView], secret=True)
async def search_redemptions(request: Request, query: RedemptionSearchQuery) -> HTTPResponse:
    """Search redemption codes.
    Digits match the id, a whole 32-character key matches that code, and any keyword matches names that
    start with it (ignoring case); an empty keyword lists every live code."""
    return ok(await services_of(request).redemptions.list_codes(query.page(), keyword=query.keyword))


@route(bp, "GET", "/api/redemption/<redemption_id>", access=Access.ADMIN, path_params=RedemptionPath,
       reply=RedemptionView, secret=True)
async def get_redemption(request: Request, redemption_id: int) -> HTTPResponse:
    """One redemption code.
    A deleted code is a 404."""
    return ok(await services_of(request).redemptions.get_code(redemption_id))


@route(bp, "POST", "/api/redemption/", access=Access.ADMIN, body=RedemptionCreate, reply=list[Secret],
       secret=True)
async def create_redemptions(request: Request, body: RedemptionCreate) -> HTTPResponse:
    """Create redemption codes.
    `count` (1–100) enabled codes, each adding `quota` (more than 0) once, made in one transaction: all
    of them or none. `expired_time` is 0 (never) or a future time. The reply lists the new keys."""
    return ok(await services_of(request).redemptions.create_codes(
        principal_of(request), name=body.name, quota=body.quota, count=body.count,
        expired_time=body.expired_time))


@route(bp, "PUT", "/api/redemption/", access=Access.ADMIN, body=RedemptionUpdate, query=RedemptionUpdateQuery,
       reply=RedemptionView, secret=True)
async def update_redemption(request: Request, body: RedemptionUpdate, query: RedemptionUpdateQuery
                            ) -> HTTPResponse:
    """Edit a redemption code.
    `name`, `quota` and `expired_time` change where sent, checked as on create; with `status_only`, only
    `status`, which must be 1 (enabled) or 2 (disabled). A used code cannot be edited (409)."""
    return ok(await services_of(request).redemptions.update_code(body.id, body.changes(),
                                                                 status_only=query.status_only))


@route(bp, "DELETE", "/api/redemption/invalid", access=Access.ADMIN, reply=int)
async def delete_invalid_redemptions(request: Request) -> HTTPResponse:
    """Delete every code that can no longer be redeemed.
    Soft-deletes used, disabled and expired codes; the reply is how many."""
    return ok(await services_of(request).redemptions.delete_invalid())


@route(bp, "DELETE", "/api/redemption/<redemption_id>", access=Access.ADMIN, path_params=RedemptionPath,
       reply=None)
async def delete_redemption(request: Request, redemption_id: int) -> HTTPResponse:
    """Delete a redemption code.
    A soft delete: the code can no longer be redeemed, read or listed."""
    await services_of(request).redemptions.delete_code(redemption_id)
    return ok()


@route(bp, "POST", "/api/user/topup", access=Access.USER, critical=True, body=Redeem, reply=int)
async def redeem(request: Request, body: Redeem) -> HTTPResponse:
    """Redeem a code for quota.
    The code is used exactly once, however many attempts arrive at once on any server; the reply is the
    quota added, which is spendable from the next request on. A code that does not exist or was deleted,
    is disabled or has expired is a 400 saying which; a code already used is a 409."""
    return ok(await services_of(request).redemptions.redeem(principal_of(request), body.key))
