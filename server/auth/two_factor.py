"""TOTP two-factor authentication: a user's setup, enable, disable and backup codes, the admin's stats and
reset, and the second step of a password login (docs/api/auth.md#two-factor-authentication).

The secret is generated here, shown once by `setup` (with its backup codes and the `otpauth://` URI) and
stored only encrypted; backup codes are stored only as keyed digests, so `backup_codes` can show new
ones but never the old ones. Code checks that count toward the failure lock go through `TotpFactor.check`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.exc import IntegrityError

from core.enums import LogType, UserStatus
from core.identity import Principal
from models.db import Database
from models.logs import LogRepository
from models.tables import User
from models.two_factor import TwoFactorRepository
from models.users import UserRepository
from server import metrics
from server.auth.factor_schemas import TwoFactorSetup, TwoFactorStats, TwoFactorStatus
from server.auth.second_factor import REUSED_CODE, USED_CODE, WRONG_CODE, Check, TotpFactor, refused_code
from server.auth.service import INVALID_LOGIN, AuthService
from server.auth.totp import (
    backup_digest_input,
    matching_step,
    new_backup_codes,
    new_secret,
    provisioning_uri,
)
from server.clock import Clock
from server.components.options import Options
from server.components.sessions import SessionStore
from server.components.user_rules import require_hierarchy
from server.components.verification import AuthMethod
from server.crypto import SecretBox
from server.errors import BadRequest, Conflict, NotFound, TooManyRequests, Unauthorized

LOGIN_EXPIRED = "login expired, please log in again"
NOT_ENABLED = "2FA is not enabled"


@dataclass(frozen=True, slots=True)
class SecondStep:
    """A login completed by its second factor: the user and the raw id of their new session."""

    user: User
    session_id: str


class TwoFactorService:
    """The 2FA routes, with exactly the components they use."""

    def __init__(self, *, db: Database, factor: TotpFactor, auth: AuthService, sessions: SessionStore,
                 box: SecretBox, options: Options, clock: Clock) -> None:
        self.db = db
        self.factor = factor  # the enabled flag, code checks and the failure lock
        self.auth = auth  # `open_session`, the last step of every login
        self.sessions = sessions
        self.box = box
        self.options = options
        self.clock = clock

    def _digests(self, user_id: int, codes: list[str]) -> list[str]:
        return [self.box.digest(backup_digest_input(user_id, c)) for c in codes]

    async def status(self, user_id: int) -> TwoFactorStatus:
        async with self.db.transaction() as tx:
            repo = TwoFactorRepository(tx)
            enabled = await repo.is_enabled(user_id)
            remaining = await repo.count_backup_codes(user_id) if enabled else 0
        return TwoFactorStatus.of(enabled=enabled, locked=await self.factor.locked_for(user_id) > 0,
                                  backup_codes_remaining=remaining)

    async def setup(self, principal: Principal) -> TwoFactorSetup:
        """A new pending secret and backup codes (replacing a pending setup), shown this once."""
        secret, codes = new_secret(), new_backup_codes()
        try:
            async with self.db.transaction() as tx:
                repo = TwoFactorRepository(tx)
                current = await repo.get(principal.id, lock=True)
                if current is not None and current.enabled:
                    raise Conflict("2FA is already enabled")
                await repo.start_setup(principal.id, self.box.encrypt(secret),
                                       self._digests(principal.id, codes), self.clock.now_s())
        except IntegrityError:  # a concurrent setup of the same user won
            raise Conflict("another 2FA setup ran at the same time, try again") from None
        uri = provisioning_uri(secret, principal.user.username, self.options.settings.system_name)
        return TwoFactorSetup.of(secret=secret, uri=uri, backup_codes=codes)

    async def pending_uri(self, principal: Principal) -> str:
        """The `otpauth://` URI of the pending setup's secret (what `setup` showed as `qr_code_data`), for
        its QR code; 404 without a pending setup, 409 when 2FA is on (its secret is never shown again)."""
        async with self.db.transaction() as tx:
            row = await TwoFactorRepository(tx).get(principal.id)
        if row is None:
            raise NotFound("no 2FA setup is pending")
        if row.enabled:
            raise Conflict("2FA is already enabled")
        return provisioning_uri(self.box.decrypt(row.secret), principal.user.username,
                                self.options.settings.system_name)

    async def enable(self, user_id: int, code: str) -> None:
        """Turn the pending setup on with a TOTP code of its secret (failures are not counted)."""
        async with self.db.transaction() as tx:
            repo = TwoFactorRepository(tx)
            row = await repo.get(user_id)
            if row is None:
                raise NotFound("no 2FA setup is pending")
            if row.enabled:
                raise Conflict("2FA is already enabled")
            step = matching_step(self.box.decrypt(row.secret), code, self.clock.now())
            if step is None or not await repo.enable(user_id, step, self.clock.now_s()):
                raise BadRequest(WRONG_CODE)
        await self.factor.clear(user_id)

    async def _require_enabled(self, user_id: int) -> None:
        if not await self.factor.enabled(user_id):
            raise NotFound(NOT_ENABLED)

    async def disable(self, user_id: int, code: str) -> None:
        """Remove the secret and backup codes after a TOTP or backup code (counted; 429 while locked)."""
        await self._require_enabled(user_id)
        if (verdict := await self.factor.check(user_id, code)) is not Check.PASSED:
            raise refused_code(verdict)
        async with self.db.transaction() as tx:
            await TwoFactorRepository(tx).delete(user_id)
        await self.factor.clear(user_id)

    async def new_backup_codes(self, user_id: int, code: str) -> list[str]:
        """Replace every backup code after a TOTP code (backup codes do not count here)."""
        await self._require_enabled(user_id)
        if (verdict := await self.factor.check(user_id, code, backup=False)) is not Check.PASSED:
            raise refused_code(verdict)
        codes = new_backup_codes()
        async with self.db.transaction() as tx:
            await TwoFactorRepository(tx).replace_backup_codes(user_id, self._digests(user_id, codes),
                                                               self.clock.now_s())
        return codes

    async def stats(self) -> TwoFactorStats:
        async with self.db.transaction() as tx:
            total, enabled = await TwoFactorRepository(tx).stats()
        return TwoFactorStats.of(total=total, enabled=enabled)

    async def admin_reset(self, actor: Principal, user_id: int) -> None:
        """An admin removes a user's 2FA (hierarchy applies); written to the manage log."""
        async with self.db.transaction() as tx:
            target = await UserRepository(tx).get(user_id)
            if target is None:
                raise NotFound("user not found")
            require_hierarchy(actor.role, target.role)
            repo = TwoFactorRepository(tx)
            if not await repo.is_enabled(user_id):
                raise NotFound(NOT_ENABLED)
            await repo.delete(user_id)
            await LogRepository(tx).add(
                type=LogType.MANAGE, user_id=target.id, username=target.username,
                created_at=self.clock.now_s(),
                content=f"admin {actor.user.username} reset the 2FA of user {target.username}",
                other={"admin_info": {"admin_id": actor.id, "admin_username": actor.user.username}})
        await self.factor.clear(user_id)

    async def finish_login(self, pending_session: str | None, code: str) -> SecondStep:
        """Step 2 of a password login: the pending session's user, a TOTP or backup code, a new session."""
        data = await self.sessions.get(pending_session) if pending_session else None
        now = self.clock.now_s()
        if pending_session is None or not data or not data.get("pending_user_id"):
            raise Unauthorized(LOGIN_EXPIRED)  # (a real session sent along is left alone)
        if int(data.get("pending_expires_at", 0)) <= now:
            await self.sessions.delete(pending_session)
            raise Unauthorized(LOGIN_EXPIRED)
        user_id = int(data["pending_user_id"])
        async with self.db.transaction() as tx:
            user = await UserRepository(tx).get(user_id)
        if user is None or user.status != UserStatus.ENABLED:
            raise Unauthorized(INVALID_LOGIN)
        if not await self.factor.enabled(user_id):  # 2FA was removed meanwhile: a new login needs no step 2
            raise Unauthorized(LOGIN_EXPIRED)
        try:
            verdict = await self.factor.check(user_id, code)
        except TooManyRequests:
            metrics.sign_in_failed(metrics.SignInFailure.LOCKED)
            raise
        if verdict is not Check.PASSED:
            metrics.sign_in_failed(metrics.SignInFailure.TOTP)
            if verdict is Check.REUSED:
                raise Unauthorized(USED_CODE.removeprefix("code: "), code=REUSED_CODE)
            raise Unauthorized("invalid 2FA code")
        # one pending login opens one session: of concurrent step 2s with different valid codes, the one
        # that takes the pending mark goes on (a wrong code above leaves it for another try)
        if await self.sessions.take(pending_session, "pending_user_id") is None:
            raise Unauthorized(LOGIN_EXPIRED)
        return SecondStep(user, await self.auth.open_session(user, AuthMethod.PASSWORD_2FA, pending_session))
