"""How the signed-in user is shown in a login reply (password, passkey or second-factor step)."""

from __future__ import annotations

from typing import Any

from models.tables import User


def login_view(user: User) -> dict[str, Any]:
    return {"id": user.id, "username": user.username, "display_name": user.display_name,
            "role": user.role, "status": user.status, "group": user.group}
