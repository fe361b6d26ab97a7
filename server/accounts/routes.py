"""`/api/user/self` and the admin user routes (`management.md` B.2–B.4)."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from core.identity import Role
from server.accounts import service
from server.auth.guard import clear_session_cookie, secure_cookies, set_session_cookie
from server.errors import BadRequest
from server.web.access import Access, route
from server.web.body import Fields, path_id, query_str
from server.web.envelope import ok
from server.web.pagination import Page
from server.web.state import principal_of, state_of

bp = Blueprint("accounts")


def _include_deleted(request: Request) -> bool:
    return request.args.get("include_deleted", "") in ("1", "true")


# ---- self -------------------------------------------------------------------------------------------

@route(bp, "GET", "/api/user/self", access=Access.USER)
async def get_self(request: Request) -> HTTPResponse:
    return ok(await service.get_self(state_of(request), principal_of(request)))


@route(bp, "PUT", "/api/user/self", access=Access.USER)
async def put_self(request: Request) -> HTTPResponse:
    f = Fields.of(request)
    changes = {
        "username": f.string("username", trim=True),
        "display_name": f.string("display_name", trim=True),
        "password": f.string("password"),
        "original_password": f.string("original_password"),
        "language": f.string("language", trim=True, max_len=16),
    }
    if f.present("sidebar_modules"):
        modules = f.data["sidebar_modules"]
        if not isinstance(modules, str | dict):
            raise BadRequest("sidebar_modules: must be a string or an object")
        changes["sidebar_modules"] = modules
    state = state_of(request)
    view, rotated = await service.update_self(state, principal_of(request), changes)
    response = ok(view)
    if rotated:
        set_session_cookie(response, rotated, secure=secure_cookies(state))
    return response


@route(bp, "DELETE", "/api/user/self", access=Access.USER)
async def delete_self(request: Request) -> HTTPResponse:
    state = state_of(request)
    await service.delete_self(state, principal_of(request))
    response = ok()
    clear_session_cookie(response, secure=secure_cookies(state))
    return response


# ---- admin ------------------------------------------------------------------------------------------

@route(bp, "GET", "/api/user/", access=Access.ADMIN)
async def list_users(request: Request) -> HTTPResponse:
    return ok(await service.list_users(state_of(request), Page.from_args(request.args),
                                       include_deleted=_include_deleted(request)))


@route(bp, "GET", "/api/user/search", access=Access.ADMIN)
async def search_users(request: Request) -> HTTPResponse:
    return ok(await service.list_users(
        state_of(request), Page.from_args(request.args), include_deleted=_include_deleted(request),
        keyword=query_str(request, "keyword"), group=query_str(request, "group", max_len=64),
    ))


@route(bp, "GET", "/api/user/<user_id>", access=Access.ADMIN)
async def get_user(request: Request, user_id: str) -> HTTPResponse:
    return ok(await service.get_user(state_of(request), principal_of(request), path_id(user_id)))


@route(bp, "POST", "/api/user/", access=Access.ADMIN)
async def create_user(request: Request) -> HTTPResponse:
    f = Fields.of(request)
    new_id = await service.create_user(
        state_of(request), principal_of(request),
        username=f.string("username", required=True, trim=True),
        password=f.string("password", required=True),
        display_name=f.string("display_name", default="", trim=True),
        role=f.integer("role", default=Role.COMMON),
    )
    return ok({"id": new_id})


@route(bp, "PUT", "/api/user/", access=Access.ADMIN)
async def update_user(request: Request) -> HTTPResponse:
    f = Fields.of(request)
    user_id = f.integer("id", required=True, min_value=1, max_value=service.ID_MAX)
    changes = {
        "username": f.string("username", trim=True),
        "display_name": f.string("display_name", trim=True),
        "group": f.string("group", trim=True),
        "remark": f.string("remark", trim=True),
        "password": f.string("password"),
    }
    return ok(await service.update_user(state_of(request), principal_of(request), user_id, changes))


@route(bp, "DELETE", "/api/user/<user_id>", access=Access.ADMIN)
async def delete_user(request: Request, user_id: str) -> HTTPResponse:
    await service.delete_user(state_of(request), principal_of(request), path_id(user_id))
    return ok()


@route(bp, "POST", "/api/user/manage", access=Access.ADMIN)
async def manage_user(request: Request) -> HTTPResponse:
    f = Fields.of(request)
    return ok(await service.manage(
        state_of(request), principal_of(request),
        user_id=f.integer("id", required=True, min_value=1, max_value=service.ID_MAX),
        action=f.string("action", required=True, trim=True),
        value=f.integer("value", max_value=service.QUOTA_VALUE_MAX),
        mode=f.string("mode", trim=True),
    ))
