"""The console's generated modules (`server/console/static/js/generated/`) are what
`python -m scripts.console_types` writes today: the typedefs of the OpenAPI document's `/api` schemas and
the enums with the catalogue keys of their labels. A change to a reply shape or an enum without a
regeneration fails here, as the route table does in tests/test_route_table.py."""

from __future__ import annotations

from enum import Enum

from core.identity import Role
from scripts.console_types import COMMAND, LABELS, console_schemas, document, generated, js_type
from tests.console.test_i18n_catalogues import bases, catalogue


def test_the_committed_generated_modules_are_current() -> None:
    for path, text in generated().items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} is stale: run {COMMAND}"


def test_the_typedefs_cover_the_api_routes_and_not_the_model_wires() -> None:
    names = console_schemas(document())
    assert {"ChannelView", "TokenView", "UserView", "Status", "Paged_TokenView_", "OptionField"} <= set(names)
    assert "ChatCompletionRequest" not in names  # /v1 only


def test_json_schema_types_read_as_jsdoc() -> None:
    assert js_type({"type": "integer"}) == "number"
    assert js_type({"anyOf": [{"type": "string"}, {"type": "null"}]}) == "string | null"
    assert js_type({"type": "array", "items": {"$ref": "#/components/schemas/Item"}}) == "Item[]"
    assert js_type({"type": "array", "items": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}) == (
        "(number | null)[]")
    assert js_type({"type": "string", "enum": ["a", "b"]}) == '"a" | "b"'
    assert js_type({"type": "object", "properties": {"a": {"type": "boolean"}}, "required": []}) == (
        "{a?: boolean}")
    assert js_type({"type": "object", "additionalProperties": {"type": "number"}}) == "Record<string, number>"


def test_every_label_key_is_in_the_catalogues_and_every_shown_member_has_one() -> None:
    declared = bases(catalogue("en"))
    for enum, labels in LABELS.items():
        members: set[Enum] = set(enum)
        assert set(labels) <= members
        hidden = members - set(labels)
        assert hidden <= {Role.GUEST, *(m for m in members if m.value == 0)}, (enum, hidden)
        assert set(labels.values()) <= declared, enum
