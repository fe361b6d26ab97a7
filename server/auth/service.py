"""Login, logout, registration and access tokens (docs/api/auth.md#authentication-and-sessions).

A registered user's starting balance is `QuotaForNewUser`, plus `QuotaForInvitee` with an invitation code
as far as the sum stays within the quota engine's exact range (2^53 − 1; each option alone is bounded by
it): the row is new, so nothing else can be credited to it before it commits.
"""

from __future__ import annotations

import secrets
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass

from sqlalchemy.exc import IntegrityError

from backend.base import KeyValue
from core.enums import LogType, UserStatus
from core.identity import Role
from core.money import BALANCE_MAX
from models.db import Database
from models.logs import LogRepository
from models.tables import User, username_key
from models.users import UserRepository
from server import metrics
from server.clock import Clock
from server.components.email_codes import EmailCodes, Voucher
from server.components.options import Options
from server.components.sessions import SessionStore, new_session_id
from server.components.user_rules import (
    AFF_CODE_MAX,
    check_email,
    check_password,
    check_username,
    fresh_aff_code,
)
from server.components.users import UserDirectory
from server.components.verification import AuthMethod, SecondFactor
from server.crypto import Passwords, SecretBox, sha256_hex
from server.errors import BadRequest, Conflict, Forbidden, TooManyRequests, Unauthorized
from server.metrics import SignInFailure

LOGIN_FAIL_TTL = 900
LOGIN_FAIL_LIMIT = 10  # attempts per (account, client IP) and window that may reach the password check
INVALID_LOGIN = "invalid username or password"
PENDING_2FA_TTL = 300  # a password login waiting for its TOTP step expires after 5 minutes


@dataclass(frozen=True, slots=True)
class LoginResult:
    user: User | None
    session_id: str
    require_2fa: bool = False


def login_fail_key(account: str, client_ip: str) -> str:
    """The lockout counter of (account, client IP): a fixed-size digest, whatever name was attempted."""
    return f"login_fail:{sha256_hex(f'{account}|{client_ip}')}"


class AuthService:
    """Login, logout, registration and access tokens, with exactly the components they use."""

    def __init__(self, *, db: Database, backend: KeyValue, sessions: SessionStore, users: UserDirectory,
                 passwords: Passwords, box: SecretBox, options: Options, clock: Clock,
                 second_factor: SecondFactor, codes: EmailCodes) -> None:
        self.db = db
        self.backend = backend
        self.sessions = sessions
        self.users = users
        self.passwords = passwords
        self.box = box
        self.options = options
        self.clock = clock
        self.second_factor = second_factor  # whether a login needs the TOTP step (`/api/user/login/2fa`)
        self.codes = codes  # e-mail codes, required at registration with `EmailVerificationEnabled`

    async def login(self, username: str, password: str, client_ip: str,
                    old_session: str | None) -> LoginResult:
        if not self.options.settings.password_login_enabled:
            raise Forbidden("password login is disabled")
        async with self.db.transaction() as tx:
            user = await UserRepository(tx).by_login(username)
        account = str(user.id) if user is not None else username_key(username)
        fail_key = login_fail_key(account, client_ip)
        # Counted before the password check, in one atomic step (INCR), so that however many attempts run
        # at once, at most LOGIN_FAIL_LIMIT of them reach `verify`; a correct password clears the count.
        attempt = await self.backend.incr(fail_key, LOGIN_FAIL_TTL)
        if attempt > LOGIN_FAIL_LIMIT:
            metrics.sign_in_failed(SignInFailure.LOCKED)
            raise TooManyRequests("too many failed logins, try again later",
                              retry_after=await self.backend.ttl(fail_key) or LOGIN_FAIL_TTL)
        valid = await self.passwords.verify(user.password if user else None, password)
        if user is None or not valid or user.status != UserStatus.ENABLED:
            disabled = user is not None and valid
            metrics.sign_in_failed(SignInFailure.DISABLED if disabled else SignInFailure.PASSWORD)
            if attempt == LOGIN_FAIL_LIMIT:  # the last attempt the window allows failed: the lock starts
                metrics.sign_in_locked()
            raise Unauthorized(INVALID_LOGIN)
        await self.backend.delete(fail_key)

        if await self.second_factor.enabled(user.id):
            now = self.clock.now_s()
            if old_session:
                await self.sessions.delete(old_session)
            fresh = new_session_id()
            await self.sessions.save(fresh, {"pending_user_id": user.id,
                                             "pending_expires_at": now + PENDING_2FA_TTL},
                                     ttl=PENDING_2FA_TTL)
            return LoginResult(None, fresh, require_2fa=True)
        return LoginResult(user, await self.open_session(user, AuthMethod.PASSWORD, old_session))

    async def open_session(self, user: User, method: AuthMethod, old_session: str | None) -> str:
        """The last step of every successful login (password, password + 2FA, passkey): the session sent
        along (if any) ends, a fresh one holds the user, and `last_login_at` moves. Returns its raw id."""
        now = self.clock.now_s()
        if old_session:
            await self.sessions.delete(old_session)
        fresh = new_session_id()
        await self.sessions.save(fresh, {"id": user.id, "role": user.role, "auth_method": method.value,
                                         "pushed_at": now, "created_at": now})
        async with self.db.transaction() as tx:
            await UserRepository(tx).update_fields(user.id, last_login_at=now)
        user.last_login_at = now
        return fresh

    async def logout(self, session_id: str | None) -> None:
        if session_id:
            await self.sessions.delete(session_id)

    async def register(self, username: str, password: str, email: str, aff_code: str,
                       verification_code: str = "") -> int:
        s = self.options.settings
        if not (s.register_enabled and s.password_register_enabled):
            raise Forbidden("registration is disabled")
        username = check_username(username)
        check_password(password)
        email = check_email(email) if email else ""
        verify = s.email_verification_enabled
        if verify and not email:
            raise BadRequest("email: is required (e-mail verification is on)")
        if verify and not verification_code:
            raise BadRequest("verification_code: is required")
        hashed = await self.passwords.hash(password)
        now = self.clock.now_s()
        # the code is checked last (after the conflicts), taken, and given back if the row is not committed
        voucher: AbstractAsyncContextManager[Voucher | None] = (
            self.codes.voucher(email, verification_code, "verification_code") if verify
            else nullcontext())
        try:
            async with voucher as code:
                async with self.db.transaction() as tx:  # conflicts answer before the code is looked at
                    users = UserRepository(tx)
                    if await users.username_taken(username):
                        raise Conflict("username is already taken")
                    if email and await users.email_taken(email):
                        raise Conflict("email is already used")
                if code is not None:  # outside any transaction: without Redis the code is a row of `kv`
                    await code.redeem()
                async with self.db.transaction() as tx:  # a racing registration: IntegrityError below
                    users = UserRepository(tx)
                    # a code longer than any we issue is unknown (no lookup with a caller's megabytes)
                    inviter = (await users.by_aff_code(aff_code) if 0 < len(aff_code) <= AFF_CODE_MAX
                               else None)
                    # the starting balance stays within the engine's exact range: each option is
                    # bounded by it, their sum is held to it (the invitee's part is what is left)
                    bonus = min(s.quota_for_invitee, BALANCE_MAX - s.quota_for_new_user) if inviter else 0
                    quota = s.quota_for_new_user + bonus
                    user_id = await users.add(User(
                        username=username, password=hashed, display_name=username, email=email,
                        role=Role.COMMON, status=UserStatus.ENABLED, group="default", quota=quota,
                        aff_code=await fresh_aff_code(users), inviter_id=inviter.id if inviter else 0,
                        created_at=now, setting="", remark="", stripe_customer="",
                    ))
                    if inviter is not None:
                        # rewards, not balance (moved later by aff_transfer), held to BALANCE_MAX too
                        await users.reward_inviter(inviter.id, s.quota_for_inviter)
                        if bonus > 0:  # part of the new row's starting balance, logged too
                            await LogRepository(tx).add(
                                type=LogType.SYSTEM, user_id=user_id, username=username, created_at=now,
                                quota=bonus, content=f"invitation reward: +{bonus} quota for registering "
                                                     f"with the code of user #{inviter.id}")
        except IntegrityError:  # a concurrent registration won the race on a unique key
            async with self.db.transaction() as tx:
                if email and await UserRepository(tx).email_taken(email) and not await UserRepository(
                        tx).username_taken(username):
                    raise Conflict("email is already used") from None
            raise Conflict("username is already taken") from None
        return user_id

    async def new_access_token(self, user_id: int) -> str:
        """A fresh token, shown once; only its HMAC digest is stored and the previous token dies at once."""
        token = secrets.token_urlsafe(24)
        digest = self.box.digest(token)
        async with self.db.transaction() as tx:
            await UserRepository(tx).update_fields(user_id, access_token=digest)
        await self.users.invalidate(user_id, digest)  # (the old digest fails the state check from now on)
        return token
