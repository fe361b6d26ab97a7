"""Who is asking: the roles, a user's current state as every request needs it, and the authenticated
principal of a management request.

`UserState` is what the user directory caches (role, status, token digest, the settings the gateway
reads — fresh within seconds, never taken from a session snapshot); `Principal` is the user a request
was authenticated as, and how. Both are plain frozen values so that services, views and the relay can
take them without knowing how they were obtained.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from core.enums import UserStatus


class Role(IntEnum):
    """A user's role; each admits everything the lower ones may do (`users.role`, the wire `role`)."""

    GUEST = 0
    COMMON = 1
    ADMIN = 10
    ROOT = 100


@dataclass(frozen=True, slots=True)
class UserState:
    id: int
    username: str
    display_name: str
    role: int
    status: int
    group: str
    token_digest: str | None
    deleted: bool
    # the user's own settings the gateway reads on every call (docs/api/accounts.md#your-settings)
    record_ip_log: bool = False
    accept_unset_model_ratio_model: bool = False

    @property
    def active(self) -> bool:
        return self.status == UserStatus.ENABLED and not self.deleted


@dataclass(frozen=True, slots=True)
class Principal:
    user: UserState
    via: str  # "session" | "token"
    session_id: str | None = None
    session: dict[str, Any] | None = None

    @property
    def id(self) -> int:
        return self.user.id

    @property
    def role(self) -> int:
        return self.user.role
