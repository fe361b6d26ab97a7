"""Turn a request into a `Principal`: the session cookie first, else an access token in `Authorization`.

Role and status come from the user directory (fresh within seconds), never from the session snapshot.
A session whose user now has a higher role than it was issued with is rotated (new id, same data).
Sessions slide: an authenticated request pushes expiry to now + 30 days, at most once a minute.

Credentials are read only if they have the shape we issue: a `session` cookie that is not a session id
(base64url, bounded length — so also one that is not UTF-8) is no session at all, and an access token
that is not printable ASCII is an invalid token; neither ever reaches a store or a digest.
"""

from __future__ import annotations

import re

from sanic import Request

from core.enums import UserStatus
from core.identity import Principal
from server.clock import Clock
from server.components.sessions import COOKIE, SessionStore, new_session_id
from server.components.users import UserDirectory
from server.crypto import SecretBox
from server.errors import Forbidden, Unauthenticated

SLIDE_EVERY = 60
USER_ID_MAX_DIGITS = 19
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{16,128}")  # what `new_session_id` makes (43 characters)
_TOKEN = re.compile(r"[\x21-\x7e]{1,256}")  # printable ASCII; ours are 32 url-safe characters


def session_cookie(request: Request) -> str | None:
    """The `session` cookie if it can be a session id, else None (treated as no session)."""
    raw = request.cookies.get(COOKIE)
    return raw if raw and _SESSION_ID.fullmatch(raw) else None


def bearer(header: str) -> str:
    """The credential of an `Authorization` header: `Bearer <x>` or bare `<x>`."""
    header = header.strip()
    if header[:7].lower() == "bearer ":
        header = header[7:].strip()
    return header


class Identity:
    """Authenticates management requests from the session store, the user directory and the token box."""

    def __init__(self, sessions: SessionStore, users: UserDirectory, box: SecretBox, clock: Clock) -> None:
        self.sessions = sessions
        self.users = users
        self.box = box
        self.clock = clock

    async def authenticate(self, request: Request) -> Principal:
        raw = session_cookie(request)
        if raw:
            principal = await self._from_session(request, raw)
            if principal is not None:
                return principal
        token = bearer(request.headers.get("authorization", ""))
        if token:
            return await self._from_token(token)
        raise Unauthenticated("not logged in")

    async def _from_session(self, request: Request, raw: str) -> Principal | None:
        data = await self.sessions.get(raw)
        if not data or not data.get("id"):
            return None
        user = await self.users.state(int(data["id"]))
        if user is None or not user.active:
            await self.sessions.delete(raw)
            return None
        now = self.clock.now_s()
        if user.role > int(data.get("role", 0)):
            fresh = new_session_id()
            rotated = await self.sessions.rotate(raw, fresh, {"role": user.role, "pushed_at": now})
            if rotated is None:  # ended (revoked, logged out) since it was read: it stays ended
                return None
            data, raw = rotated, fresh
            request.ctx.set_session_cookie = raw
        elif now - int(data.get("pushed_at", 0)) >= SLIDE_EVERY:
            slid = await self.sessions.slide(raw, {"pushed_at": now})
            if slid is None:  # ended (revoked, logged out) since it was read: it stays ended
                return None
            data = slid
            request.ctx.set_session_cookie = raw
        return Principal(user=user, via="session", session_id=raw, session=data)

    async def _from_token(self, token: str) -> Principal:
        if not _TOKEN.fullmatch(token):
            raise Unauthenticated("invalid access token")
        digest = self.box.digest(token)
        user_id = await self.users.id_for_token(digest)
        user = await self.users.state(user_id) if user_id is not None else None
        if user is None or user.deleted or user.token_digest != digest:
            raise Unauthenticated("invalid access token")
        if user.status != UserStatus.ENABLED:
            raise Forbidden("user is disabled")
        return Principal(user=user, via="token")


def check_user_header(request: Request, principal: Principal) -> None:
    """`New-Api-User` must be present and equal the authenticated user's id."""
    raw = request.headers.get("new-api-user", "").strip()
    if not raw:
        raise Unauthenticated("New-Api-User header is required")
    # ASCII digits only, and short: `str.isdigit` admits "²" (which `int` rejects) and "١" (which it
    # reads as 1), and `int` refuses strings longer than 4300 digits.
    if not (raw.isascii() and raw.isdigit() and len(raw) <= USER_ID_MAX_DIGITS) or int(raw) != principal.id:
        raise Unauthenticated("New-Api-User does not match the logged-in user")
