"""How an API key is shown (docs/API.md#api-keys): masked everywhere (`abcd**********wxyz`), in full only in
the create reply (`sk-…`) and through `POST /api/token/:id/key` (bare, as new-api answers it)."""

from __future__ import annotations

import logging
from typing import Any

from cryptography.exceptions import InvalidTag

from models.keys import ApiKey
from server.components.keys import KEY_PREFIX
from server.crypto import SecretBox

log = logging.getLogger("tollway.keys")
MASK = "**********"


def mask(key: str) -> str:
    return f"{key[:4]}{MASK}{key[-4:]}"


def reveal(box: SecretBox, row: ApiKey) -> str | None:
    """The bare 48-character key, or None when it cannot be decrypted (SECRET_KEY changed)."""
    try:
        return box.decrypt(row.key_encrypted)
    except (InvalidTag, ValueError):
        log.error("API key %d cannot be decrypted with the current SECRET_KEY", row.id)
        return None


def key_view(row: ApiKey, key: str | None, *, full: bool = False) -> dict[str, Any]:
    """The token resource; `key` is the bare key (None = unreadable), shown in full only if `full`."""
    shown = MASK if key is None else (f"{KEY_PREFIX}{key}" if full else mask(key))
    return {
        "id": row.id, "user_id": row.user_id, "key": shown, "status": row.status, "name": row.name,
        "created_time": row.created_time, "accessed_time": row.accessed_time,
        "expired_time": row.expired_time, "remain_quota": row.remain_quota, "used_quota": row.used_quota,
        "unlimited_quota": bool(row.unlimited_quota), "model_limits_enabled": bool(row.model_limits_enabled),
        "model_limits": row.model_limits, "allow_ips": row.allow_ips, "group": row.group,
        "DeletedAt": row.deleted_at,
    }


def usage_view(row: ApiKey, remain: int) -> dict[str, Any]:
    """`GET /api/usage/token/` (new-api's shape); `remain` is the live remaining quota."""
    return {
        "object": "token_usage", "name": row.name, "total_granted": row.used_quota + remain,
        "total_used": row.used_quota, "total_available": remain, "unlimited_quota": bool(row.unlimited_quota),
        "expires_at": 0 if row.expired_time == -1 else row.expired_time,
    }
