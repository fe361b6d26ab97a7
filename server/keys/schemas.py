"""Request and reply schemas of the API-key routes (`/api/token/…`) and of `GET /api/usage/token/`.

How an API key is shown (docs/api/accounts.md#api-keys): masked everywhere (`abcd**********wxyz`), in full
only in the create reply (`sk-…`) and through `POST /api/token/:id/key` (bare, as new-api answers it).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from models.keys import ApiKey
from server.components.keys import KEY_PREFIX
from server.web.no_store import Secret
from server.web.pagination import PageQuery
from server.web.schema import (
    ID_MAX,
    Bool,
    Flag,
    Int64,
    IntRule,
    PathId,
    QueryTextRule,
    Reply,
    Schema,
    Str,
    Trimmed,
    problem,
)

MAX_KEYS_PER_USER = 1000  # live keys; the service refuses to create one more
BATCH_MAX = MAX_KEYS_PER_USER  # a batch delete may name every key a user has
MASK = "**********"


class TokenFields(Schema):
    """The editable fields of a key; only those sent (and not null) are applied, even `""`, 0 or false."""

    name: Trimmed | None = None
    group: Trimmed | None = Field(None, description="one of your usable groups, or auto")
    model_limits: Str | None = Field(None, description="comma-separated model names")
    allow_ips: Str | None = Field(None, description="IP addresses or CIDR ranges, one per line")
    expired_time: Int64 | None = Field(None, description="unix seconds, -1 for never")
    remain_quota: Int64 | None = None
    status: Int64 | None = Field(None, description="1 enabled, 2 disabled (3 expired and 4 exhausted are set "
                                                   "by the system)")
    unlimited_quota: Bool | None = None
    model_limits_enabled: Bool | None = None

    def changes(self) -> dict[str, Any]:
        return {name: value for name, value in self.model_dump(exclude={"id"}).items() if value is not None}


class TokenUpdate(TokenFields):
    id: Annotated[int, IntRule(1, ID_MAX)]


class TokenUpdateQuery(Schema):
    status_only: Flag = Field(False, description="apply `status` alone (enable or disable)")


def _ids(value: Any) -> Any:
    if not isinstance(value, list) or not value:
        raise problem("must be a non-empty array of token ids")
    if len(value) > BATCH_MAX:
        raise problem(f"at most {BATCH_MAX} ids")
    if not all(type(i) is int and 1 <= i <= ID_MAX for i in value):
        raise problem("must contain positive integers only")
    return value


class TokenBatch(Schema):
    ids: Annotated[list[Annotated[int, Field(ge=1, le=ID_MAX)]], BeforeValidator(_ids),
                   Field(min_length=1, max_length=BATCH_MAX)]


class TokenListQuery(PageQuery):
    pass


class TokenSearchQuery(PageQuery):
    keyword: Annotated[str, QueryTextRule()] = Field("", description="part of the key's name")
    token: Annotated[str, QueryTextRule(trim=False)] = Field("", description="the key itself (sk-… or bare)")


class TokenPath(Schema):
    token_id: PathId


def mask(key: str) -> str:
    return f"{key[:4]}{MASK}{key[-4:]}"


class TokenView(Reply):
    """An API key; `key` is masked (`abcd**********wxyz`) except in the create reply."""

    id: int
    user_id: int
    key: Secret = Field(description="masked (`abcd**********wxyz`), whole (`sk-…`) in the create reply")
    status: int = Field(description="1 enabled, 2 disabled, 3 expired, 4 exhausted")
    name: str
    created_time: int
    accessed_time: int
    expired_time: int
    remain_quota: int
    used_quota: int
    unlimited_quota: bool
    model_limits_enabled: bool
    model_limits: str
    allow_ips: str
    group: str
    DeletedAt: int | None

    @classmethod
    def of(cls, row: ApiKey, key: str | None, *, full: bool = False) -> TokenView:
        """`key` is the bare key (None: it cannot be decrypted), shown in full (`sk-…`) only if `full`.
        `remain_quota` is the SQL column: `KeyService.with_live_remain` puts the live one in."""
        shown = MASK if key is None else (f"{KEY_PREFIX}{key}" if full else mask(key))
        return cls(
            id=row.id, user_id=row.user_id, key=shown, status=row.status, name=row.name,
            created_time=row.created_time, accessed_time=row.accessed_time, expired_time=row.expired_time,
            remain_quota=row.remain_quota, used_quota=row.used_quota,
            unlimited_quota=bool(row.unlimited_quota), model_limits_enabled=bool(row.model_limits_enabled),
            model_limits=row.model_limits, allow_ips=row.allow_ips, group=row.group,
            DeletedAt=row.deleted_at,
        )


class RevealedKey(Reply):
    """One of your API keys, shown whole."""

    key: Secret = Field(description="the whole key without `sk-` (48 characters); a client shows and copies "
                                 "`sk-` + key")

    @classmethod
    def of(cls, key: str) -> RevealedKey:
        return cls(key=key)


class TokenUsage(Reply):
    """The balance of the key used to ask."""

    object: str
    name: str
    total_granted: int
    total_used: int
    total_available: int
    unlimited_quota: bool
    expires_at: int = Field(description="unix seconds, 0 for never")

    @classmethod
    def of(cls, row: ApiKey, remain: int) -> TokenUsage:
        """new-api's shape; `remain` is the live remaining quota."""
        return cls(object="token_usage", name=row.name, total_granted=row.used_quota + remain,
                   total_used=row.used_quota, total_available=remain,
                   unlimited_quota=bool(row.unlimited_quota),
                   expires_at=0 if row.expired_time == -1 else row.expired_time)
