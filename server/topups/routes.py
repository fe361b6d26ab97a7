"""`GET /api/user/topup`, `GET /api/user/topup/self` and `POST /api/user/topup/complete`: top-up records.
(`POST /api/user/topup`, redeeming a code, is in server/redemptions/.)"""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.topups.schemas import TopUpComplete, TopUpListQuery, TopUpView
from server.web.access import Access, route
from server.web.envelope import ok
from server.web.pagination import Paged
from server.web.state import principal_of, services_of

bp = Blueprint("topups")


@route(bp, "GET", "/api/user/topup", access=Access.ADMIN, query=TopUpListQuery, reply=Paged[TopUpView])
async def list_topups(request: Request, query: TopUpListQuery) -> HTTPResponse:
    """Every user's top-up orders.
    All time, newest first; `keyword` matches a literal part of the trade number (ignoring case)."""
    return ok(await services_of(request).topups.list_orders(query.page(), keyword=query.keyword))


@route(bp, "GET", "/api/user/topup/self", access=Access.USER, query=TopUpListQuery, reply=Paged[TopUpView])
async def list_own_topups(request: Request, query: TopUpListQuery) -> HTTPResponse:
    """Your own top-up orders.
    All time, newest first; `keyword` matches a literal part of the trade number (ignoring case)."""
    return ok(await services_of(request).topups.list_orders(query.page(), keyword=query.keyword,
                                                            user_id=principal_of(request).id))


@route(bp, "POST", "/api/user/topup/complete", access=Access.ADMIN, body=TopUpComplete, reply=None)
async def complete_topup(request: Request, body: TopUpComplete) -> HTTPResponse:
    """Complete a top-up order by hand.
    A pending order, or one held for review, becomes successful and its quota (units × QuotaPerUnit) is
    added to the owner's balance exactly once, with a top-up log naming the admin. An order already
    successful answers 200 and adds nothing; a failed or expired one is a 409; an unknown one a 404."""
    await services_of(request).topups.complete(principal_of(request), body.trade_no)
    return ok()
