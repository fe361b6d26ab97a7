"""Request and reply schemas of the user routes (`/api/user/self`, the admin `/api/user/…` routes).

Field names are new-api's. The request models read the body with the project's field rules
(`server.web.schema`); each reply model is the one declaration of its shape and is built by its `of()`
(docs/api/accounts.md#users): the password is never shown (always `""` to admins, absent from the self view),
nor the remark to the user.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator

from core.identity import Role
from models.tables import User
from server.components.catalog import CAPABILITIES
from server.components.user_rules import EMAIL_MAX
from server.components.user_settings import settings_of
from server.web.pagination import PageQuery
from server.web.schema import (
    ID_MAX,
    Bool,
    Int64,
    IntRule,
    QueryTextRule,
    Reply,
    Schema,
    Str,
    StrictFlag,
    TextRule,
    Trimmed,
    problem,
)

QUOTA_VALUE_MAX = 10**15  # keeps balances far inside the ±2^53 that Lua's arithmetic handles exactly


def _modules(value: Any) -> Any:
    if not isinstance(value, str | dict):
        raise problem("must be a string or an object")
    return value


SidebarModules = Annotated[str | dict[str, Any], BeforeValidator(_modules)]


# ---- requests ----------------------------------------------------------------------------------------

class SelfUpdate(Schema):
    """The fields a user may change on their own account; absent or null fields are left as they are."""

    username: Trimmed | None = None
    display_name: Trimmed | None = None
    password: Str | None = Field(None, description="the new password (needs original_password)")
    original_password: Str | None = None
    language: Annotated[str, TextRule(trim=True, max_len=16)] | None = None
    sidebar_modules: SidebarModules | None = Field(None, description="the UI's sidebar layout")

    def changes(self) -> dict[str, Any]:
        out = self.model_dump(exclude={"sidebar_modules"})
        if self.sidebar_modules is not None:
            out["sidebar_modules"] = self.sidebar_modules
        return out


def _number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise problem("must be a number")
    return value


Number = Annotated[float, BeforeValidator(_number)]


class SettingUpdate(Schema):
    """Your own settings; the fields sent (and not null) are checked and merged, the others kept."""

    notify_type: Str | None = Field(None, description="email or webhook")
    quota_warning_threshold: Number | None = Field(None, description="> 0; notify when the balance is below")
    webhook_url: Str | None = Field(None, description="http(s) URL; required when notify_type is webhook")
    webhook_secret: Str | None = Field(None, description="at most 128 characters, sent as a Bearer token")
    notification_email: Str | None = Field(None, description='"" for the account e-mail, else an address')
    record_ip_log: Bool | None = Field(None, description="record the client IP in your consume logs")
    accept_unset_model_ratio_model: Bool | None = Field(
        None, description="allow models without a configured price (charged at the default ratio)")

    def changes(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class UserCreate(Schema):
    username: Trimmed
    password: Str
    display_name: Trimmed = ""
    role: Int64 = Field(int(Role.COMMON), description="1 common user, 10 admin (root only)")


class UserUpdate(Schema):
    """An admin's edit of a user; absent or null fields are left as they are, an empty password too."""

    id: Annotated[int, IntRule(1, ID_MAX)]
    username: Trimmed | None = None
    display_name: Trimmed | None = None
    group: Trimmed | None = None
    remark: Trimmed | None = None
    password: Str | None = None

    def changes(self) -> dict[str, Any]:
        return self.model_dump(exclude={"id"})


class ManageAction(Schema):
    id: Annotated[int, IntRule(1, ID_MAX)]
    action: Trimmed = Field(description="disable, enable, delete, promote, demote or add_quota")
    value: Annotated[int, IntRule(max_value=QUOTA_VALUE_MAX)] | None = Field(
        None, description="add_quota: the amount")
    mode: Trimmed | None = Field(None, description="add_quota: add, subtract or override")


class AffTransfer(Schema):
    quota: Annotated[int, IntRule(max_value=QUOTA_VALUE_MAX)] = Field(
        description="how much of your invitation rewards to move to your balance (at least QuotaPerUnit)")


class UserListQuery(PageQuery):
    include_deleted: StrictFlag = Field(False, description="list soft-deleted users too (1 or true)")


class UserSearchQuery(UserListQuery):
    keyword: Annotated[str, QueryTextRule()] = Field(
        "", description="part of the id, username, display name or e-mail")
    group: Annotated[str, QueryTextRule(max_len=64)] = ""


# ---- replies -----------------------------------------------------------------------------------------

class UserView(Reply):
    """A user as admins see it (the password is always empty)."""

    id: int
    username: str
    password: str
    display_name: str
    email: str
    role: int
    status: int = Field(description="1 enabled, 2 disabled")
    group: str
    quota: int = Field(description="the live balance")
    used_quota: int
    request_count: int
    aff_code: str
    aff_count: int
    aff_quota: int
    aff_history_quota: int
    inviter_id: int
    setting: str
    remark: str
    stripe_customer: str
    created_at: int
    last_login_at: int
    DeletedAt: int | None
    two_factor_enabled: bool = Field(False, description="whether 2FA is on (an admin may turn it off)")
    passkey_count: int = Field(0, description="how many passkeys the user has (an admin may remove them)")

    @classmethod
    def of(cls, user: User, *, two_factor: bool = False, passkeys: int = 0) -> UserView:
        """`quota` is the SQL column: `AccountService.with_live_quota` puts the live balance in;
        `two_factor` and `passkeys` come from `AccountService.factors` (one query each for a page)."""
        return cls(
            id=user.id, username=user.username, password="", display_name=user.display_name,
            email=user.email, role=user.role, status=user.status, group=user.group, quota=user.quota,
            used_quota=user.used_quota, request_count=user.request_count, aff_code=user.aff_code or "",
            aff_count=user.aff_count, aff_quota=user.aff_quota, aff_history_quota=user.aff_history_quota,
            inviter_id=user.inviter_id, setting=user.setting, remark=user.remark,
            stripe_customer=user.stripe_customer, created_at=user.created_at,
            last_login_at=user.last_login_at, DeletedAt=user.deleted_at, two_factor_enabled=two_factor,
            passkey_count=passkeys,
        )


def permissions_for(role: int) -> dict[str, Any]:
    """The UI permissions of a role, as new-api's console reads them."""
    if role >= Role.ROOT:
        return {"sidebar_settings": False, "sidebar_modules": {}}
    if role >= Role.ADMIN:
        return {"sidebar_settings": True, "sidebar_modules": {"admin": {"setting": False}}}
    return {"sidebar_settings": True, "sidebar_modules": {"admin": False}}


class SelfView(Reply):
    """The caller's own account, with the UI permissions of their role."""

    id: int
    username: str
    display_name: str
    email: str
    role: int
    status: int
    group: str
    quota: int
    used_quota: int
    request_count: int
    aff_code: str
    aff_count: int
    aff_quota: int
    aff_history_quota: int
    inviter_id: int
    setting: str
    stripe_customer: str
    created_at: int
    last_login_at: int
    sidebar_modules: Any
    permissions: dict[str, Any]

    @classmethod
    def of(cls, user: User) -> SelfView:
        """`quota` is the SQL column: `AccountService.with_live_quota` puts the live balance in."""
        return cls(
            id=user.id, username=user.username, display_name=user.display_name, email=user.email,
            role=user.role, status=user.status, group=user.group, quota=user.quota,
            used_quota=user.used_quota, request_count=user.request_count, aff_code=user.aff_code or "",
            aff_count=user.aff_count, aff_quota=user.aff_quota, aff_history_quota=user.aff_history_quota,
            inviter_id=user.inviter_id, setting=user.setting, stripe_customer=user.stripe_customer,
            created_at=user.created_at, last_login_at=user.last_login_at,
            sidebar_modules=settings_of(user).get("sidebar_modules", ""),
            permissions=permissions_for(user.role),
        )


class GroupInfo(Reply):
    """A group you may use: what it costs and what it is called."""

    # `int` first so that a ratio stored as `1` is answered as `1`, not `1.0` (strict never converts)
    ratio: int | float | str = Field(description='the group\'s ratio (GroupRatio); "auto" for the auto entry')
    desc: str = Field(description="its description (UserUsableGroups), else its name")

    @classmethod
    def of(cls, *, ratio: float | str, desc: str) -> GroupInfo:
        return cls(ratio=ratio, desc=desc)


class CreatedId(Reply):
    """The user just created."""

    id: int = Field(description="the new user's id")

    @classmethod
    def of(cls, user_id: int) -> CreatedId:
        return cls(id=user_id)


class ManageResult(Reply):
    role: int
    status: int
    quota: int

    @classmethod
    def of(cls, user: User, quota: int) -> ManageResult:
        """`quota` is the live balance."""
        return cls(role=user.role, status=user.status, quota=quota)



# ---- e-mail codes and password reset -----------------------------------------------------------------

class UserModelsQuery(Schema):
    capability: Annotated[str, QueryTextRule(max_len=32)] = Field(
        "", description="only the models with this capability: speech_output or moderation; empty: all")

    @field_validator("capability")
    @classmethod
    def known(cls, value: str) -> str:
        if value and value not in CAPABILITIES:
            raise problem(f"must be one of {', '.join(CAPABILITIES)}, or empty")
        return value


Address = Annotated[str, QueryTextRule(max_len=EMAIL_MAX)]


class EmailQuery(Schema):
    email: Address = Field("", description="the address (trimmed, lower-cased)")


class BindQuery(EmailQuery):
    code: Annotated[str, QueryTextRule(trim=False, max_len=16)] = Field(
        "", description="the 6-digit code mailed by `GET /api/verification`")


class PasswordReset(Schema):
    email: Trimmed = Field(description="the address the reset link was sent to")
    token: Str = Field(description="the `token` of the reset link")
    password: Str = Field(description="the new password (8–64 characters)")
