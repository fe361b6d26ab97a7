"""The field types request schemas are built from, and the one translation of a validation failure into
our 400.

Request models (each domain's `schemas.py`) are pydantic models whose fields use the types below, so a
request is read with the same rules everywhere:

- `Annotated[str, TextRule(trim=…, min_len=…, max_len=…)]` (`Str`, `Trimmed`): a JSON string; trimmed
  only when asked (names, e-mails, keywords — never passwords, codes, keys or tokens), then checked for
  length. Whether it is storable text (no lone surrogate, no NUL) is
  checked for the whole body before any model sees it (`server.web.body.json_object`).
- `Annotated[int, IntRule(min_value, max_value)]` (`Int64`, `Id`): an integer in the 64-bit range;
  booleans are never integers, a float with an integral value (`2.0`) is accepted as the integer it
  names.
- `Bool`: a JSON boolean, nothing else (`1`, `"true"` are refused).
- `Flag`, `QueryTextRule`, `QueryIntRule`: the same for query parameters, which are always text.

A field that may be absent is `X | None = None`; JSON null reads as absent unless the model looks at
`model_fields_set` (partial updates that must tell "absent" from "null").

`bad_request(error)` turns a pydantic `ValidationError` into `BadRequest("<field>: <problem>")`: the first
problem, its field named by its dotted path (`channel.type`, `ids[2]`), in the same words the older
field readers used ("is required", "must be a string", "must be at most 64 characters").

Reply models derive from `Reply`: each is the one declaration of a shape the API answers, built only by
its own `of(...)` classmethod with keyword arguments (mypy checks every name and type against the
fields); a stray field or a value of another type fails at once instead of reaching a client.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler, GetJsonSchemaHandler, ValidationError
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from server.errors import BadRequest
from server.web.text import text_problem

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
ID_MAX = 10**18 - 1  # a path or body id: 18 digits always fit a BIGINT


class Schema(BaseModel):
    """Base of every request and reply model: unknown request fields are ignored (and documented as
    allowed), field names are exactly the wire names."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    # Fields whose members a 400 names without the prefix (`type`, not `channel.type`): the service's own
    # refusals name them so, and one request should not name one field two ways.
    bare_members: ClassVar[frozenset[str]] = frozenset()


def _reply_json_schema(schema: dict[str, Any]) -> None:
    """What guards how a reply is built is not a promise to clients: `extra="forbid"` (the API document
    keeps allowing fields to be added later) and a field's default (a reply always carries the field)."""
    schema.pop("additionalProperties", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("default", None)


class Reply(Schema):
    """Base of every reply model built by the server (docs/HTTP.md#schemas-and-the-api-document).

    A reply model is built only by its `of(...)` classmethod, from the record it shows, with keyword
    arguments — never with `model_validate` or `from_attributes`, so that a column which happens to share
    a field's name (a channel's encrypted `key`) can never reach a client by accident. A stray field is
    an error (`extra="forbid"`), and so is a value of another type (`strict`: an int is never turned into
    a float or a string, a bool never into an int): what the fields declare is what the wire carries.
    `ok()` (`server.web.envelope`) serializes it wherever it sits in the reply's `data`."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_reply_json_schema,
                              json_schema_serialization_defaults_required=True)


def problem(message: str, *, label: str | None = None) -> PydanticCustomError:
    """A validation failure whose message is used as is after the field name (or after `label`)."""
    return PydanticCustomError("tollway", message, {"label": label} if label else None)


@dataclass(frozen=True, slots=True)
class Rule:
    """An `Annotated` marker: a check run before pydantic's own (which then only confirms the type), plus
    what it adds to the JSON schema."""

    def check(self, value: Any) -> Any:  # pragma: no cover - overridden
        return value

    def extra_schema(self) -> dict[str, Any]:
        return {}

    def __get_pydantic_core_schema__(self, source: Any,
                                     handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_before_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return self.json_schema(handler(schema))

    def json_schema(self, generated: dict[str, Any]) -> dict[str, Any]:
        generated.update(self.extra_schema())
        return generated


@dataclass(frozen=True, slots=True)
class TextRule(Rule):
    trim: bool = False
    min_len: int = 0
    max_len: int | None = None

    def check(self, value: Any) -> Any:
        if value is None:
            raise problem("is required")
        if not isinstance(value, str):
            raise problem("must be a string")
        if self.trim:
            value = value.strip()
        if value == "" and self.min_len > 0:
            raise problem("is required")
        n = len(value)
        if n < self.min_len or (self.max_len is not None and n > self.max_len):
            bound = (f"{self.min_len}–{self.max_len}" if self.max_len is not None
                     else f"at least {self.min_len}")
            raise problem(f"must be {bound} characters")
        return value

    def extra_schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.min_len:
            out["minLength"] = self.min_len
        if self.max_len is not None:
            out["maxLength"] = self.max_len
        return out


def as_int(value: Any) -> int:
    """A JSON number that is an integer in the 64-bit range (booleans never are), else a failure."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise problem("must be an integer")
    if not INT64_MIN <= value <= INT64_MAX:  # nothing stored anywhere is wider than BIGINT
        raise problem("is out of range")
    return int(value)


@dataclass(frozen=True, slots=True)
class IntRule(Rule):
    min_value: int | None = None
    max_value: int | None = None

    def check(self, value: Any) -> Any:
        if value is None:
            raise problem("is required")
        value = as_int(value)
        if self.min_value is not None and value < self.min_value:
            raise problem(f"must be at least {self.min_value}")
        if self.max_value is not None and value > self.max_value:
            raise problem(f"must be at most {self.max_value}")
        return value

    def extra_schema(self) -> dict[str, Any]:
        low = INT64_MIN if self.min_value is None else max(INT64_MIN, self.min_value)
        high = INT64_MAX if self.max_value is None else min(INT64_MAX, self.max_value)
        return {"minimum": low, "maximum": high}


@dataclass(frozen=True, slots=True)
class BoolRule(Rule):
    def check(self, value: Any) -> Any:
        if value is None:
            raise problem("is required")
        if not isinstance(value, bool):
            raise problem("must be a boolean")
        return value


@dataclass(frozen=True, slots=True)
class NumberRule(Rule):
    """A finite JSON number (an integer or not; booleans never are), within the bounds."""

    min_value: float | None = None
    max_value: float | None = None

    def check(self, value: Any) -> Any:
        if value is None:
            raise problem("is required")
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise problem("must be a number")
        if self.min_value is not None and value < self.min_value:
            raise problem(f"must be at least {self.min_value:g}")
        if self.max_value is not None and value > self.max_value:
            raise problem(f"must be at most {self.max_value:g}")
        return float(value)

    def extra_schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.min_value is not None:
            out["minimum"] = self.min_value
        if self.max_value is not None:
            out["maximum"] = self.max_value
        return out


Str = Annotated[str, TextRule()]
Trimmed = Annotated[str, TextRule(trim=True)]
Int64 = Annotated[int, IntRule()]
Id = Annotated[int, IntRule(1, ID_MAX)]
Bool = Annotated[bool, BoolRule()]


# ---- query parameters (always text on the wire) -----------------------------------------------------

_DIGITS = re.compile(r"[0-9]{1,18}")  # 18 digits always fit a BIGINT


@dataclass(frozen=True, slots=True)
class QueryTextRule(Rule):
    """Trimmed (unless `trim` is False), at most `max_len` characters, storable text, and with `plain`
    no control characters."""

    trim: bool = True
    max_len: int = 255
    plain: bool = False

    def check(self, value: Any) -> Any:
        value = "" if value is None else str(value)
        value = value.strip() if self.trim else value
        if len(value) > self.max_len:
            raise problem(f"must be at most {self.max_len} characters")
        bad = text_problem(value)
        if bad is not None:
            raise problem(bad)
        if self.plain and any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in value):
            raise problem("must not contain control characters")
        return value

    def extra_schema(self) -> dict[str, Any]:
        return {"maxLength": self.max_len}


@dataclass(frozen=True, slots=True)
class QueryIntRule(Rule):
    """A non-negative (with `positive`, positive) integer of at most 18 digits; absent or empty is 0
    unless `required`."""

    required: bool = False
    positive: bool = False
    max_value: int | None = None

    def check(self, value: Any) -> Any:
        raw = ("" if value is None else str(value)).strip()
        if not raw:
            if self.required:
                raise problem("is required")
            return 0
        kind = "a positive" if self.positive else "a non-negative"
        if not _DIGITS.fullmatch(raw) or (self.positive and int(raw) < 1):
            raise problem(f"must be {kind} integer")
        number = int(raw)
        if self.max_value is not None and number > self.max_value:
            raise problem(f"must be at most {self.max_value}")
        return number

    def extra_schema(self) -> dict[str, Any]:
        return {"minimum": 1 if self.positive else 0, "maximum": self.max_value or ID_MAX}


@dataclass(frozen=True, slots=True)
class FlagRule(Rule):
    """A query switch: on unless absent, empty, `0` or `false` (with `strict`, on only for `1`/`true`)."""

    strict: bool = False

    def check(self, value: Any) -> Any:
        raw = ("" if value is None else str(value)).strip().lower()
        if self.strict:
            return raw in ("1", "true")
        return raw not in ("", "0", "false")

    def extra_schema(self) -> dict[str, Any]:
        return {"type": "boolean"}


@dataclass(frozen=True, slots=True)
class PathIdRule(Rule):
    """A path id: 1–18 ASCII digits, at least 1 (so `abc` is a 400 naming it `id`, not a 404)."""

    def check(self, value: Any) -> Any:
        raw = str(value)
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 18 or int(raw) < 1:
            raise problem("must be a positive integer", label="id")
        return int(raw)

    def json_schema(self, generated: dict[str, Any]) -> dict[str, Any]:
        return {"type": "integer", "minimum": 1, "maximum": ID_MAX, "examples": [1]}


PathId = Annotated[int, PathIdRule()]
Flag = Annotated[bool, FlagRule()]
StrictFlag = Annotated[bool, FlagRule(strict=True)]


# ---- one translation of validation errors -----------------------------------------------------------

_BY_TYPE = {
    "missing": "is required",
    "string_type": "must be a string",
    "bool_type": "must be a boolean",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "dict_type": "must be an object",
    "list_type": "must be an array",
}


def field_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out = f"{out}.{part}" if out else str(part)
    return out or "request body"


def message_of(error: ValidationError, bare: frozenset[str] = frozenset()) -> str:
    """`<field>: <problem>` for the first problem of a validation failure (`bare`: see `Schema`)."""
    first = error.errors(include_url=False)[0]
    loc = tuple(first["loc"])
    if len(loc) > 1 and loc[0] in bare:
        loc = loc[1:]
    kind = first["type"]
    if kind == "tollway":
        text = first["msg"]
        label = (first.get("ctx") or {}).get("label")
        if label:
            return f"{label}: {text}"
    elif first.get("input", ...) is None and kind in _BY_TYPE:
        text = "is required"
    else:
        text = _BY_TYPE.get(kind) or (first["msg"][:1].lower() + first["msg"][1:])
    return f"{field_path(loc)}: {text}"


def bad_request(error: ValidationError, model: type[BaseModel] | None = None) -> BadRequest:
    bare = model.bare_members if model is not None and issubclass(model, Schema) else frozenset()
    return BadRequest(message_of(error, bare))


class UserPath(Schema):
    """The path of a route about one user (`/api/user/<user_id>…`)."""

    user_id: PathId
