"""Queries on `users`. The balance (`quota`) is written only at creation and by the quota sync
(models/quota.py): every change of a live balance goes through the quota engine."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import ColumnElement, case, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from core.identity import Role
from core.money import BALANCE_MAX
from models import query
from models.tables import User, email_key, username_key


class UserRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    def _exact(self, column: Any, value: str) -> ColumnElement[bool]:
        """`column = value`, case-sensitive on every database (`models.query.exact`)."""
        return query.exact(self.s, column, value)

    async def get(self, user_id: int, *, include_deleted: bool = False) -> User | None:
        stmt = select(User).where(User.id == user_id)
        if not include_deleted:
            stmt = stmt.where(User.deleted_at.is_(None))
        return await self.s.scalar(stmt)

    async def get_for_update(self, user_id: int) -> User | None:
        return await self.s.scalar(
            select(User).where(User.id == user_id, User.deleted_at.is_(None)).with_for_update()
        )

    async def by_login(self, name: str) -> User | None:
        """A live user whose username is `name`, else whose e-mail is `name` (case-insensitive)."""
        user = await self.s.scalar(
            select(User).where(User.username_key == username_key(name), User.deleted_at.is_(None))
        )
        if user is None and name:
            user = await self.s.scalar(
                select(User).where(User.email_key == email_key(name), User.deleted_at.is_(None))
                .order_by(User.id).limit(1)
            )
        return user

    async def id_by_token_digest(self, digest: str) -> int | None:
        return await self.s.scalar(
            select(User.id).where(User.access_token == digest, User.deleted_at.is_(None))
        )

    async def usernames(self, user_ids: Iterable[int]) -> dict[int, str]:
        """Id → username of the users among `user_ids` (deleted ones too: a name once seen stays shown)."""
        ids = sorted(set(user_ids) - {0})
        if not ids:
            return {}
        rows = await self.s.execute(select(User.id, User.username).where(User.id.in_(ids)))
        return {int(i): str(n) for i, n in rows.all()}

    async def username_taken(self, username: str, *, except_id: int | None = None) -> bool:
        stmt = select(User.id).where(User.username_key == username_key(username))
        if except_id is not None:
            stmt = stmt.where(User.id != except_id)
        return await self.s.scalar(stmt.limit(1)) is not None

    async def email_taken(self, email: str) -> bool:
        stmt = select(User.id).where(User.email_key == email_key(email)).limit(1)
        return await self.s.scalar(stmt) is not None

    async def by_email(self, email: str) -> User | None:
        """The live user whose e-mail is `email` (case-insensitive), if any."""
        return await self.s.scalar(
            select(User).where(User.email_key == email_key(email), User.deleted_at.is_(None)))

    async def aff_code_taken(self, code: str) -> bool:
        return await self.s.scalar(select(User.id).where(User.aff_code == code).limit(1)) is not None

    async def by_aff_code(self, code: str) -> User | None:
        return await self.s.scalar(select(User).where(User.aff_code == code, User.deleted_at.is_(None)))

    async def root_exists(self) -> bool:
        return await self.s.scalar(select(User.id).where(User.role == Role.ROOT).limit(1)) is not None

    async def add(self, user: User) -> int:
        self.s.add(user)
        await self.s.flush()
        return user.id

    async def page(self, *, offset: int, limit: int, include_deleted: bool, keyword: str = "",
                   group: str = "") -> tuple[Sequence[User], int]:
        conds: list[ColumnElement[bool]] = []
        if not include_deleted:
            conds.append(User.deleted_at.is_(None))
        if group:
            conds.append(self._exact(User.group, group))
        if keyword:
            columns = (User.username, User.email, User.display_name)
            text_match = or_(*(query.contains(col, keyword) for col in columns))
            conds.append(or_(User.id == int(keyword), text_match) if query.is_id(keyword) else text_match)
        return await query.page(self.s, User, conds, order_by=[User.id.desc()], offset=offset, limit=limit)

    async def update_fields(self, user_id: int, **values: Any) -> None:
        if "username" in values:
            values["username_key"] = username_key(values["username"])
        if "email" in values:
            values["email_key"] = email_key(values["email"])
        await self.s.execute(update(User).where(User.id == user_id).values(**values))

    async def take_aff_quota(self, user_id: int, amount: int) -> bool:
        """Take `amount` from a live user's invitation rewards if they hold that much (one conditional
        update); True when it was taken."""
        result = await self.s.execute(
            update(User).where(User.id == user_id, User.deleted_at.is_(None), User.aff_quota >= amount)
            .values(aff_quota=User.aff_quota - amount).execution_options(synchronize_session=False))
        return int(result.rowcount) == 1  # type: ignore[attr-defined]

    async def lock_balance(self, user_id: int) -> int | None:
        """Lock the user's row (SELECT … FOR UPDATE, deleted or not) and read its durable balance; None
        when there is no such row. Every decision to raise the user's balance takes this lock first, so
        they are made one at a time across workers and nodes (SQLite: its transactions already are)."""
        stmt = select(User.quota).where(User.id == user_id).with_for_update()
        quota: int | None = await self.s.scalar(stmt)
        return quota

    async def reward_inviter(self, user_id: int, reward: int) -> None:
        """One more invitee, and `reward` (≥ 0) added to the invitation rewards and their history, each
        held to BALANCE_MAX: the rewards are moved into the balance later, which must stay within it."""
        def capped(column: Any) -> Any:
            return case((column > BALANCE_MAX - reward, BALANCE_MAX), else_=column + reward)

        await self.s.execute(update(User).where(User.id == user_id).values(
            aff_count=User.aff_count + 1, aff_quota=capped(User.aff_quota),
            aff_history_quota=capped(User.aff_history_quota)))
