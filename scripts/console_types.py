"""Write what the console would otherwise copy from the server: `python -m scripts.console_types [--check]`.

- `server/console/static/js/generated/api.js`: one JSDoc `@typedef` per component schema of the `/api/…`
  routes' bodies and replies in the app's OpenAPI document (server/web/openapi.py), so the console's reply
  shapes are the server's.
- `server/console/static/js/generated/enums.js`: the numbers and words of core/enums.py and
  core/identity.py `Role`, each enum's catalogue key of each label (the labels stay in js/i18n/*.js, so they
  stay translatable), and the channel types the gateway serves (server/upstream/providers) with their names
  (server/components/catalog.py), default addresses and which publish a balance.

`--check` changes nothing and exits 1 when a committed file is stale (tests/console/test_generated.py does
the same).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from enum import Enum
from pathlib import Path
from typing import Any

from core.enums import (
    ChannelStatus,
    ChannelType,
    KeyStatus,
    LogType,
    RedemptionStatus,
    TopUpStatus,
    UserStatus,
)
from core.identity import Role
from server.components.catalog import CHANNEL_TYPES
from server.upstream.providers import SERVED_TYPES, default_base
from server.upstream.providers.balances import BALANCE_TYPES

GENERATED = Path(__file__).resolve().parent.parent / "server" / "console" / "static" / "js" / "generated"
COMMAND = "python -m scripts.console_types"
REF = "#/components/schemas/"

# each enum the console shows, with the catalogue key of each member's label (a member without one is
# never shown: Role.GUEST, LogType.UNKNOWN)
LABELS: dict[type[Enum], dict[Any, str]] = {
    Role: {Role.COMMON: "role.user", Role.ADMIN: "role.admin", Role.ROOT: "role.root"},
    UserStatus: {UserStatus.ENABLED: "status.enabled", UserStatus.DISABLED: "status.disabled"},
    KeyStatus: {KeyStatus.ENABLED: "status.enabled", KeyStatus.DISABLED: "status.disabled",
                KeyStatus.EXPIRED: "keys.status.expired", KeyStatus.EXHAUSTED: "keys.status.exhausted"},
    ChannelStatus: {ChannelStatus.ENABLED: "status.enabled",
                    ChannelStatus.MANUALLY_DISABLED: "status.disabled",
                    ChannelStatus.AUTO_DISABLED: "status.autoDisabled"},
    RedemptionStatus: {RedemptionStatus.ENABLED: "status.enabled",
                       RedemptionStatus.DISABLED: "status.disabled", RedemptionStatus.USED: "redeem.used"},
    TopUpStatus: {TopUpStatus.PENDING: "order.pending", TopUpStatus.SUCCESS: "order.completed",
                  TopUpStatus.FAILED: "order.failed", TopUpStatus.EXPIRED: "order.expired",
                  TopUpStatus.REVIEW: "order.review"},
    LogType: {LogType.TOPUP: "logs.type.1", LogType.CONSUME: "logs.type.2", LogType.MANAGE: "logs.type.3",
              LogType.SYSTEM: "logs.type.4", LogType.ERROR: "logs.type.5", LogType.REFUND: "logs.type.6"},
}


def document() -> dict[str, Any]:
    """The app's OpenAPI document (an embedded config; nothing is started)."""
    from server.app import create_app
    from server.config import from_env
    from server.web.openapi import document as openapi

    with tempfile.TemporaryDirectory() as data:
        config = from_env({"DATA_DIR": data, "DATABASE_URL": "sqlite+aiosqlite:///:memory:"})
        return openapi(create_app(config, name="console_types"))


def _refs(node: Any, schemas: dict[str, Any], found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(REF) and ref[len(REF):] not in found:
            found.add(ref[len(REF):])
            _refs(schemas[ref[len(REF):]], schemas, found)
        for value in node.values():
            _refs(value, schemas, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, schemas, found)


def console_schemas(doc: dict[str, Any]) -> list[str]:
    """The component schemas the `/api/…` operations reach (not the model routes' wire shapes)."""
    schemas: dict[str, Any] = doc["components"]["schemas"]
    found: set[str] = set()
    for path, operations in doc["paths"].items():
        if path.startswith("/api/"):
            _refs(operations, schemas, found)
    return sorted(found)


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().replace("*/", "*\u200b/")


def js_type(schema: dict[str, Any]) -> str:
    """The TypeScript type (as JSDoc reads it) of a JSON schema."""
    if "$ref" in schema:
        return str(schema["$ref"])[len(REF):]
    for combiner in ("anyOf", "oneOf"):
        if combiner in schema:
            parts = list(dict.fromkeys(js_type(s) for s in schema[combiner]))
            return " | ".join(parts)
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return js_type(schema["allOf"][0])
    if "const" in schema:
        return json.dumps(schema["const"], ensure_ascii=False)
    if "enum" in schema:
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(js_type({**schema, "type": k}) for k in kind)
    if kind == "string":
        return "string"
    if kind in ("integer", "number"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "null":
        return "null"
    if kind == "array":
        item = js_type(schema.get("items", {}))
        return f"({item})[]" if " " in item else f"{item}[]"
    if kind == "object" or "properties" in schema or "additionalProperties" in schema:
        properties: dict[str, Any] = schema.get("properties", {})
        if properties:
            required = set(schema.get("required", []))
            fields = ", ".join(f"{name}{'' if name in required else '?'}: {js_type(sub)}"
                               for name, sub in properties.items())
            return f"{{{fields}}}"
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            return f"Record<string, {js_type(extra)}>"
        return "Record<string, any>"
    return "any"


def typedef(name: str, schema: dict[str, Any]) -> str:
    lines = ["/**"]
    if schema.get("description"):
        lines.append(f" * {_one_line(schema['description'])}")
    properties: dict[str, Any] = schema.get("properties", {})
    if schema.get("type") != "object" or not properties:
        lines += [f" * @typedef {{{js_type(schema)}}} {name}", " */"]
        return "\n".join(lines)
    lines.append(f" * @typedef {{object}} {name}")
    required = set(schema.get("required", []))
    for prop, sub in properties.items():
        label = prop if prop in required else f"[{prop}]"
        note = f"  {_one_line(sub['description'])}" if sub.get("description") else ""
        lines.append(f" * @property {{{js_type(sub)}}} {label}{note}")
    lines.append(" */")
    return "\n".join(lines)


def api_js(doc: dict[str, Any]) -> str:
    schemas: dict[str, Any] = doc["components"]["schemas"]
    head = ("/**\n"
            f" * Generated by `{COMMAND}` from the app's OpenAPI document: do not edit.\n"
            " *\n"
            " * The bodies and replies of the `/api/…` routes, one typedef per component schema (the names\n"
            " * are the document's). Types only: nothing here runs.\n"
            " */\n")
    body = "\n\n".join(typedef(name, schemas[name]) for name in console_schemas(doc))
    return f"{head}\n{body}\n\nexport {{}};\n"


def _const_name(enum: type[Enum]) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum.__name__).upper()


def enums_js() -> str:
    out = ["/**",
           f" * Generated by `{COMMAND}` from core/enums.py, core/identity.py, server/components/catalog.py",
           " * and server/upstream/providers: do not edit.",
           " *",
           " * Each enum's members, and `<ENUM>_LABEL`: the catalogue key (js/i18n/*.js) of each value's",
           " * label (`labelOf` in js/i18n.js shows one). The channel types are the ones the gateway serves.",
           " */", ""]
    for enum, labels in LABELS.items():
        kind = "string" if issubclass(enum, str) else "number"
        members = ", ".join(f"{m.name}: {json.dumps(m.value)}" for m in enum)
        keys = ", ".join(f"{json.dumps(str(m.value)) if kind == 'string' else m.value}: {json.dumps(key)}"
                         for m, key in labels.items())
        doc = _one_line((enum.__doc__ or "").split("\n\n")[0]) if enum.__doc__ else ""
        out += [f"/** {enum.__name__}{': ' + doc if doc else ''} */",
                f"export const {enum.__name__} = Object.freeze({{ {members} }});",
                f"/** @type {{Readonly<Record<{kind}, string>>}} */",
                f"export const {_const_name(enum)}_LABEL = Object.freeze({{ {keys} }});", ""]
    doc = _one_line(ChannelType.__doc__.split("\n\n")[0]) if ChannelType.__doc__ else ""
    members = ", ".join(f"{m.name}: {m.value}" for m in ChannelType)
    out += [f"/** ChannelType: {doc} */", f"export const ChannelType = Object.freeze({{ {members} }});", ""]
    served = sorted(SERVED_TYPES)
    names = ", ".join(f"{t}: {json.dumps(CHANNEL_TYPES[t])}" for t in served)
    bases = ", ".join(f"{t}: {json.dumps(default_base(t))}" for t in served if default_base(t))
    balances = ", ".join(str(t) for t in sorted(BALANCE_TYPES))
    out += ["/** The channel types the gateway serves, by number, with their names (new-api's). */",
            "/** @type {Readonly<Record<number, string>>} */",
            f"export const CHANNEL_TYPE_NAME = Object.freeze({{ {names} }});",
            ("/** The address a channel of a served type calls when its base URL is empty (none: it is "
             "required). */"),
            "/** @type {Readonly<Record<number, string>>} */",
            f"export const DEFAULT_BASE = Object.freeze({{ {bases} }});",
            "/** The types whose upstream publishes a balance (served or not). */",
            f"export const BALANCE_TYPES = Object.freeze([{balances}]);", ""]
    return "\n".join(out)


def generated(doc: dict[str, Any] | None = None) -> dict[Path, str]:
    """Each generated file and what it should hold today."""
    return {GENERATED / "api.js": api_js(doc if doc is not None else document()),
            GENERATED / "enums.js": enums_js()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when a generated file is stale")
    args = parser.parse_args(argv)
    stale = 0
    for path, text in generated().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        if args.check:
            print(f"{path.name}: stale; run {COMMAND}", file=sys.stderr)
            stale = 1
        else:
            path.parent.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
    return stale


if __name__ == "__main__":
    sys.exit(main())
