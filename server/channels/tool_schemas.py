"""Request and reply schemas of the channel tools that call no upstream (server/channels/tools.py,
`ChannelTools`): batch delete and tag, copy, abilities rebuild.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from server.channels.rules import NAME_MAX
from server.channels.schemas import TagText
from server.web.schema import ID_MAX, QueryTextRule, Reply, Rule, Schema, problem

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


class CreatedChannel(Reply):
    """The copy of a channel just made."""

    id: int = Field(description="the new channel's id")

    @classmethod
    def of(cls, channel_id: int) -> CreatedChannel:
        return cls(id=channel_id)


class FixResult(Reply):
    """The outcome of rebuilding every channel's abilities."""

    success: int = Field(description="channels whose abilities were rebuilt")
    fails: int = Field(description="channels whose abilities could not be written")

    @classmethod
    def of(cls, *, success: int, fails: int) -> FixResult:
        return cls(success=success, fails=fails)
