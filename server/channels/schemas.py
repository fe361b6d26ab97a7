"""Request, query and reply schemas of the admin channel routes (`/api/channel/…`): create, update, read,
list, search and the model catalog (server/channels/crud.py, `ChannelCrud`), and the pieces the other
channel schemas share (`ChannelPath`, `JsonText`, `TagText`, `OneOf`). Each other channel service has its
own: tag_schemas.py, key_schemas.py, probe_schemas.py, balance_schemas.py, tool_schemas.py.

How a channel is shown (docs/api/channels.md#channel-fields): every column but the key (`key` is always `""`;
the keys are read back only through the root "get key" route), `channel_info` as an object of its read-only
multi-key fields, `other_info` as its JSON text.

The channel fields are read here only for their type (text trimmed — never the key —, the JSON fields as
text or as an object, which is serialized); what each field may hold is checked by
`server.channels.rules`. A `PUT` changes exactly the fields it carries: an explicit null is kept (it
clears an optional field), an absent field is not touched.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from core.multikey import MultiKeyState
from models.channels import Channel
from server.channels.rules import TAG_MAX
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
TagText = Annotated[str, TextRule(trim=True, max_len=TAG_MAX)]


@dataclass(frozen=True, slots=True)
class OneOf(Rule):
    """A required string among `choices`."""

    choices: tuple[str, ...] = ()

    def check(self, value: Any) -> Any:
        if value is None:
            raise problem("is required")
        if value not in self.choices:
            raise problem(f"must be one of {', '.join(self.choices)}")
        return value

    def json_schema(self, generated: dict[str, Any]) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.choices)}


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
    group: Annotated[str, QueryTextRule()] = Field("", description="one of the channel's groups, whole")
    model: Annotated[str, QueryTextRule()] = Field("", description="part of one of the channel's models")
    tag: Annotated[str, QueryTextRule(max_len=TAG_MAX)] = Field(
        "", description="the channel's whole tag, case-sensitive; empty: any tag", examples=["alpha"])


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
