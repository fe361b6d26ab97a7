"""Request and reply schemas of the channel tools, tags and multi-key management (server/channels/tools.py,
tags.py, keyring.py) and of the routes that call a channel's upstream (probe.py, balances.py).

The keys of a multi-key channel are listed to admins only as previews (`key_preview`: at most the first
and last four characters, never more than half the key).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from core.enums import ChannelRun, ChannelStatus
from core.multikey import MultiKeyState
from server.channels.rules import KEY_ACTIONS, NAME_MAX, TAG_MAX
from server.channels.runs import FAILURES_KEPT, Failure, RunState
from server.channels.schemas import JsonText
from server.web.no_store import Secret
from server.web.schema import (
    ID_MAX,
    Int64,
    IntRule,
    QueryTextRule,
    Reply,
    Rule,
    Schema,
    Str,
    TextRule,
    Trimmed,
    problem,
)

IDS_MAX = 1000


def _ids(value: Any) -> Any:
    if not isinstance(value, list) or not value:
        raise problem("must be a non-empty array of channel ids")
    if len(value) > IDS_MAX:
        raise problem(f"at most {IDS_MAX} ids")
    if not all(type(i) is int and 1 <= i <= ID_MAX for i in value):
        raise problem("must contain positive integers only")
    return value


ChannelIdList = Annotated[list[Annotated[int, Field(ge=1, le=ID_MAX)]], BeforeValidator(_ids),
                          Field(min_length=1, max_length=IDS_MAX, examples=[[1]])]
TagText = Annotated[str, TextRule(trim=True, max_len=TAG_MAX)]


class KeyReveal(Schema):
    key: Secret = Field(description="the channel's key; a multi-key channel's keys one per line")


class ChannelIds(Schema):
    ids: ChannelIdList


class ChannelIdsTag(ChannelIds):
    tag: TagText | None = Field(None, description="the new tag; null or \"\" clears it")


@dataclass(frozen=True, slots=True)
class _QueryBool(Rule):
    """A query switch that must say what it means: `true`/`1` or `false`/`0`."""

    def check(self, value: Any) -> Any:
        raw = ("" if value is None else str(value)).strip().lower()
        if raw in ("true", "1"):
            return True
        if raw in ("false", "0"):
            return False
        raise problem("must be true or false")

    def json_schema(self, generated: dict[str, Any]) -> dict[str, Any]:
        return {"type": "boolean"}


class CopyQuery(Schema):
    suffix: Annotated[str, QueryTextRule(trim=False, plain=True, max_len=NAME_MAX)] = Field(
        "_copy", description="appended to the name of the copy")
    reset_balance: Annotated[bool, _QueryBool()] = Field(
        True, description="start the copy with a zero balance and used quota")


class CreatedChannel(Schema):
    id: int


class FixResult(Schema):
    success: int = Field(description="channels whose abilities were rebuilt")
    fails: int = Field(description="channels whose abilities could not be written")


class TagBody(Schema):
    tag: Annotated[str, TextRule(trim=True, min_len=1, max_len=TAG_MAX)] = Field(examples=["alpha"])


@dataclass(frozen=True, slots=True)
class _EmptyIsUnchanged(Rule):
    """A number of the tag edit that may also be `""` (new-api's form sends it for an untouched field):
    `""` reads as absent."""

    def check(self, value: Any) -> Any:
        return None if value == "" else value

    def json_schema(self, generated: dict[str, Any]) -> dict[str, Any]:
        return {**generated, "anyOf": [*generated.get("anyOf", []), {"type": "string", "const": ""}]}


class TagEdit(Schema):
    """Absent, null and "" all leave a field as it is."""

    tag: Annotated[str, TextRule(trim=True, min_len=1, max_len=TAG_MAX)] = Field(examples=["alpha"])
    new_tag: TagText | None = Field(None, description="rename the tag")
    priority: Annotated[Int64 | None, _EmptyIsUnchanged()] = None
    weight: Annotated[Int64 | None, _EmptyIsUnchanged()] = None
    model_mapping: JsonText | None = Field(None, description="JSON object: requested model → upstream model")
    models: Trimmed | None = Field(None, description="comma-separated model names")
    groups: Trimmed | None = Field(None, description="comma-separated groups")
    param_override: JsonText | None = None
    header_override: JsonText | None = None

    def changes(self) -> dict[str, Any]:
        """The fields that carry a value, by their wire names."""
        return {name: value for name, value in self.model_dump(exclude={"tag"}).items()
                if value is not None and value != ""}


class TagQuery(Schema):
    tag: Annotated[str, QueryTextRule(max_len=TAG_MAX)] = Field("", description="the tag (required)",
                                                               examples=["alpha"])


@dataclass(frozen=True, slots=True)
class _OneOf(Rule):
    choices: tuple[str, ...] = ()

    def check(self, value: Any) -> Any:
        if value is None:
            raise problem("is required")
        if value not in self.choices:
            raise problem(f"must be one of {', '.join(self.choices)}")
        return value

    def json_schema(self, generated: dict[str, Any]) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.choices)}


class KeyManage(Schema):
    channel_id: Annotated[int, IntRule(1, ID_MAX)] = Field(examples=[1])
    action: Annotated[str, _OneOf(KEY_ACTIONS)]
    key_index: Annotated[int, IntRule(0, ID_MAX)] | None = Field(
        None, description="the key's position, from 0 (disable_key, enable_key, delete_key)")
    page: Int64 | None = Field(None, description="get_key_status: page, from 1")
    page_size: Int64 | None = Field(None, description="get_key_status: keys per page, 1–100 (default 50)")
    status: Annotated[int, IntRule(1, 3)] | None = Field(None, description="get_key_status: only keys with "
                                                                          "this status")


MASK = "**********"
KEY_PAGE_SIZE, KEY_PAGE_SIZE_MAX = 50, 100


def key_preview(key: str) -> str:
    """`abcd**********wxyz` for a long key; a short one shows less (a quarter at each end at most)."""
    shown = min(4, len(key) // 4)
    return f"{key[:shown]}{MASK}{key[-shown:]}" if shown else MASK


class KeyStatusItem(Reply):
    index: int
    status: int
    disabled_time: int
    reason: str
    key_preview: str = Field(description="the key masked, e.g. abcd**********wxyz")

    @classmethod
    def of(cls, info: MultiKeyState, index: int, key: str) -> KeyStatusItem:
        """One key of a multi-key channel, as the key management lists it."""
        return cls(index=index, status=info.status(index), disabled_time=info.disabled_at(index),
                   reason=info.reason(index), key_preview=key_preview(key))


class KeyStatusPage(Reply):
    keys: list[KeyStatusItem]
    total: int
    page: int
    page_size: int
    total_pages: int
    enabled_count: int
    manual_disabled_count: int
    auto_disabled_count: int

    @classmethod
    def of(cls, info: MultiKeyState, keys: list[str], *, page: int | None, page_size: int | None,
           status: int | None) -> KeyStatusPage:
        """`get_key_status`: one page of the keys (those with `status`, if given) and the counts of all."""
        size = KEY_PAGE_SIZE if page_size is None or page_size < 1 else min(page_size, KEY_PAGE_SIZE_MAX)
        number = 1 if page is None or page < 1 else page
        listed = [i for i in range(len(keys)) if status is None or info.status(i) == status]
        start = (number - 1) * size
        return cls(
            keys=[KeyStatusItem.of(info, i, keys[i]) for i in listed[start:start + size]],
            total=len(listed), page=number, page_size=size, total_pages=math.ceil(len(listed) / size),
            enabled_count=info.count(ChannelStatus.ENABLED),
            manual_disabled_count=info.count(ChannelStatus.MANUALLY_DISABLED),
            auto_disabled_count=info.count(ChannelStatus.AUTO_DISABLED),
        )


# ---- the routes that call an upstream (server/channels/probe.py, balances.py) --------------------------


class TestQuery(Schema):
    model: Annotated[str, QueryTextRule(max_len=255, plain=True)] = Field(
        "", description="the model to test; by default the channel's test_model, else its first model")


class TestTime(Schema):
    time: float = Field(description="seconds the test took")


class TestReply(Schema):
    """The envelope with `time` next to `data` too (where new-api's clients read it)."""

    success: Literal[True]
    message: str
    time: float = Field(description="seconds the test took")
    data: TestTime


class BalanceData(Schema):
    balance: float = Field(description="USD")


class BalanceReply(Schema):
    """The envelope with `balance` next to `data` too (where new-api's clients read it)."""

    success: Literal[True]
    message: str
    balance: float = Field(description="USD")
    data: BalanceData


class BalanceRun(Schema):
    updated: int = Field(description="channels whose balance was read and stored")
    failed: int = Field(description="channels whose upstream did not tell")


class FetchModelsBody(Schema):
    """Settings not saved yet."""

    type: Int64 = Field(description="the channel type (new-api numbers)", examples=[24])
    key: Str = Field(description="a key, or keys one per line (the first is used)", examples=["AIza-key"])
    base_url: Trimmed | None = Field(None, description="\"\" or absent: the type's default address")


class RunQuery(Schema):
    run: Annotated[str, _OneOf(tuple(str(r) for r in ChannelRun))] = Field(
        description="test: testing every channel; balance: updating every balance", examples=["test"])


class RunFailure(Reply):
    channel_id: int
    name: str
    message: str = Field(description="what went wrong: the upstream's message, redacted")

    @classmethod
    def of(cls, failure: Failure) -> RunFailure:
        return cls(channel_id=failure.channel_id, name=failure.name, message=failure.message)


class RunProgress(Reply):
    run: str = Field(description="test or balance")
    running: bool = Field(description="false once the run has ended (or when none is known)")
    total: int = Field(description="channels in the run")
    done: int = Field(description="channels finished: passed, failed, or skipped (deleted or disabled "
                                  "meanwhile, or the run stopped)")
    passed: int = Field(description="tests passed / balances read and stored")
    failed: int
    started_at: int = Field(description="unix seconds; 0 when no run is known")
    finished_at: int = Field(description="unix seconds; 0 while running")
    failures: list[RunFailure] = Field(description=f"the first {FAILURES_KEPT} failures")

    @classmethod
    def of(cls, state: RunState) -> RunProgress:
        return cls(run=str(state.run), running=state.running, total=state.total, done=state.done,
                   passed=state.passed, failed=state.failed, started_at=state.started_at,
                   finished_at=state.finished_at, failures=[RunFailure.of(f) for f in state.failures])
