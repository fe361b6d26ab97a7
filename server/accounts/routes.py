"""`/api/user/self` and the admin user routes: read, edit and delete your own account; list, search,
read, create, edit, delete and manage users (admins)."""

from __future__ import annotations

from typing import Any

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.accounts.schemas import (
    AffTransfer,
    CreatedId,
    GroupInfo,
    ManageAction,
    ManageResult,
    SelfUpdate,
    SelfView,
    SettingUpdate,
    UserCreate,
    UserListQuery,
    UserModelsQuery,
    UserSearchQuery,
    UserUpdate,
    UserView,
)
from server.web.access import Access, route
from server.web.envelope import ok
from server.web.pagination import Paged
from server.web.schema import UserPath
from server.web.state import principal_of, services_of

bp = Blueprint("accounts")


# ---- self -------------------------------------------------------------------------------------------

@route(bp, "GET", "/api/user/self", access=Access.USER, reply=SelfView)
async def get_self(request: Request) -> HTTPResponse:
    """Your own account.
    Shows the live balance and the UI permissions of your role; never the password or the remark."""
    return ok(await services_of(request).accounts.get_self(principal_of(request)))


@route(bp, "PUT", "/api/user/self", access=Access.USER, body=SelfUpdate, reply=SelfView)
async def put_self(request: Request, body: SelfUpdate) -> HTTPResponse:
    """Change your own account.
    Only the fields sent (and not null) change. A new password needs `original_password`; changing it
    ends your other sessions and rotates this one (a new session cookie comes back)."""
    services = services_of(request)
    view, rotated = await services.accounts.update_self(principal_of(request), body.changes())
    response = ok(view)
    if rotated:
        services.cookies.set(response, rotated)
    return response


@route(bp, "DELETE", "/api/user/self", access=Access.USER, reply=None)
async def delete_self(request: Request) -> HTTPResponse:
    """Delete your own account.
    The account is soft-deleted and every session of it ends; root cannot delete itself."""
    services = services_of(request)
    await services.accounts.delete_self(principal_of(request))
    response = ok()
    services.cookies.clear(response)
    return response


@route(bp, "PUT", "/api/user/setting", access=Access.USER, body=SettingUpdate, reply=dict[str, Any])
async def put_setting(request: Request, body: SettingUpdate) -> HTTPResponse:
    """Change your own settings.
    The fields sent (and not null) are checked and merged into your settings; every other key is kept.
    `notify_type` is email or webhook (webhook needs an http(s) `webhook_url`); `quota_warning_threshold`
    is above 0; `webhook_secret` is at most 128 characters; `notification_email` is "" (the account
    e-mail) or an address; `record_ip_log` and `accept_unset_model_ratio_model` are booleans the gateway
    applies from your next call. Answers the merged settings."""
    return ok(await services_of(request).accounts.update_settings(principal_of(request), body.changes()))


@route(bp, "GET", "/api/user/self/groups", access=Access.USER, reply=dict[str, GroupInfo])
async def get_self_groups(request: Request) -> HTTPResponse:
    """The groups you may use.
    The `UserUsableGroups` that exist in `GroupRatio`, plus your own group, each with its ratio and
    description; plus `auto` (ratio "auto") when one of the `AutoGroups` is usable."""
    return ok(services_of(request).groups.user_groups(principal_of(request)))


@route(bp, "GET", "/api/user/groups", access=Access.USER, reply=dict[str, GroupInfo])
async def get_user_groups(request: Request) -> HTTPResponse:
    """The groups you may use (same as `/api/user/self/groups`).
    The `UserUsableGroups` that exist in `GroupRatio`, plus your own group; plus `auto` when usable."""
    return ok(services_of(request).groups.user_groups(principal_of(request)))


@route(bp, "GET", "/api/user/models", access=Access.USER, query=UserModelsQuery, reply=list[str])
async def get_user_models(request: Request, query: UserModelsQuery) -> HTTPResponse:
    """The models you may call.
    Sorted, distinct models that an enabled channel serves in one of your usable groups (the groups
    `auto` reaches included); an empty list if none. With `capability`, only the models that have it
    (`speech_output`: the models the G1 route makes speak; the catalog's, with `ModelCapabilities`)."""
    return ok(services_of(request).groups.user_models(principal_of(request), query.capability))


@route(bp, "GET", "/api/group/", access=Access.ADMIN, reply=list[str])
async def list_group_names(request: Request) -> HTTPResponse:
    """Every group name.
    The keys of `GroupRatio`, sorted."""
    return ok(services_of(request).groups.group_names())


# ---- invitations ------------------------------------------------------------------------------------

@route(bp, "GET", "/api/user/aff", access=Access.USER, reply=str)
async def get_aff_code(request: Request) -> HTTPResponse:
    """Your invitation code.
    Made on the first call (8 random letters and digits, unique) and never changed afterwards. Someone
    who registers with it earns you `QuotaForInviter` in invitation rewards (`aff_quota`)."""
    return ok(await services_of(request).invitations.code(principal_of(request)))


@route(bp, "POST", "/api/user/aff_transfer", access=Access.USER, body=AffTransfer, reply=None)
async def transfer_aff_quota(request: Request, body: AffTransfer) -> HTTPResponse:
    """Move invitation rewards to your balance.
    `quota` (at least `QuotaPerUnit`) leaves `aff_quota` in one conditional step and is spendable from
    the next request on; asking for more than `aff_quota` holds is a 400 and moves nothing."""
    await services_of(request).invitations.transfer(principal_of(request), body.quota)
    return ok()


# ---- admin ------------------------------------------------------------------------------------------

@route(bp, "GET", "/api/user/", access=Access.ADMIN, query=UserListQuery, reply=Paged[UserView])
async def list_users(request: Request, query: UserListQuery) -> HTTPResponse:
    """List users.
    Soft-deleted users are listed only with `include_deleted`."""
    return ok(await services_of(request).accounts.list_users(query.page(),
                                                             include_deleted=query.include_deleted))


@route(bp, "GET", "/api/user/search", access=Access.ADMIN, query=UserSearchQuery, reply=Paged[UserView])
async def search_users(request: Request, query: UserSearchQuery) -> HTTPResponse:
    """Search users by keyword and group.
    The keyword matches the id exactly or the username, display name or e-mail in part."""
    return ok(await services_of(request).accounts.list_users(
        query.page(), include_deleted=query.include_deleted, keyword=query.keyword, group=query.group,
    ))


@route(bp, "GET", "/api/user/<user_id>", access=Access.ADMIN, path_params=UserPath, reply=UserView)
async def get_user(request: Request, user_id: int) -> HTTPResponse:
    """One user.
    An admin acts only on users whose role is below their own."""
    return ok(await services_of(request).accounts.get_user(principal_of(request), user_id))


@route(bp, "POST", "/api/user/", access=Access.ADMIN, body=UserCreate, reply=CreatedId)
async def create_user(request: Request, body: UserCreate) -> HTTPResponse:
    """Create a user.
    The username and password follow the registration rules; only root creates admins."""
    new_id = await services_of(request).accounts.create_user(
        principal_of(request), username=body.username, password=body.password,
        display_name=body.display_name, role=body.role,
    )
    return ok(CreatedId.of(new_id))


@route(bp, "PUT", "/api/user/", access=Access.ADMIN, body=UserUpdate, reply=UserView)
async def update_user(request: Request, body: UserUpdate) -> HTTPResponse:
    """Edit a user.
    Only the fields sent (and not null) change; a new password ends the user's sessions. An admin edits
    only users of a lower role."""
    return ok(await services_of(request).accounts.update_user(principal_of(request), body.id, body.changes()))


@route(bp, "DELETE", "/api/user/<user_id>", access=Access.ADMIN, path_params=UserPath, reply=None)
async def delete_user(request: Request, user_id: int) -> HTTPResponse:
    """Delete a user.
    The user is soft-deleted and their sessions end; root cannot be deleted."""
    await services_of(request).accounts.delete_user(principal_of(request), user_id)
    return ok()


@route(bp, "POST", "/api/user/manage", access=Access.ADMIN, body=ManageAction, reply=ManageResult)
async def manage_user(request: Request, body: ManageAction) -> HTTPResponse:
    """Disable, enable, delete, promote or demote a user, or change their balance.
    `add_quota` takes `mode` (add, subtract, override) and `value`; a change of balance is logged with
    the admin's name. Only root promotes; root itself cannot be disabled, deleted or demoted."""
    return ok(await services_of(request).accounts.manage(
        principal_of(request), user_id=body.id, action=body.action, value=body.value, mode=body.mode,
    ))
