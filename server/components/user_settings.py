"""A user's own settings (`PUT /api/user/setting`): which keys there are, their rules, and the merge.

Settings are one JSON object in `users.setting`. An update merges the keys it carries into it and keeps
every other key (`sidebar_modules`, `language`, …). The two the gateway reads on every call,
`record_ip_log` and `accept_unset_model_ratio_model`, travel in the cached user state (`UserState`), so
a call never reads SQL for them.
"""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import urlsplit

from models.tables import User
from server.components.user_rules import check_email
from server.errors import BadRequest
from server.web.body import has_control_chars

NOTIFY_TYPES = ("email", "webhook")
WEBHOOK_SECRET_MAX = 128
WEBHOOK_URL_MAX = 2048
FLAGS = ("record_ip_log", "accept_unset_model_ratio_model")


def _url(value: str) -> str:
    value = value.strip()
    parts = urlsplit(value) if not has_control_chars(value) and len(value) <= WEBHOOK_URL_MAX else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or " " in value:
        raise BadRequest(f"webhook_url: must be an http(s) URL of at most {WEBHOOK_URL_MAX} characters")
    return value


def merge_settings(current: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`current` with the keys of `changes` checked and applied; a 400 names the first bad field."""
    out = dict(current)
    if "notify_type" in changes:
        if changes["notify_type"] not in NOTIFY_TYPES:
            raise BadRequest("notify_type: must be email or webhook")
        out["notify_type"] = changes["notify_type"]
    if "quota_warning_threshold" in changes:
        value = changes["quota_warning_threshold"]
        if not math.isfinite(value) or value <= 0:
            raise BadRequest("quota_warning_threshold: must be greater than 0")
        out["quota_warning_threshold"] = int(value) if float(value).is_integer() else value
    if "webhook_url" in changes:
        out["webhook_url"] = _url(changes["webhook_url"]) if changes["webhook_url"].strip() else ""
    if "webhook_secret" in changes:
        if len(changes["webhook_secret"]) > WEBHOOK_SECRET_MAX:
            raise BadRequest(f"webhook_secret: must be at most {WEBHOOK_SECRET_MAX} characters")
        out["webhook_secret"] = changes["webhook_secret"]
    if "notification_email" in changes:
        email = changes["notification_email"].strip()
        out["notification_email"] = check_email(email, "notification_email") if email else ""
    for flag in FLAGS:
        if flag in changes:
            out[flag] = changes[flag]
    if out.get("notify_type") == "webhook" and not out.get("webhook_url"):
        raise BadRequest("webhook_url: is required when notify_type is webhook")
    return out


def flag(settings: dict[str, Any], name: str) -> bool:
    """A boolean setting as the gateway reads it: only a JSON `true` counts."""
    return settings.get(name) is True


def settings_of(user: User) -> dict[str, Any]:
    """The user's settings object; {} when the stored text is empty or not a JSON object."""
    try:
        value = json.loads(user.setting) if user.setting else {}
    except ValueError:
        value = {}
    return value if isinstance(value, dict) else {}
