"""`POST /api/verify` and `GET /api/verify/status`: verifying the caller's session with a second factor
(docs/api/auth.md#secure-verification).

A verification is a mark in the session's record (`secure_verified_at`, `secure_verified_method`), read by
`SessionVerifier` (server/components/verification.py) for the actions that need one. With `2fa` it costs a
TOTP or backup code, checked under the 2FA failure lock; with `passkey` it costs the mark a passkey assertion
made for this session left in the record (`secure_passkey_ready_at`), which is taken (atomically: of any
number of concurrent requests, one gets it) whether it is still fresh or not. The verification is merged
into the record as stored at that moment, so nothing written to it meanwhile is lost.
"""

from __future__ import annotations

from core.identity import Principal
from server.auth.factor_schemas import VerificationStatus, Verified
from server.auth.second_factor import Check, TotpFactor, refused_code
from server.clock import Clock
from server.components.sessions import SessionStore
from server.components.verification import (
    METHODS,
    PASSKEY_READY_MARK,
    PASSKEY_READY_SECONDS,
    VERIFIED_SECONDS,
    PasskeyPresence,
    verification_of,
)
from server.errors import BadRequest, Unauthenticated


class VerificationService:
    """Secure verification of a session, with exactly the components it uses."""

    def __init__(self, *, factor: TotpFactor, passkeys: PasskeyPresence, sessions: SessionStore,
                 clock: Clock) -> None:
        self.factor = factor  # TOTP / backup codes under the failure lock
        self.passkeys = passkeys  # whether the user has a passkey at all
        self.sessions = sessions
        self.clock = clock

    async def verify(self, principal: Principal, method: str, code: str | None) -> Verified:
        user_id = principal.id
        raw = principal.session_id
        assert raw is not None  # the route is session-only
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
            if (verdict := await self.factor.check(user_id, code)) is not Check.PASSED:
                raise refused_code(verdict)
        else:
            ready = await self.sessions.take(raw, PASSKEY_READY_MARK)  # taken whether or not still fresh
            age = self.clock.now_s() - ready if isinstance(ready, int) and not isinstance(ready, bool) else -1
            if not 0 <= age < PASSKEY_READY_SECONDS:
                raise BadRequest("method: no recent passkey verification; verify with a passkey first")
        now = self.clock.now_s()
        if not await self.sessions.merge(raw, {"secure_verified_at": now, "secure_verified_method": method}):
            raise Unauthenticated("not logged in")  # the session ended meanwhile
        return Verified.of(now + VERIFIED_SECONDS)

    async def status(self, principal: Principal) -> VerificationStatus:
        return VerificationStatus.of(verification_of(principal.session, self.clock.now_s()))
