"""How a redemption code is shown (docs/API.md#redemption-codes): in full to admins, `count` always 0."""

from __future__ import annotations

from typing import Any

from models.redemptions import Redemption


def redemption_view(code: Redemption) -> dict[str, Any]:
    return {
        "id": code.id, "user_id": code.user_id, "key": code.key, "status": code.status, "name": code.name,
        "quota": code.quota, "created_time": code.created_time, "redeemed_time": code.redeemed_time,
        "expired_time": code.expired_time, "used_user_id": code.used_user_id, "count": 0,
        "DeletedAt": code.deleted_at,
    }
