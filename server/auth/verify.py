"""`POST /api/verify` and `GET /api/verify/status`: verifying the caller's session with a second factor
(docs/API.md#secure-verification).

A verification is a mark in the session's record (`secure_verified_at`, `secure_verified_method`), read by
`SessionVerifier` (server/auth/verification.py) for the actions that need one. With `2fa` it costs a TOTP
or backup code, checked under the 2FA failure lock; with `passkey` it costs the mark a passkey assertion
made for this session left in the record (`secure_passkey_ready_at`), which is taken whether it is still
fresh or not.
"""

from __future__ import annotations

from typing import Any

from core.identity import Principal
from server.auth.second_factor import TotpFactor
from server.auth.sessions import SessionStore
from server.auth.verification import (
    METHODS,
    PASSKEY_READY_SECONDS,
    VERIFIED_SECONDS,
    PasskeyPresence,
    verification_of,
)
from server.clock import Clock
from server.errors import BadRequest


class VerificationService:
    """Secure verification of a session, with exactly the components it uses."""

    def __init__(self, *, factor: TotpFactor, passkeys: PasskeyPresence, sessions: SessionStore,
                 clock: Clock) -> None:
        self.factor = factor  # TOTP / backup codes under the failure lock
        self.passkeys = passkeys  # whether the user has a passkey at all
        self.sessions = sessions
        self.clock = clock

    async def _record(self, principal: Principal) -> tuple[str, dict[str, Any]]:
        """The caller's session id and its record as stored now (a write merges into the latest copy)."""
        raw = principal.session_id
        assert raw is not None  # the route is session-only
        return raw, (await self.sessions.get(raw)) or dict(principal.session or {})

    async def verify(self, principal: Principal, method: str, code: str | None) -> dict[str, Any]:
        user_id = principal.id
        has_totp = await self.factor.enabled(user_id)
        if not has_totp and await self.passkeys.count(user_id) == 0:
            raise BadRequest("method: no second factor to verify with; enable 2FA or add a passkey first")
        if method not in METHODS:
            raise BadRequest("method: must be 2fa or passkey")
        if method == "2fa":
            if not has_totp:
                raise BadRequest("method: 2FA is not enabled")
            if not code:
                raise BadRequest("code: is required")
            if not await self.factor.check(user_id, code):
                raise BadRequest("code: invalid 2FA code")
            raw, record = await self._record(principal)
        else:
            raw, record = await self._record(principal)
            ready = record.pop("secure_passkey_ready_at", None)
            if ready is not None:  # taken whether or not it is still fresh
                await self.sessions.save(raw, record)
            age = self.clock.now_s() - ready if isinstance(ready, int) and not isinstance(ready, bool) else -1
            if not 0 <= age < PASSKEY_READY_SECONDS:
                raise BadRequest("method: no recent passkey verification; verify with a passkey first")
        now = self.clock.now_s()
        record.update(secure_verified_at=now, secure_verified_method=method)
        await self.sessions.save(raw, record)
        return {"verified": True, "expires_at": now + VERIFIED_SECONDS}

    async def status(self, principal: Principal) -> dict[str, Any]:
        found = verification_of(principal.session, self.clock.now_s())
        if found is None:
            return {"verified": False, "method": "", "expires_at": 0}
        method, expires_at = found
        return {"verified": True, "method": method, "expires_at": expires_at}
