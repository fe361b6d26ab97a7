"""The rules a channel's fields obey (docs/api/channels.md#channel-fields), checked before anything is
stored. Every refusal is a `BadRequest` whose message starts with the field's name.

`clean_fields` turns the fields a request carried (absent = not in the dict, `None` = JSON null) into
column values. On update `""` or `null` clears an optional field (to its default); `name`, `type`,
`group` and `status` cannot be emptied. Keys never pass through here: their rules are in
`server/channels/key_rules.py`.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from core.enums import ChannelStatus, ChannelType
from core.headers import header_refusal
from server.components.catalog import CHANNEL_TYPES
from server.errors import BadRequest

NAME_MAX = 100
SHORT_TEXT_MAX = 255  # base_url, test_model, openai_organization, remark, each model
TAG_MAX = 64  # the `tag` columns of channels and abilities
GROUP_ITEM_MAX = 64  # the `group` column of abilities
TEXT_MAX_BYTES = 65535  # a TEXT column on MySQL/MariaDB
WEIGHT_MAX = 2**31 - 1
JSON_FIELDS = ("model_mapping", "status_code_mapping", "setting", "param_override", "header_override",
               "settings")
TEXT_FIELDS = ("name", "base_url", "models", "group", "test_model", "openai_organization", "other", "tag",
               "remark", *JSON_FIELDS)
INT_FIELDS = ("type", "status", "priority", "weight", "auto_ban")
DEFAULTS: dict[str, Any] = {
    "status": ChannelStatus.ENABLED, "models": "", "group": "default", "priority": 0, "weight": 0,
    "base_url": "", "test_model": "", "openai_organization": "", "other": "", "tag": "", "remark": "",
    "auto_ban": 1,
    **{name: "" for name in JSON_FIELDS},
}
REQUIRED = ("name", "type")  # on create
KEY_ACTIONS = ("get_key_status", "disable_key", "enable_key", "disable_all_keys", "enable_all_keys",
               "delete_key", "delete_disabled_keys")  # of the multi-key management
NOT_EMPTY = ("name", "type", "group", "status")  # on update
# MariaDB compares the abilities' primary key without case or accents: `GPT-4o` and `gpt-4o` are one row.
COLLIDING = ("models: two entries (or two groups) are equal for the database (they differ only in case or "
             "accents); keep one")


def _has_control(text: str) -> bool:
    return any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in text)


def _text(name: str, value: str, max_chars: int | None = None) -> str:
    if max_chars is not None and len(value) > max_chars:
        raise BadRequest(f"{name}: must be at most {max_chars} characters")
    if len(value.encode()) > TEXT_MAX_BYTES:
        raise BadRequest(f"{name}: must be at most {TEXT_MAX_BYTES} bytes")
    return value


def _name(value: str) -> str:
    if not 1 <= len(value) <= NAME_MAX:
        raise BadRequest(f"name: must be 1–{NAME_MAX} characters")
    if _has_control(value):
        raise BadRequest("name: must not contain control characters")
    return value


def _type(value: int) -> int:
    if value not in CHANNEL_TYPES:
        raise BadRequest(f"type: unknown channel type {value}")
    return value


def _status(value: int) -> int:
    if value == ChannelStatus.AUTO_DISABLED:
        raise BadRequest("status: 3 (automatically disabled) is set only by the system; use 1 or 2")
    if value not in (ChannelStatus.ENABLED, ChannelStatus.MANUALLY_DISABLED):
        raise BadRequest("status: must be 1 (enabled) or 2 (disabled)")
    return value


def _weight(value: int) -> int:
    if not 0 <= value <= WEIGHT_MAX:
        raise BadRequest(f"weight: must be 0–{WEIGHT_MAX}")
    return value


def _auto_ban(value: int) -> int:
    if value not in (0, 1):
        raise BadRequest("auto_ban: must be 0 or 1")
    return value


def _comma_list(name: str, value: str, item_max: int) -> str:
    items: list[str] = []
    for item in value.split(","):
        item = item.strip()
        if not item or item in items:
            continue
        if len(item) > item_max:
            raise BadRequest(f"{name}: each entry must be at most {item_max} characters")
        if _has_control(item):
            raise BadRequest(f"{name}: entries must not contain control characters")
        items.append(item)
    return _text(name, ",".join(items))


_LABEL = r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?"
_HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")
_NUMERIC_LABEL = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)")


def _base_url(value: str) -> str:
    """An http(s) URL naming a host, with no credentials, query or fragment; an IP address written the
    usual way (dotted decimal, or IPv6 in brackets without a zone). Where it may point (public addresses
    only, unless configured otherwise) is checked by the service, which knows the configuration."""
    if value == "":
        return value
    _text("base_url", value, SHORT_TEXT_MAX)
    if _has_control(value) or any(c.isspace() or c == "\\" for c in value):
        raise BadRequest("base_url: must be an http(s) URL")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise BadRequest("base_url: must be an http(s) URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadRequest("base_url: must be an http(s) URL")
    if "@" in parts.netloc:
        raise BadRequest("base_url: must not contain a user name or password (user:password@host)")
    if parts.query or parts.fragment or "?" in value or "#" in value:
        raise BadRequest("base_url: must not have a query or a fragment")
    if port == 0:
        raise BadRequest("base_url: the port must be 1–65535")
    host = parts.hostname
    if parts.netloc.split("]")[0].startswith("["):
        try:
            address = ipaddress.ip_address(host if "%" not in host else "zone")
        except ValueError:
            raise BadRequest("base_url: the address in brackets must be an IPv6 address (no zone)") from None
        if not isinstance(address, ipaddress.IPv6Address):
            raise BadRequest("base_url: the address in brackets must be an IPv6 address (no zone)")
        return value
    if not host.isascii() or not _HOST_NAME.fullmatch(host):
        raise BadRequest("base_url: the host must be a DNS name (international names in their xn-- form) "
                         "or an IP address")
    if _NUMERIC_LABEL.fullmatch(host.rstrip(".").rsplit(".", 1)[-1]):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise BadRequest("base_url: write an IPv4 address as four decimal numbers (a.b.c.d)") from None
    return value


def _json_object(name: str, value: str) -> dict[str, Any]:
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        raise BadRequest(f"{name}: must be a JSON object or empty") from None
    if not isinstance(parsed, dict):
        raise BadRequest(f"{name}: must be a JSON object or empty")
    return parsed


def check_model_mapping(mapping: dict[str, Any]) -> None:
    """Values are model names; following the mapping from any name must end (no cycle)."""
    for source, target in mapping.items():
        if not isinstance(target, str) or not target.strip():
            raise BadRequest(f"model_mapping: the value for {source!r} must be a non-empty string")
    for start in mapping:
        seen = {start}
        current = mapping[start]
        while current in mapping:
            if current in seen:
                raise BadRequest(f"model_mapping: following {start!r} loops back to {current!r}")
            seen.add(current)
            current = mapping[current]


def _status_code(text: Any) -> bool:
    return isinstance(text, str) and len(text) == 3 and text.isascii() and text.isdigit() \
        and 100 <= int(text) <= 599


def _json_field(name: str, value: str) -> str:
    if value == "":
        return value
    _text(name, value)
    parsed = _json_object(name, value)
    if name == "model_mapping":
        check_model_mapping(parsed)
    elif name == "status_code_mapping":
        for source, target in parsed.items():
            if not _status_code(source) or not _status_code(target):
                raise BadRequest(f"status_code_mapping: {source!r}: keys and values must be HTTP status "
                                 'codes written as 3-digit strings, e.g. {"404":"500"}')
    elif name == "header_override":
        for header, header_value in parsed.items():
            refusal = header_refusal(header)
            if refusal is not None:
                raise BadRequest(f"header_override: {header!r} {refusal}")
            if not isinstance(header_value, str) or _has_control(header_value):
                raise BadRequest(f"header_override: {header!r}: headers must be names with string values")
    return value


_CHECKS: dict[str, Callable[[Any], Any]] = {
    "name": _name,
    "type": _type,
    "status": _status,
    "priority": lambda v: v,
    "weight": _weight,
    "auto_ban": _auto_ban,
    "models": lambda v: _comma_list("models", v, SHORT_TEXT_MAX),
    "group": lambda v: _comma_list("group", v, GROUP_ITEM_MAX),
    "base_url": _base_url,
    "test_model": lambda v: _text("test_model", v, SHORT_TEXT_MAX),
    "openai_organization": lambda v: _text("openai_organization", v, SHORT_TEXT_MAX),
    "other": lambda v: _text("other", v),
    "tag": lambda v: _text("tag", v, TAG_MAX),
    "remark": lambda v: _text("remark", v, SHORT_TEXT_MAX),
    **{name: (lambda n: lambda v: _json_field(n, v))(name) for name in JSON_FIELDS},
}


def clean_fields(raw: dict[str, Any], *, creating: bool) -> dict[str, Any]:
    """Column values for the fields in `raw` (text already trimmed by the handler).

    Creating: `name` and `type` are required, absent or empty fields take their defaults (`group`
    "default"). Updating: only the fields present change; `""`/`null` resets an optional one to its
    default."""
    out: dict[str, Any] = {}
    for name in (*TEXT_FIELDS, *INT_FIELDS):
        if name not in raw:
            continue
        value = raw[name]
        if value is None or value == "":
            if name in REQUIRED and creating:
                raise BadRequest(f"{name}: is required")
            if name in NOT_EMPTY and not creating:
                raise BadRequest(f"{name}: cannot be empty")
            out[name] = DEFAULTS[name]
            continue
        out[name] = _CHECKS[name](value)
        if name == "group" and out[name] == "":  # nothing but commas and blanks
            if not creating:
                raise BadRequest("group: cannot be empty")
            out[name] = DEFAULTS["group"]
    if creating:
        for name in REQUIRED:
            if name not in out:
                raise BadRequest(f"{name}: is required")
        out = {**DEFAULTS, **out}
    return out


def require_address(channel_type: int, base_url: str) -> None:
    """A Custom channel (type 8) has no default address: it cannot be saved without a `base_url`."""
    if channel_type == ChannelType.CUSTOM and not base_url:
        raise BadRequest("base_url: is required for a Custom channel (type 8), which has no default address")

