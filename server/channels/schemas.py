"""Request, query and reply schemas of the admin channel routes (`/api/channel/…`).

How a channel is shown (docs/API.md#channel-fields): every column but the key (`key` is always `""`; the
keys are read back only through the root "get key" route), `channel_info` as an object of its read-only
multi-key fields, `other_info` as its JSON text. The keys of a multi-key channel are listed to admins only
as previews (`key_preview`: at most the first and last four characters, never more than half the key).

The channel fields are read here only for their type (text trimmed — never the key —, the JSON fields as
text or as an object, which is serialized); what each field may hold is checked by
`server.channels.rules`. A `PUT` changes exactly the fields it carries: an explicit null is kept (it
clears an optional field), an absent field is not touched.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from core.enums import ChannelStatus
from core.multikey import MultiKeyState
from models.channels import Channel
from server.channels.rules import KEY_ACTIONS, NAME_MAX, TAG_MAX
from server.components import catalog
from server.web.pagination import PageQuery
from server.web.schema import (
    ID_MAX,
    Bool,
    Int64,
    IntRule,
    PathId,
    QueryTextRule,
    Reply,
    Rule,
    Schema,
    Str,
    StrictFlag,
    TextRule,
    Trimmed,
    problem,
)

KEYWORD_MAX = 8192  # a whole (multi-)key may be searched for


def _json_text(value: Any) -> Any:
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if not isinstance(value, str):
        raise problem("must be a string")
    return value.strip()


JsonText = Annotated[str | dict[str, Any], BeforeValidator(_json_text)]


class ChannelFields(Schema):
    """A channel's fields as a request carries them."""

    type: Int64 | None = Field(None, description="the provider type (new-api numbers: 1 OpenAI, 24 Gemini)")
    name: Trimmed | None = None
    key: Str | None = Field(None, description="one key per line; never shown back")
    status: Int64 | None = Field(None, description="1 enabled, 2 disabled (3 is set by the system)")
    models: Trimmed | None = Field(None, description="comma-separated model names")
    group: Trimmed | None = Field(None, description="comma-separated groups")
    priority: Int64 | None = None
    weight: Int64 | None = None
    base_url: Trimmed | None = None
    test_model: Trimmed | None = None
    openai_organization: Trimmed | None = None
    other: Trimmed | None = None
    tag: Trimmed | None = None
    remark: Trimmed | None = None
    auto_ban: Int64 | None = None
    model_mapping: JsonText | None = Field(None, description="JSON object: requested model → upstream model")
    status_code_mapping: JsonText | None = Field(None, description="JSON object: upstream status → answered "
                                                                   "status")
    setting: JsonText | None = None
    param_override: JsonText | None = None
    header_override: JsonText | None = None
    settings: JsonText | None = None

    def fields(self) -> dict[str, Any]:
        """The fields the request carried (an explicit null as None), typed."""
        return {name: getattr(self, name) for name in ChannelFields.model_fields
                if name in self.model_fields_set}


class ChannelCreate(Schema):
    bare_members = frozenset({"channel"})  # `name: …`, as `server.channels.rules` names it

    mode: Trimmed = Field(description="single, batch (one channel per key line) or multi_to_single "
                                      "(one channel with several keys)")
    multi_key_mode: Trimmed | None = Field(None, description="multi_to_single: random or polling")
    batch_add_set_key_prefix_2_name: Bool = Field(False, description="batch: append each key's first 8 "
                                                                     "characters to the name")
    channel: ChannelFields


class ChannelUpdate(ChannelFields):
    id: Annotated[int, IntRule(1, ID_MAX)]
    key_mode: Trimmed | None = Field(None, description="multi-key channels: replace or append the keys sent")
    multi_key_mode: Trimmed | None = None


@dataclass(frozen=True, slots=True)
class _TypeArg(Rule):
    """`type` as a filter: up to 9 digits, anything else does not filter."""

    def check(self, value: Any) -> Any:
        raw = ("" if value is None else str(value)).strip()
        return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 9 else None

    def json_schema(self, generated: dict[str, Any]) -> dict[str, Any]:
        return {"type": "integer", "minimum": 0}


class ChannelListQuery(PageQuery):
    status: str = Field("", description="enabled (or 1), disabled (or 0); anything else lists all")
    type: Annotated[int | None, _TypeArg()] = Field(None, description="only channels of this type")
    id_sort: StrictFlag = Field(False, description="sort by id instead of priority")
    tag_mode: StrictFlag = Field(False, description="page through tags, each with its channels")


class ChannelSearchQuery(ChannelListQuery):
    keyword: Annotated[str, QueryTextRule(max_len=KEYWORD_MAX)] = Field(
        "", description="part of the id, name or key; a whole key is matched exactly")
    group: Annotated[str, QueryTextRule()] = ""
    model: Annotated[str, QueryTextRule()] = ""


class ChannelPath(Schema):
    channel_id: PathId


class ChannelInfo(Reply):
    """The read-only multi-key state of a channel."""

    is_multi_key: bool
    multi_key_size: int
    multi_key_status_list: dict[str, int]
    multi_key_mode: str
    multi_key_polling_index: int

    @classmethod
    def of(cls, info: MultiKeyState) -> ChannelInfo:
        return cls(is_multi_key=info.is_multi_key, multi_key_size=info.size,
                   multi_key_status_list={str(i): int(s) for i, s in info.statuses.items()},
                   multi_key_mode=str(info.mode), multi_key_polling_index=info.polling_index)


class ChannelView(Reply):
    """A channel (`key` is always empty)."""

    id: int
    type: int
    name: str
    key: str
    status: int
    models: str
    group: str
    priority: int
    weight: int
    base_url: str
    test_model: str
    openai_organization: str
    other: str
    tag: str
    remark: str
    model_mapping: str
    status_code_mapping: str
    setting: str
    param_override: str
    header_override: str
    settings: str
    auto_ban: int
    balance: float
    balance_updated_time: int
    used_quota: int
    created_time: int
    test_time: int
    response_time: int
    other_info: str
    channel_info: ChannelInfo

    @classmethod
    def of(cls, channel: Channel) -> ChannelView:
        return cls(
            id=channel.id, type=channel.type, name=channel.name, key="", status=channel.status,
            models=channel.models, group=channel.group, priority=channel.priority, weight=channel.weight,
            base_url=channel.base_url, test_model=channel.test_model,
            openai_organization=channel.openai_organization, other=channel.other, tag=channel.tag,
            remark=channel.remark, model_mapping=channel.model_mapping,
            status_code_mapping=channel.status_code_mapping, setting=channel.setting,
            param_override=channel.param_override, header_override=channel.header_override,
            settings=channel.settings, auto_ban=channel.auto_ban, balance=float(channel.balance or 0),
            balance_updated_time=channel.balance_updated_time, used_quota=channel.used_quota,
            created_time=channel.created_time, test_time=channel.test_time,
            response_time=channel.response_time, other_info=channel.other_info,
            channel_info=ChannelInfo.of(MultiKeyState.parse(channel.channel_info)),
        )


class ChannelPage(Schema):
    """One page of channels; `type_counts` (channels per type) on the list route only."""

    items: list[ChannelView]
    total: int
    page: int
    page_size: int
    type_counts: dict[str, int] | None = None


class CatalogModel(Reply):
    id: str
    object: str
    created: int
    owned_by: str

    @classmethod
    def of(cls, model: catalog.CatalogModel) -> CatalogModel:
        """A model of the built-in catalog, as an OpenAI-style model object."""
        return cls(id=model.id, object="model", created=catalog.CATALOG_CREATED, owned_by=model.owned_by)


# ---- the tools, tags and multi-key management (server/channels/tools.py, tags.py, keyring.py) -----------

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
    key: str = Field(description="the channel's key; a multi-key channel's keys one per line")


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
