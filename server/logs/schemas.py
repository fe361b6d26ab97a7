"""Query and reply schemas of the log routes (`/api/log/…`).

Numbers in the query (`type`, `start_timestamp`, `end_timestamp`, `channel`, `target_timestamp`) are
non-negative integers (absent or empty: no filter); anything else is a 400 naming the parameter. Text
filters and keywords are trimmed, at most 255 characters, without control characters; an empty value does
not filter. Text filters are exact (case-sensitive), but `model_name_part`: a part of the model name,
ignoring case and taken literally (`%` and `_` match themselves). The routes of the logged-in user
(`/self`) take no `username` or `channel`, the statistics no `type` or `request_id`.

How a log row is shown (docs/api/logs.md#logs): the admin view (`LogView`), with `channel_name` and the whole
`other`, and the user-facing view (`OwnLogView`), sanitized (`channel` 0, no `channel_name`, and the row's
position on the page as `id`). The internal `ref` column is never shown.

A user's `other` keeps only the fields in `USER_OTHER_FIELDS` (an allow-list: the price ratios, timings,
token split, cache counts, estimate and conversion marks and model mapping of their own call, and the
status and error code an error log's call was answered). Channel ids (`channels_tried`), `admin_info` and
any field added later stay in admin views until it is added here on purpose.

`other` is always a JSON object as a string, or `""`; a stored value that is not an object shows as `""`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field

from models import logs
from models.logs import ChannelActivity, Log, LogFilter, Spend
from models.quota_data import QuotaData
from server.web.pagination import PageQuery
from server.web.schema import QueryIntRule, QueryTextRule, Reply, Schema

INT32_MAX = 2**31 - 1
Number = Annotated[int, QueryIntRule()]
Filter = Annotated[str, QueryTextRule(plain=True)]


class OwnStatQuery(Schema):
    start_timestamp: Number = Field(0, description="from this unix second (inclusive)")
    end_timestamp: Number = Field(0, description="up to this unix second (inclusive)")
    token_name: Filter = Field("", description="exact API key name")
    model_name: Filter = Field("", description="exact model name")
    model_name_part: Filter = Field("", description="part of the model name, ignoring case, taken literally")
    group: Filter = ""

    def filters(self) -> LogFilter:
        return LogFilter(
            type=getattr(self, "type", 0), start=self.start_timestamp, end=self.end_timestamp,
            username=getattr(self, "username", ""), token_name=self.token_name, model_name=self.model_name,
            channel=getattr(self, "channel", 0), group=self.group, request_id=getattr(self, "request_id", ""),
            model_name_part=self.model_name_part,
        )


class StatQuery(OwnStatQuery):
    username: Filter = Field("", description="exact username")
    channel: Number = Field(0, description="channel id")


class OwnLogQuery(OwnStatQuery, PageQuery):
    type: Annotated[int, QueryIntRule(max_value=INT32_MAX)] = Field(
        0, description="1 top-up, 2 consume, 3 manage, 4 system, 5 error, 6 refund")
    request_id: Filter = Field("", description="exact request id (the call's `X-Request-Id`)")


class LogQuery(OwnLogQuery):
    username: Filter = Field("", description="exact username")
    channel: Number = Field(0, description="channel id")


class SearchQuery(PageQuery):
    keyword: Filter = Field("", description="a name, or a literal part of the log's content")


class OwnDataQuery(Schema):
    start_timestamp: Number = Field(0, description="from this unix second (inclusive); default: end - 7 days")
    end_timestamp: Number = Field(0, description="up to this unix second (inclusive); default: now")


class UsersDataQuery(OwnDataQuery):
    """The window of the per-user sums (`GET /api/data/users`)."""


class DataQuery(OwnDataQuery):
    username: Filter = Field("", description="one user's buckets (exact username); empty: all, summed")


TOP_DEFAULT, TOP_MAX = 10, 50


class TopQuery(OwnDataQuery):
    """The window and the length of the lists of `GET /api/data/top`."""

    limit: Annotated[int, QueryIntRule(positive=True, max_value=TOP_MAX)] = Field(
        TOP_DEFAULT, description=f"how many users, keys and models to list (1–{TOP_MAX})")

    def size(self) -> int:
        """`limit`, or the default when it was sent empty (which the rule reads as 0)."""
        return self.limit or TOP_DEFAULT


class UsageBucket(Reply):
    """One hour of usage: of one user and model, or (admin, no username) of every user for a model."""

    id: int
    user_id: int
    username: str
    model_name: str
    created_at: int = Field(description="the hour's start, unix s")
    token_used: int
    count: int
    quota: int

    @classmethod
    def of(cls, row: QuotaData) -> UsageBucket:
        """One stored bucket."""
        return cls(id=row.id, user_id=row.user_id, username=row.username, model_name=row.model_name,
                   created_at=row.created_at, token_used=row.token_used, count=row.count, quota=row.quota)

    @classmethod
    def summed(cls, row: dict[str, Any]) -> UsageBucket:
        """A sum of buckets (`QuotaDataRepository.summed`, `summed_by_user`): `id` and `user_id` 0, and
        `username` (summed over users) or `model_name` (summed over models) "" when the row has none."""
        return cls(id=0, user_id=0, username=row.get("username", ""), model_name=row.get("model_name", ""),
                   created_at=row["created_at"], token_used=row["token_used"], count=row["count"],
                   quota=row["quota"])


class DeleteQuery(Schema):
    target_timestamp: Annotated[int, QueryIntRule(required=True, positive=True)] = Field(
        description="delete every row created before this unix second")


USER_OTHER_FIELDS = frozenset({
    "model_ratio", "group_ratio", "completion_ratio", "model_price", "cache_tokens", "cache_ratio",
    "cache_creation_ratio", "cache_creation_tokens", "cache_read_tokens", "cache_write_tokens",
    "cache_write_1h_tokens", "usage_estimated", "route", "converted_from", "converted_to",
    "user_group_ratio", "frt", "is_model_mapped", "upstream_model_name", "request_path",
    "audio_output_tokens", "text_output_tokens", "stream_interrupted",
    "status_code", "error_code",  # an error log's: what the caller was answered
})


def other_object(raw: str) -> dict[str, Any] | None:
    """A row's `other` as the JSON object it should hold, or None (empty, not JSON, not an object)."""
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def user_other(raw: str) -> str:
    """`other` as its user sees it: only the `USER_OTHER_FIELDS`, as compact JSON text; `""` if no object."""
    other = other_object(raw)
    if other is None:
        return ""
    shown = {name: value for name, value in other.items() if name in USER_OTHER_FIELDS}
    return json.dumps(shown, separators=(",", ":"), ensure_ascii=False)


class _LogRow(Reply):
    """The fields every view of a log row has."""

    id: int
    user_id: int
    created_at: int
    type: int
    content: str
    username: str
    token_name: str
    model_name: str
    quota: int
    prompt_tokens: int
    completion_tokens: int
    use_time: int
    is_stream: bool
    channel: int
    token_id: int
    group: str
    ip: str
    request_id: str


class LogView(_LogRow):
    """A log row as admins see it."""

    channel_name: str
    other: str = Field(description="a JSON object as text, or empty")

    @classmethod
    def of(cls, row: Log, channel_name: str) -> LogView:
        """`channel_name`: the routing table's name of the row's channel ("" if none or unknown)."""
        return cls(
            id=row.id, user_id=row.user_id, created_at=row.created_at, type=row.type, content=row.content,
            username=row.username, token_name=row.token_name, model_name=row.model_name, quota=row.quota,
            prompt_tokens=row.prompt_tokens, completion_tokens=row.completion_tokens, use_time=row.use_time,
            is_stream=bool(row.is_stream), channel=row.channel, token_id=row.token_id, group=row.group,
            ip=row.ip, request_id=row.request_id, channel_name=channel_name,
            other=row.other if other_object(row.other) is not None else "",
        )


class OwnLogView(_LogRow):
    """A log row as its user sees it: `id` is the row's position on the page, `channel` is 0, `other`
    keeps only the fields about the user's own call."""

    other: str

    @classmethod
    def of(cls, row: Log, position: int) -> OwnLogView:
        """`position` is offset + index + 1 on the page."""
        return cls(
            id=position, user_id=row.user_id, created_at=row.created_at, type=row.type, content=row.content,
            username=row.username, token_name=row.token_name, model_name=row.model_name, quota=row.quota,
            prompt_tokens=row.prompt_tokens, completion_tokens=row.completion_tokens, use_time=row.use_time,
            is_stream=bool(row.is_stream), channel=0, token_id=row.token_id, group=row.group, ip=row.ip,
            request_id=row.request_id, other=user_other(row.other),
        )


class LogStat(Reply):
    quota: int = Field(description="quota used by the matching rows")
    rpm: int = Field(description="matching requests in the last 60 s")
    tpm: int = Field(description="tokens of the matching requests in the last 60 s")

    @classmethod
    def of(cls, stat: logs.LogStat) -> LogStat:
        return cls(quota=stat.quota, rpm=stat.rpm, tpm=stat.tpm)


# ---- the dashboard (`GET /api/data/top`) ------------------------------------------------------------------

class _Spent(Reply):
    quota: int = Field(description="the sum of the consume logs' quota")
    calls: int = Field(description="how many consume logs")
    prompt_tokens: int
    completion_tokens: int


class TopUser(_Spent):
    user_id: int
    username: str

    @classmethod
    def of(cls, row: Spend) -> TopUser:
        return cls(user_id=row.user_id, username=row.username, quota=row.quota, calls=row.calls,
                   prompt_tokens=row.prompt_tokens, completion_tokens=row.completion_tokens)


class TopKey(_Spent):
    user_id: int
    username: str
    token_id: int
    token_name: str

    @classmethod
    def of(cls, row: Spend) -> TopKey:
        return cls(user_id=row.user_id, username=row.username, token_id=row.token_id,
                   token_name=row.token_name, quota=row.quota, calls=row.calls,
                   prompt_tokens=row.prompt_tokens, completion_tokens=row.completion_tokens)


class TopModel(_Spent):
    model_name: str

    @classmethod
    def of(cls, row: Spend) -> TopModel:
        return cls(model_name=row.model_name, quota=row.quota, calls=row.calls,
                   prompt_tokens=row.prompt_tokens, completion_tokens=row.completion_tokens)


class ChannelUse(Reply):
    """One channel's calls and errors in the window."""

    channel: int = Field(description="the channel id")
    channel_name: str = Field(description='the channel\'s name ("" for a channel deleted since)')
    channel_type: int = Field(description="the channel's type (0 for a channel deleted since)")
    calls: int = Field(description="consume logs served by the channel")
    errors: int = Field(description="error logs whose last channel tried was this one")
    quota: int = Field(description="the sum of its consume logs' quota")

    @classmethod
    def of(cls, row: ChannelActivity, name: str, channel_type: int) -> ChannelUse:
        """`name` and `channel_type`: the routing table's ("" and 0 for a channel it no longer has)."""
        return cls(channel=row.channel, channel_name=name, channel_type=channel_type, calls=row.calls,
                   errors=row.errors, quota=row.quota)


class Dashboard(Reply):
    """The operator's dashboard over one window."""

    start_timestamp: int = Field(description="the window's start, unix s (inclusive)")
    end_timestamp: int = Field(description="the window's end, unix s (inclusive)")
    users: list[TopUser] = Field(description="the users who spent most, most first")
    keys: list[TopKey] = Field(description="the API keys that spent most, most first")
    models: list[TopModel] = Field(description="the models that cost most, most first")
    channels: list[ChannelUse] = Field(description="every channel with a call or an error, most calls first")

    @classmethod
    def of(cls, start: int, end: int, *, users: list[Spend], keys: list[Spend], models: list[Spend],
           channels: list[ChannelUse]) -> Dashboard:
        return cls(start_timestamp=start, end_timestamp=end, users=[TopUser.of(r) for r in users],
                   keys=[TopKey.of(r) for r in keys], models=[TopModel.of(r) for r in models],
                   channels=channels)
