"""How a user is shown: the admin view and the self view (docs/API.md#users)."""

from __future__ import annotations

from typing import Any

from core.identity import Role
from models.tables import User
from server.components.user_settings import settings_of


def user_view(user: User) -> dict[str, Any]:
    return {
        "id": user.id, "username": user.username, "password": "", "display_name": user.display_name,
        "email": user.email, "role": user.role, "status": user.status, "group": user.group,
        "quota": user.quota, "used_quota": user.used_quota, "request_count": user.request_count,
        "aff_code": user.aff_code or "", "aff_count": user.aff_count, "aff_quota": user.aff_quota,
        "aff_history_quota": user.aff_history_quota, "inviter_id": user.inviter_id,
        "setting": user.setting, "remark": user.remark, "stripe_customer": user.stripe_customer,
        "created_at": user.created_at, "last_login_at": user.last_login_at, "DeletedAt": user.deleted_at,
    }


def permissions_for(role: int) -> dict[str, Any]:
    if role >= Role.ROOT:
        return {"sidebar_settings": False, "sidebar_modules": {}}
    if role >= Role.ADMIN:
        return {"sidebar_settings": True, "sidebar_modules": {"admin": {"setting": False}}}
    return {"sidebar_settings": True, "sidebar_modules": {"admin": False}}


def self_view(user: User) -> dict[str, Any]:
    view = {k: v for k, v in user_view(user).items() if k not in ("password", "remark", "DeletedAt")}
    view["sidebar_modules"] = settings_of(user).get("sidebar_modules", "")
    view["permissions"] = permissions_for(user.role)
    return view
