"""The rules of the user routes: self view and edits, and the admin's list, create, edit, delete, manage.

Every change that affects access (status, role, password, deletion) commits first, then revokes sessions
and invalidates the cached user on every worker, so it applies from the user's next request. A new
password (own or set by an admin) also ends the access token, in the same transaction.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from typing import Any, TypeVar

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from core.enums import LogType, UserStatus
from core.identity import Principal, Role
from core.log_entry import LogEntry, admin_info
from models.credits import PendingCreditRepository
from models.db import Database
from models.logs import LogRepository
from models.passkeys import PasskeyRepository
from models.tables import User
from models.two_factor import TwoFactorRepository
from models.users import UserRepository
from quota.engine import QuotaEngine
from quota.store import NeedsLoad
from quota.types import BALANCE_MAX, Adjustment, BalanceOutOfRange, BalanceUnknown, SubtractTooLarge
from server.accounts.schemas import ManageResult, SelfView, UserView
from server.clock import Clock
from server.components.options import Options
from server.components.sessions import SessionStore, new_session_id
from server.components.user_rules import (
    DISPLAY_NAME_MAX,
    check_password,
    check_username,
    fresh_aff_code,
    require_hierarchy,
)
from server.components.user_settings import merge_settings, settings_of
from server.components.users import UserDirectory
from server.credits import OUT_OF_RANGE, headroom
from server.crypto import Passwords
from server.errors import BadRequest, Conflict, Forbidden, NotFound, ServiceUnavailable
from server.web.pagination import Page

MANAGE_ACTIONS = ("disable", "enable", "delete", "promote", "demote", "add_quota")
QUOTA_MODES = ("add", "subtract", "override")
ID_MAX = 10**18 - 1  # the largest id a path accepts (18 digits)
LOAD_ATTEMPTS = 3  # an account lost by the store between its load and the locked edit is loaded again


async def _target(users: UserRepository, actor: Principal, user_id: int, *, lock: bool = False) -> User:
    user = await (users.get_for_update(user_id) if lock else users.get(user_id))
    if user is None:
        raise NotFound("user not found")
    require_hierarchy(actor.role, user.role)
    return user


View = TypeVar("View", UserView, SelfView)


async def _views(tx: AsyncSession, users: Sequence[User]) -> list[UserView]:
    """The admin's views of `users`, each saying whether its 2FA is on and how many passkeys it has (what
    the console needs to offer their resets only when there is something to reset): one query each."""
    ids = [u.id for u in users]
    factors = await TwoFactorRepository(tx).enabled_among(ids)
    passkeys = await PasskeyRepository(tx).counts(ids)
    return [UserView.of(u, two_factor=u.id in factors, passkeys=passkeys.get(u.id, 0)) for u in users]


MANAGE_TEXT = {"disable": "disabled", "enable": "enabled", "delete": "deleted",
               "promote": "promoted to admin", "demote": "demoted to common user"}


class AccountService:
    """Your own account and the admin's user routes, with exactly the components they use."""

    def __init__(self, *, db: Database, users: UserDirectory, sessions: SessionStore, passwords: Passwords,
                 quota: QuotaEngine, options: Options, clock: Clock) -> None:
        self.db = db
        self.users = users
        self.sessions = sessions
        self.passwords = passwords
        self.quota = quota
        self.options = options
        self.clock = clock

    async def _revoke(self, user_id: int, keep_session: str | None = None,
                      token_digest: str | None = None) -> None:
        await self.sessions.revoke_user(user_id, keep_session)
        await self.users.invalidate(user_id, token_digest)

    async def set_password(self, user_id: int, password: str) -> None:
        """A new password for a live user (a password reset by e-mail): like an admin setting it, the
        access token ends with it, and after the commit every session of the user is revoked."""
        hashed = await self.passwords.hash(check_password(password))
        async with self.db.transaction() as tx:
            users = UserRepository(tx)
            user = await users.get_for_update(user_id)
            if user is None:
                raise NotFound("user not found")
            old_token = user.access_token
            await users.update_fields(user_id, password=hashed, access_token=None)
        await self._revoke(user_id, token_digest=old_token)

    # ---- self ---------------------------------------------------------------------------------------

    async def update_settings(self, principal: Principal, changes: dict[str, Any]) -> dict[str, Any]:
        """Merge the checked `changes` into the caller's settings, keep the other keys → the merged settings.
        The cached user state is dropped after the commit, so the gateway applies them from the next call."""
        async with self.db.transaction() as tx:
            users = UserRepository(tx)
            user = await users.get_for_update(principal.id)
            if user is None:
                raise NotFound("user not found")
            merged = merge_settings(settings_of(user), changes)
            await users.update_fields(user.id, setting=json.dumps(merged, ensure_ascii=False))
        await self.users.invalidate(principal.id)
        return merged

    async def get_self(self, principal: Principal) -> SelfView:
        async with self.db.transaction() as tx:
            user = await UserRepository(tx).get(principal.id)
        if user is None:
            raise NotFound("user not found")
        return (await self.with_live_quota([SelfView.of(user)]))[0]

    async def update_self(self, principal: Principal, changes: dict[str, Any]) -> tuple[SelfView, str | None]:
        """Apply the non-empty fields; returns the self view and the caller's new session id (if rotated)."""
        values: dict[str, Any] = {}
        password = changes.get("password") or ""
        old_token: str | None = None
        async with self.db.transaction() as tx:
            users = UserRepository(tx)
            user = await users.get_for_update(principal.id)
            if user is None:
                raise NotFound("user not found")
            if changes.get("username"):
                name = check_username(changes["username"])
                if name != user.username and await users.username_taken(name, except_id=user.id):
                    raise Conflict("username is already taken")
                values["username"] = name
            if changes.get("display_name"):
                if len(changes["display_name"]) > DISPLAY_NAME_MAX:
                    raise BadRequest(f"display_name: must be at most {DISPLAY_NAME_MAX} characters")
                values["display_name"] = changes["display_name"]
            if password:
                check_password(password)
                original = changes.get("original_password") or ""
                if not original:
                    raise BadRequest("original_password: is required to change the password")
                if not await self.passwords.verify(user.password, original):
                    raise Forbidden("original_password: is wrong")
                values["password"] = await self.passwords.hash(password)
                values["access_token"] = None  # a new password ends the access token with the sessions
                old_token = user.access_token
            merged = {k: changes[k] for k in ("sidebar_modules", "language")
                      if changes.get(k) not in (None, "")}
            if merged:
                values["setting"] = json.dumps({**settings_of(user), **merged}, ensure_ascii=False)
            if values:
                try:
                    await users.update_fields(user.id, **values)
                except IntegrityError:
                    raise Conflict("username is already taken") from None
                for name, value in values.items():
                    setattr(user, name, value)
            view = SelfView.of(user)
        view = (await self.with_live_quota([view]))[0]
        rotated = None
        if password:
            if principal.via == "session" and principal.session_id:
                fresh = new_session_id()
                now = self.clock.now_s()
                moved = await self.sessions.rotate(principal.session_id, fresh, {"pushed_at": now})
                if moved is not None:  # (None: the session ended meanwhile; the caller is logged out)
                    rotated = fresh
            await self._revoke(principal.id, keep_session=rotated, token_digest=old_token)
        elif values:
            await self.users.invalidate(principal.id)
        return view, rotated

    async def delete_self(self, principal: Principal) -> None:
        if principal.role == Role.ROOT:
            raise Forbidden("root cannot delete its own account")
        await self._soft_delete(principal.id)

    async def _soft_delete(self, user_id: int) -> None:
        async with self.db.transaction() as tx:
            await UserRepository(tx).update_fields(user_id, deleted_at=self.clock.now_s(), access_token=None)
        await self._revoke(user_id)

    # ---- admin --------------------------------------------------------------------------------------

    async def list_users(self, page: Page, *, include_deleted: bool, keyword: str = "",
                         group: str = "") -> dict[str, Any]:
        async with self.db.transaction() as tx:
            rows, total = await UserRepository(tx).page(
                offset=page.offset, limit=page.size, include_deleted=include_deleted, keyword=keyword,
                group=group,
            )
            views = await _views(tx, rows)
        return page.payload(await self.with_live_quota(views), total)

    async def get_user(self, actor: Principal, user_id: int) -> UserView:
        async with self.db.transaction() as tx:
            view = (await _views(tx, [await _target(UserRepository(tx), actor, user_id)]))[0]
        return (await self.with_live_quota([view]))[0]

    async def create_user(self, actor: Principal, username: str, password: str, display_name: str,
                          role: int) -> int:
        username = check_username(username)
        check_password(password)
        if len(display_name) > DISPLAY_NAME_MAX:
            raise BadRequest(f"display_name: must be at most {DISPLAY_NAME_MAX} characters")
        if role not in (Role.COMMON, Role.ADMIN):
            raise BadRequest("role: must be 1 (common user) or 10 (admin)")
        if role >= actor.role:
            raise Forbidden("you can only create users with a role below yours")
        hashed = await self.passwords.hash(password)
        try:
            async with self.db.transaction() as tx:
                users = UserRepository(tx)
                if await users.username_taken(username):
                    raise Conflict("username is already taken")
                return await users.add(User(
                    username=username, password=hashed, display_name=display_name or username, role=role,
                    status=UserStatus.ENABLED, group="default",
                    quota=self.options.settings.quota_for_new_user,
                    aff_code=await fresh_aff_code(users), created_at=self.clock.now_s(), email="",
                    setting="", remark="", stripe_customer="",
                ))
        except IntegrityError:
            raise Conflict("username is already taken") from None

    async def update_user(self, actor: Principal, user_id: int, changes: dict[str, Any]) -> UserView:
        values: dict[str, Any] = {}
        if changes.get("username") is not None:
            values["username"] = check_username(changes["username"])
        if changes.get("display_name") is not None:
            if len(changes["display_name"]) > DISPLAY_NAME_MAX:
                raise BadRequest(f"display_name: must be at most {DISPLAY_NAME_MAX} characters")
            values["display_name"] = changes["display_name"]
        if changes.get("group") is not None:
            if changes["group"] not in self.options.settings.group_ratio:
                raise BadRequest("group: must be a group of GroupRatio")
            values["group"] = changes["group"]
        if changes.get("remark") is not None:
            if len(changes["remark"]) > 255:
                raise BadRequest("remark: must be at most 255 characters")
            values["remark"] = changes["remark"]
        new_password = changes.get("password") or ""
        if new_password:
            values["password"] = await self.passwords.hash(check_password(new_password))
            values["access_token"] = None  # a new password ends the access token with the sessions
        old_token: str | None = None
        async with self.db.transaction() as tx:
            users = UserRepository(tx)
            user = await _target(users, actor, user_id, lock=True)
            old_token = user.access_token
            if "username" in values and await users.username_taken(values["username"], except_id=user.id):
                raise Conflict("username is already taken")
            if values:
                try:
                    await users.update_fields(user.id, **values)
                except IntegrityError:
                    raise Conflict("username is already taken") from None
                for name, value in values.items():
                    setattr(user, name, value)
            view = (await _views(tx, [user]))[0]
        view = (await self.with_live_quota([view]))[0]
        if new_password:
            await self._revoke(user_id, token_digest=old_token)
        elif values:
            await self.users.invalidate(user_id)
        return view

    async def delete_user(self, actor: Principal, user_id: int) -> None:
        async with self.db.transaction() as tx:
            target = await _target(UserRepository(tx), actor, user_id)
            if target.role == Role.ROOT:
                raise Forbidden("root cannot be deleted")
            await UserRepository(tx).update_fields(user_id, deleted_at=self.clock.now_s(), access_token=None)
            await self._manage_log(LogRepository(tx), actor, target,
                                   f"admin {actor.user.username} deleted user {target.username}")
        await self._revoke(user_id)

    async def _manage_log(self, logs: LogRepository, actor: Principal, target: User, content: str
                          ) -> None:
        await logs.add(type=LogType.MANAGE, user_id=target.id, username=target.username, content=content,
                       created_at=self.clock.now_s(), other=admin_info(actor))

    async def manage(self, actor: Principal, user_id: int, action: str, value: int | None,
                     mode: str | None) -> ManageResult:
        if action not in MANAGE_ACTIONS:
            raise BadRequest(f"action: unknown action {action!r}")
        if action == "add_quota":
            return await self._change_quota(actor, user_id, value, mode)
        revoke = False
        async with self.db.transaction() as tx:
            users = UserRepository(tx)
            user = await _target(users, actor, user_id, lock=True)
            if action in ("disable", "delete", "demote") and user.role == Role.ROOT:
                raise Forbidden(f"root cannot be {action}d" if action != "demote"
                                else "root cannot be demoted")
            if action == "disable":
                await users.update_fields(user.id, status=UserStatus.DISABLED)
                revoke = True
            elif action == "enable":
                await users.update_fields(user.id, status=UserStatus.ENABLED)
            elif action == "delete":
                await users.update_fields(user.id, deleted_at=self.clock.now_s(), access_token=None)
                revoke = True
            elif action == "promote":
                if actor.role != Role.ROOT:
                    raise Forbidden("only root can promote users")
                if user.role >= Role.ADMIN:
                    raise Conflict("the user is already an admin")
                await users.update_fields(user.id, role=Role.ADMIN)
            else:  # demote
                if user.role <= Role.COMMON:
                    raise Conflict("the user is already a common user")
                await users.update_fields(user.id, role=Role.COMMON)
                revoke = True
            await self._manage_log(LogRepository(tx), actor, user, f"admin {actor.user.username} "
                                   f"{MANAGE_TEXT[action]} user {user.username}")
            after = await users.get(user.id, include_deleted=True)
            assert after is not None
            reply = ManageResult.of(after, await self._live_quota(after.id, after.quota))
        if revoke:
            await self._revoke(user_id)
        else:
            await self.users.invalidate(user_id)
        return reply

    async def _change_quota(self, actor: Principal, user_id: int, value: int | None, mode: str | None
                            ) -> ManageResult:
        """One atomic step on the live balance through the quota engine; the manage log travels with it."""
        if mode not in QUOTA_MODES:
            raise BadRequest("mode: must be add, subtract or override")
        if value is None:
            raise BadRequest("value: is required")
        if mode == "override" and value < 0:
            raise BadRequest("value: must be at least 0")
        if mode != "override" and value <= 0:
            raise BadRequest("value: must be greater than 0")
        async with self.db.transaction() as tx:
            user = await _target(UserRepository(tx), actor, user_id)
        content = f"admin {actor.user.username} quota {mode} {value}: balance {{before}} -> {{after}}"
        log = LogEntry(type=LogType.MANAGE, username=user.username, quota=value, other=admin_info(actor),
                       content=content, created_at=self.clock.now_s()).to_log()
        ref = f"manage:{secrets.token_hex(12)}"
        try:
            if mode == "subtract":
                adjusted = await self.quota.debit("user", user.id, value, ref=ref, log=log)
            else:
                adjusted = await self._raise_quota(actor, user.id, mode, value, ref, log)
        except SubtractTooLarge:
            raise Conflict("cannot subtract more than the current balance") from None
        except BalanceOutOfRange:
            raise Conflict(OUT_OF_RANGE) from None
        except BalanceUnknown:
            raise NotFound("user not found") from None
        return ManageResult.of(user, adjusted.after)

    async def _raise_quota(self, actor: Principal, user_id: int, mode: str, value: int, ref: str,
                           log: dict[str, Any]) -> Adjustment:
        """`add` or `override`, under the user's row lock — the lock every credit decision takes
        (server/credits.py) — leaving room for the credits already decided for the user and not yet
        applied, so that none of them fails for an admin's edit made in between. The account is loaded
        before the lock is taken (a load under it could wait for the quota sync, which waits for the row)."""
        for _ in range(LOAD_ATTEMPTS):
            await self.quota.balance("user", user_id)
            try:
                async with self.db.transaction() as tx:
                    user = await _target(UserRepository(tx), actor, user_id, lock=True)
                    if mode == "add":
                        if value > await headroom(tx, self.quota, user.id, user.quota):
                            raise BalanceOutOfRange(0)
                        return await self.quota.credit("user", user.id, value, ref=ref, log=log, load=False)
                    if value + await PendingCreditRepository(tx).owed(user.id) > BALANCE_MAX:
                        raise BalanceOutOfRange(0)
                    return await self.quota.set("user", user.id, value, ref=ref, log=log, load=False)
            except NeedsLoad:  # the store lost the account meanwhile: load it again, outside the lock
                continue
        raise ServiceUnavailable("the quota store keeps losing the account's balance; try again")

    async def _live_quota(self, user_id: int, durable: int) -> int:
        """The live balance when the engine has one, else the durable one (then nothing is pending)."""
        return (await self.quota.balances("user", [user_id])).get(user_id, durable)

    async def with_live_quota(self, views: list[View]) -> list[View]:
        """Show each user's live balance (the SQL column lags it by up to one sync interval)."""
        live = await self.quota.balances("user", [v.id for v in views])
        for view in views:
            view.quota = live.get(view.id, view.quota)
        return views
