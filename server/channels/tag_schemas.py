"""Request schemas of the tag routes (server/channels/tags.py, `ChannelTags`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from server.channels.rules import TAG_MAX
from server.channels.schemas import JsonText, TagText
from server.web.schema import Int64, QueryTextRule, Rule, Schema, TextRule, Trimmed


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
