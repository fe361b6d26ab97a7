"""`/api/log/*` for admins and for the logged-in user; the query rules are in `server.logs.schemas`."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.errors import Unauthenticated
from server.logs.schemas import (
    Dashboard,
    DataQuery,
    DeleteQuery,
    LogQuery,
    LogStat,
    LogView,
    OwnDataQuery,
    OwnLogQuery,
    OwnLogView,
    OwnStatQuery,
    SearchQuery,
    StatQuery,
    TopQuery,
    UsageBucket,
    UsersDataQuery,
)
from server.web.access import Access, route
from server.web.envelope import ok
from server.web.pagination import Paged
from server.web.state import principal_of, services_of

bp = Blueprint("logs")


# ---- admin ------------------------------------------------------------------------------------------

@route(bp, "GET", "/api/log/", access=Access.ADMIN, query=LogQuery, reply=Paged[LogView])
async def list_logs(request: Request, query: LogQuery) -> HTTPResponse:
    """Every log row, newest first, filtered.
    Name filters are exact but `model_name_part` (a literal part of the model name, ignoring case); a zero
    or empty filter does not filter."""
    return ok(await services_of(request).logs.list_logs(query.page(), query.filters()))


@route(bp, "GET", "/api/log/search", access=Access.ADMIN, query=SearchQuery, reply=Paged[LogView])
async def search_logs(request: Request, query: SearchQuery) -> HTTPResponse:
    """Log rows matching a keyword.
    A row matches when a name column (user, key, model) equals the keyword or its content contains it
    (case-insensitive, taken literally)."""
    return ok(await services_of(request).logs.search_logs(query.page(), query.keyword))


@route(bp, "GET", "/api/log/stat", access=Access.ADMIN, query=StatQuery, reply=LogStat)
async def log_stat(request: Request, query: StatQuery) -> HTTPResponse:
    """Usage statistics.
    The quota used by the matching consume rows, and the requests and tokens of those in the last 60
    seconds."""
    return ok(await services_of(request).logs.log_stat(query.filters()))


@route(bp, "DELETE", "/api/log/", access=Access.ADMIN, query=DeleteQuery, reply=int)
async def delete_logs(request: Request, query: DeleteQuery) -> HTTPResponse:
    """Delete every log row created before `target_timestamp`; the reply is how many went."""
    return ok(await services_of(request).logs.delete_logs(principal_of(request), query.target_timestamp))


# ---- self -------------------------------------------------------------------------------------------

@route(bp, "GET", "/api/log/self", access=Access.USER, query=OwnLogQuery, reply=Paged[OwnLogView])
async def list_own_logs(request: Request, query: OwnLogQuery) -> HTTPResponse:
    """Your own log rows, newest first, filtered.
    Channel ids and admin details are never shown; `id` is the row's position on the page."""
    return ok(await services_of(request).logs.list_own_logs(principal_of(request), query.page(),
                                                            query.filters()))


@route(bp, "GET", "/api/log/self/search", access=Access.USER, query=SearchQuery, reply=Paged[OwnLogView])
async def search_own_logs(request: Request, query: SearchQuery) -> HTTPResponse:
    """Your own log rows matching a keyword.
    Your key name or model name equal to it, or content containing it; limited to a few searches a
    minute per user."""
    return ok(await services_of(request).logs.search_own_logs(principal_of(request), query.page(),
                                                              query.keyword))


@route(bp, "GET", "/api/log/self/stat", access=Access.USER, query=OwnStatQuery, reply=LogStat)
async def own_log_stat(request: Request, query: OwnStatQuery) -> HTTPResponse:
    """Your own usage statistics, as `GET /api/log/stat` counts them."""
    return ok(await services_of(request).logs.own_log_stat(principal_of(request), query.filters()))


# ---- by API key -------------------------------------------------------------------------------------

PREFLIGHT_HEADERS = {"access-control-allow-methods": "GET, OPTIONS",
                     "access-control-allow-headers": "Authorization, Content-Type",
                     "access-control-max-age": "86400"}


@route(bp, "GET", "/api/log/token", access=Access.API_KEY, reply=list[OwnLogView], cors=True)
async def token_logs(request: Request) -> HTTPResponse:
    """The logs of the API key sent in `Authorization` (`Bearer sk-…` or the bare key).
    No session is needed and any web page may ask (CORS open). Unpaged: the key's newest 1000 rows,
    shown as the owner's own logs are (no channel, no admin details). Answers for an expired or
    exhausted key too; 401 for a missing, unknown or deleted key, 403 when its owner is disabled."""
    header = (request.headers.get("authorization", "") or "").strip()
    if header[:7].lower() == "bearer ":
        header = header[7:].strip()
    if not header:
        raise Unauthenticated("an API key is required (Authorization: Bearer sk-…)")
    return ok(await services_of(request).logs.token_logs(header))


@route(bp, "OPTIONS", "/api/log/token", access=Access.PUBLIC, reply=None, cors=True)
async def token_logs_preflight(request: Request) -> HTTPResponse:
    """The browser's preflight of `GET /api/log/token`.
    Allows any origin to send `GET` with an `Authorization` header."""
    response = ok()
    response.headers.update(PREFLIGHT_HEADERS)
    return response


# ---- usage data ---------------------------------------------------------------------------------------

@route(bp, "GET", "/api/data/", access=Access.ADMIN, query=DataQuery, reply=list[UsageBucket])
async def all_usage_data(request: Request, query: DataQuery) -> HTTPResponse:
    """Hourly usage buckets, oldest first.
    With `username`, that user's buckets per model; without, every user's summed per (model, hour) with
    `user_id` 0. The window defaults to the last 7 days; a start after the end is a 400."""
    return ok(await services_of(request).usage_data.all_data(query.start_timestamp, query.end_timestamp,
                                                             query.username))


@route(bp, "GET", "/api/data/users", access=Access.ADMIN, query=UsersDataQuery, reply=list[UsageBucket])
async def usage_data_by_user(request: Request, query: UsersDataQuery) -> HTTPResponse:
    """Hourly usage per user, oldest first.
    Every user's buckets summed per (username, hour), with `id` and `user_id` 0 and `model_name` "" (the
    per-user chart of new-api's dashboard). The window defaults to the last 7 days; a start after the
    end is a 400."""
    return ok(await services_of(request).usage_data.by_user(query.start_timestamp, query.end_timestamp))


@route(bp, "GET", "/api/data/top", access=Access.ADMIN, query=TopQuery, reply=Dashboard)
async def usage_top(request: Request, query: TopQuery) -> HTTPResponse:
    """The operator's dashboard: who and what spent most, and each channel's calls and errors.
    Summed from the consume logs (and, per channel, the error logs) created in the window: the `limit`
    users, API keys and models with the most quota (then the most calls), and every channel with a call
    or an error. The window defaults to the last 7 days; a start after the end is a 400."""
    return ok(await services_of(request).usage_data.top(query.start_timestamp, query.end_timestamp,
                                                        query.size()))


@route(bp, "GET", "/api/data/self", access=Access.USER, query=OwnDataQuery, reply=list[UsageBucket])
async def own_usage_data(request: Request, query: OwnDataQuery) -> HTTPResponse:
    """Your own hourly usage buckets, oldest first.
    The window defaults to the last 7 days and may span at most 30 days (2592000 s); a start after the
    end is a 400."""
    return ok(await services_of(request).usage_data.own_data(principal_of(request), query.start_timestamp,
                                                             query.end_timestamp))
