"""Request and reply schemas of the redemption-code routes (`/api/redemption/…`) and of redeeming
(`POST /api/user/topup`).

How a code is shown (docs/api/payments.md#redemption-codes): in full to admins, `count` always 0.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from models.redemptions import NAME_MAX, Redemption
from server.web.no_store import Secret
from server.web.pagination import PageQuery
from server.web.schema import ID_MAX, Flag, Int64, IntRule, PathId, QueryTextRule, Reply, Schema, TextRule

QUOTA_MAX = 10**15  # keeps balances far inside the ±2^53 that the quota store's arithmetic handles exactly
COUNT_MAX = 100

Name = Annotated[str, TextRule(trim=True, min_len=1, max_len=NAME_MAX)]
Quota = Annotated[int, IntRule(1, QUOTA_MAX)]


class RedemptionCreate(Schema):
    name: Name = Field(description=f"a label, 1–{NAME_MAX} characters")
    quota: Quota = Field(description="the quota each code adds, more than 0")
    count: Annotated[int, IntRule(1, COUNT_MAX)] = Field(description=f"how many codes to make, 1–{COUNT_MAX}")
    expired_time: Int64 = Field(0, description="unix seconds after which the code is refused; 0 for never")


class RedemptionUpdate(Schema):
    """An edit of a code: `name`, `quota` and `expired_time` where sent (not null); with `status_only`,
    `status` alone."""

    id: Annotated[int, IntRule(1, ID_MAX)]
    name: Name | None = None
    quota: Quota | None = None
    expired_time: Int64 | None = None
    status: Int64 | None = Field(None, description="1 enabled, 2 disabled (only with status_only)")

    def changes(self) -> dict[str, Any]:
        return self.model_dump(exclude={"id"})


class RedemptionUpdateQuery(Schema):
    status_only: Flag = Field(False, description="apply `status` alone (enable or disable)")


class RedemptionListQuery(PageQuery):
    pass


class RedemptionSearchQuery(PageQuery):
    keyword: Annotated[str, QueryTextRule()] = Field(
        "", description="an id (digits), a whole key (32 hex characters), or the start of the name")


class RedemptionPath(Schema):
    redemption_id: PathId


class Redeem(Schema):
    key: Annotated[str, TextRule(min_len=1)] = Field(description="the redemption code (never trimmed)")


class RedemptionView(Reply):
    """A redemption code, shown in full to admins."""

    id: int
    user_id: int = Field(description="the admin who created it")
    key: Secret
    status: int = Field(description="1 enabled, 2 disabled, 3 used")
    name: str
    quota: int
    created_time: int
    redeemed_time: int = Field(description="unix seconds, 0 until used")
    expired_time: int = Field(description="unix seconds, 0 for never")
    used_user_id: int = Field(description="who redeemed it, 0 until used")
    used_username: str = Field(description="their username, \"\" until used")
    count: int = Field(description="always 0 (only meaningful in a create request)")
    DeletedAt: int | None

    @classmethod
    def of(cls, code: Redemption, used_username: str = "") -> RedemptionView:
        return cls(id=code.id, user_id=code.user_id, key=code.key, status=code.status, name=code.name,
                   quota=code.quota, created_time=code.created_time, redeemed_time=code.redeemed_time,
                   expired_time=code.expired_time, used_user_id=code.used_user_id,
                   used_username=used_username, count=0,
                   DeletedAt=code.deleted_at)
