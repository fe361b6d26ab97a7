"""The `session` cookie on replies: set (login, rotation, a slid session) and cleared (logout, deletion).

The cookie gets `Secure` when users reach the site over https: `PUBLIC_URL` says so, or the
`ServerAddress` option (changeable at run time, so read on every use) starts with `https://`. A reply that
sets it carries a session id, so it says `Cache-Control: no-store` (server/web/no_store.py): no cache may
keep it and hand the session to someone else.
"""

from __future__ import annotations

from sanic.response import BaseHTTPResponse

from server.components.options import Options
from server.components.sessions import COOKIE, SESSION_TTL
from server.web.no_store import NO_STORE


class SessionCookies:
    def __init__(self, public_https: bool, options: Options) -> None:
        self.public_https = public_https
        self.options = options

    def secure(self) -> bool:
        return self.public_https or str(self.options["ServerAddress"]).lower().startswith("https://")

    def set(self, response: BaseHTTPResponse, raw: str) -> None:
        response.add_cookie(COOKIE, raw, path="/", max_age=SESSION_TTL, httponly=True, samesite="Strict",
                            secure=self.secure())
        response.headers.update(NO_STORE)

    def clear(self, response: BaseHTTPResponse) -> None:
        response.add_cookie(COOKIE, "", path="/", max_age=0, httponly=True, samesite="Strict",
                            secure=self.secure())
