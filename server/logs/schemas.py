"""Query and reply schemas of the log routes (`/api/log/…`).

Numbers in the query (`type`, `start_timestamp`, `end_timestamp`, `channel`, `target_timestamp`) are
non-negative integers (absent or empty: no filter); anything else is a 400 naming the parameter. Text
filters and keywords are trimmed, at most 255 characters, without control characters; an empty value does
not filter. The routes of the logged-in user (`/self`) take no `username` or `channel`, the statistics no
`type` or `request_id`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from models.logs import LogFilter
from server.web.pagination import PageQuery
from server.web.schema import QueryIntRule, QueryTextRule, Schema

INT32_MAX = 2**31 - 1
Number = Annotated[int, QueryIntRule()]
Filter = Annotated[str, QueryTextRule(plain=True)]


class OwnStatQuery(Schema):
    start_timestamp: Number = Field(0, description="from this unix second (inclusive)")
    end_timestamp: Number = Field(0, description="up to this unix second (inclusive)")
    token_name: Filter = Field("", description="exact API key name")
    model_name: Filter = Field("", description="exact model name")
    group: Filter = ""

    def filters(self) -> LogFilter:
        return LogFilter(
            type=getattr(self, "type", 0), start=self.start_timestamp, end=self.end_timestamp,
            username=getattr(self, "username", ""), token_name=self.token_name, model_name=self.model_name,
            channel=getattr(self, "channel", 0), group=self.group, request_id=getattr(self, "request_id", ""),
        )


class StatQuery(OwnStatQuery):
    username: Filter = Field("", description="exact username")
    channel: Number = Field(0, description="channel id")


class OwnLogQuery(OwnStatQuery, PageQuery):
    type: Annotated[int, QueryIntRule(max_value=INT32_MAX)] = Field(
        0, description="1 top-up, 2 consume, 3 manage, 4 system, 5 error, 6 refund")
    request_id: Filter = ""


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


class UsageBucket(Schema):
    """One hour of usage: of one user and model, or (admin, no username) of every user for a model."""

    id: int
    user_id: int
    username: str
    model_name: str
    created_at: int = Field(description="the hour's start, unix s")
    token_used: int
    count: int
    quota: int


class DeleteQuery(Schema):
    target_timestamp: Annotated[int, QueryIntRule(required=True, positive=True)] = Field(
        description="delete every row created before this unix second")


class _LogRow(Schema):
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


class OwnLogView(_LogRow):
    """A log row as its user sees it: `id` is the row's position on the page, `channel` is 0, `other`
    keeps only the fields about the user's own call."""

    other: str


class LogStat(Schema):
    quota: int = Field(description="quota used by the matching rows")
    rpm: int = Field(description="matching requests in the last 60 s")
    tpm: int = Field(description="tokens of the matching requests in the last 60 s")
