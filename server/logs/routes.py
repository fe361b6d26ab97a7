"""`/api/log/*` for admins and for the logged-in user (management.md E.2).

Numbers in the query (`type`, `start_timestamp`, `end_timestamp`, `channel`, `target_timestamp`) are
non-negative integers; anything else is a 400 naming the parameter. Text filters and keywords are trimmed;
an empty value does not filter.
"""

from __future__ import annotations

import re

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from core.enums import LogType
from models.logs import LogFilter
from server.errors import BadRequest
from server.logs import service
from server.web.access import Access, route
from server.web.body import has_control_chars, query_str
from server.web.envelope import ok
from server.web.pagination import Page
from server.web.state import principal_of, state_of

bp = Blueprint("logs")

_DIGITS = re.compile(r"[0-9]{1,18}")  # 18 digits always fit a BIGINT
INT32_MAX = 2**31 - 1


def query_int(request: Request, name: str, *, required: bool = False, positive: bool = False,
              max_value: int | None = None) -> int:
    """A non-negative integer query parameter (absent or empty → 0), else a 400 naming it."""
    raw = (request.args.get(name) or "").strip()
    if not raw:
        if required:
            raise BadRequest(f"{name}: is required")
        return 0
    kind = "a positive" if positive else "a non-negative"
    if not _DIGITS.fullmatch(raw):
        raise BadRequest(f"{name}: must be {kind} integer")
    value = int(raw)
    if positive and value < 1:
        raise BadRequest(f"{name}: must be {kind} integer")
    if max_value is not None and value > max_value:
        raise BadRequest(f"{name}: must be at most {max_value}")
    return value


def query_text(request: Request, name: str) -> str:
    value = query_str(request, name, max_len=255)
    if has_control_chars(value):
        raise BadRequest(f"{name}: must not contain control characters")
    return value


def _filters(request: Request, *, admin: bool, stat: bool = False) -> LogFilter:
    """The filters of E.2: `/self*` routes never read `username` and `channel`, `stat` routes never read
    `type` and `request_id`."""
    start = query_int(request, "start_timestamp")
    end = query_int(request, "end_timestamp")
    return LogFilter(
        type=LogType.UNKNOWN if stat else query_int(request, "type", max_value=INT32_MAX),
        start=start, end=end,
        username=query_text(request, "username") if admin else "",
        token_name=query_text(request, "token_name"),
        model_name=query_text(request, "model_name"),
        channel=query_int(request, "channel") if admin else 0,
        group=query_text(request, "group"),
        request_id="" if stat else query_text(request, "request_id"),
    )


# ---- admin ------------------------------------------------------------------------------------------

@route(bp, "GET", "/api/log/", access=Access.ADMIN)
async def list_logs(request: Request) -> HTTPResponse:
    return ok(await service.list_logs(state_of(request), Page.from_args(request.args),
                                      _filters(request, admin=True)))


@route(bp, "GET", "/api/log/search", access=Access.ADMIN)
async def search_logs(request: Request) -> HTTPResponse:
    return ok(await service.search_logs(state_of(request), Page.from_args(request.args),
                                        query_text(request, "keyword")))


@route(bp, "GET", "/api/log/stat", access=Access.ADMIN)
async def log_stat(request: Request) -> HTTPResponse:
    return ok(await service.log_stat(state_of(request), _filters(request, admin=True, stat=True)))


@route(bp, "DELETE", "/api/log/", access=Access.ADMIN)
async def delete_logs(request: Request) -> HTTPResponse:
    before = query_int(request, "target_timestamp", required=True, positive=True)
    return ok(await service.delete_logs(state_of(request), principal_of(request), before))


# ---- self -------------------------------------------------------------------------------------------

@route(bp, "GET", "/api/log/self", access=Access.USER)
async def list_own_logs(request: Request) -> HTTPResponse:
    return ok(await service.list_own_logs(state_of(request), principal_of(request),
                                          Page.from_args(request.args), _filters(request, admin=False)))


@route(bp, "GET", "/api/log/self/search", access=Access.USER)
async def search_own_logs(request: Request) -> HTTPResponse:
    return ok(await service.search_own_logs(state_of(request), principal_of(request),
                                            Page.from_args(request.args), query_text(request, "keyword")))


@route(bp, "GET", "/api/log/self/stat", access=Access.USER)
async def own_log_stat(request: Request) -> HTTPResponse:
    return ok(await service.own_log_stat(state_of(request), principal_of(request),
                                         _filters(request, admin=False, stat=True)))
