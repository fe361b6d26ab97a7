"""Request and reply schemas of login, logout, registration and the access token."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from models.tables import User
from server.components.user_rules import EMAIL_MAX, PASSWORD_MAX, USERNAME_MAX
from server.web.schema import Reply, Schema, Str, TextRule, Trimmed

# Nothing longer can name an account or be its password: refused before any lookup, hash or counter.
LOGIN_NAME_MAX = max(USERNAME_MAX, EMAIL_MAX)


class Login(Schema):
    username: Annotated[str, TextRule(trim=True, min_len=1, max_len=LOGIN_NAME_MAX)] = Field(
        description="the username or the e-mail address")
    password: Annotated[str, TextRule(min_len=1, max_len=PASSWORD_MAX)]


class Register(Schema):
    username: Trimmed
    password: Str
    email: Trimmed = ""
    verification_code: Str = Field("", description="the code mailed by `GET /api/verification` (required, "
                                                   "with `email`, when e-mail verification is on)")
    aff_code: Str = Field("", description="an invitation code (never trimmed)")


class LoginView(Reply):
    """Who is now logged in (send `id` as `New-Api-User` with every later request)."""

    id: int
    username: str
    display_name: str
    role: int
    status: int
    group: str

    @classmethod
    def of(cls, user: User) -> LoginView:
        """The signed-in user, in the reply of every way to log in (password, second factor, passkey)."""
        return cls(id=user.id, username=user.username, display_name=user.display_name, role=user.role,
                   status=user.status, group=user.group)


class SecondFactorRequired(Reply):
    """The password was right, but the account needs its second factor before a session is granted."""

    require_2fa: bool = Field(description="always true: send a TOTP or backup code to "
                                          "POST /api/user/login/2fa within 5 minutes")

    @classmethod
    def of(cls) -> SecondFactorRequired:
        return cls(require_2fa=True)


LoginReply = LoginView | SecondFactorRequired
