"""Rules about users that several services share: field limits, the hierarchy, invitation codes."""

from __future__ import annotations

import secrets
import string

from models.users import UserRepository
from server.errors import BadRequest, Forbidden
from server.web.access import Role
from server.web.body import has_control_chars

USERNAME_MAX = 20
DISPLAY_NAME_MAX = 20
PASSWORD_MIN, PASSWORD_MAX = 8, 64
AFF_ALPHABET = string.ascii_letters + string.digits


def check_username(name: str) -> str:
    if not 1 <= len(name) <= USERNAME_MAX or has_control_chars(name):
        raise BadRequest(f"username: must be 1–{USERNAME_MAX} characters without control characters")
    return name


def check_password(password: str, label: str = "password") -> str:
    if not PASSWORD_MIN <= len(password) <= PASSWORD_MAX:
        raise BadRequest(f"{label}: must be {PASSWORD_MIN}–{PASSWORD_MAX} characters")
    return password


def may_act_on(actor_role: int, target_role: int) -> bool:
    """An admin acts on a user only with a strictly greater role; root acts on anyone."""
    return actor_role == Role.ROOT or actor_role > target_role


def require_hierarchy(actor_role: int, target_role: int) -> None:
    if not may_act_on(actor_role, target_role):
        raise Forbidden("you cannot act on a user whose role is equal to or above yours")


async def fresh_aff_code(users: UserRepository) -> str:
    """8 random [A-Za-z0-9] characters, drawn again on a collision."""
    while True:
        code = "".join(secrets.choice(AFF_ALPHABET) for _ in range(8))
        if not await users.aff_code_taken(code):
            return code
