"""The `logs` table (docs/api/logs.md#logs): consume, top-up, manage, system, error and refund records.

Rows are written by the quota sync (consume, top-up and manage logs arrive with the usage they describe),
by services for system events (`LogRepository`) and, for failed model calls, by each worker's error-log
buffer (server/logs/error_logs.py). `ref` is internal: the hold id or idempotency key of the entry that
produced the row (a fresh random key for a service's log or an error log), unique, so no entry can ever
produce two rows; `entry_id` is the quota stream entry that carried it. Neither is ever shown.

With `LOG_DATABASE_URL` the table lives in a database of its own
(docs/MONEY.md#logs-in-a-separate-database): the main database's sessions then carry `LOGS_ELSEWHERE` in their
`info`, and `LogRepository` writes a service's log into `log_outbox`, in the caller's transaction, for
`models/log_outbox.py` to move.

`LogQuery` reads them (E.2): exact filters (case-sensitive on every database) and a model name's part (a
case-insensitive literal substring), keyword search (exact names or a case-insensitive literal substring
of `content`), the `{quota, rpm, tpm}` statistics and the batched delete; `LogTotals` the dashboard's
sums over a window (top spenders, each channel's calls and errors). Log queries join no other table
(`LOG_DATABASE_URL` may put logs in a database of their own).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Boolean,
    ColumnElement,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    case,
    delete,
    func,
    or_,
    select,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from core.enums import LogType
from models import query
from models.base import NAMING, Base, Id, never_reuse_ids

LOGS_ELSEWHERE = "logs_elsewhere"  # a session-info flag: this session's database keeps no logs


class Log(Base):
    __tablename__ = "logs"
    __table_args__ = (
        Index("ix_logs_user_id_created_at", "user_id", "created_at"),
        Index("ix_logs_created_at", "created_at"),
        never_reuse_ids(),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[int] = mapped_column(BigInteger, default=0)
    type: Mapped[int] = mapped_column(Integer, default=0, index=True)
    content: Mapped[str] = mapped_column(Text, default="")
    username: Mapped[str] = mapped_column(String(64), default="", index=True)
    token_name: Mapped[str] = mapped_column(String(64), default="", index=True)
    model_name: Mapped[str] = mapped_column(String(255), default="", index=True)
    quota: Mapped[int] = mapped_column(BigInteger, default=0)
    prompt_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    completion_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    use_time: Mapped[int] = mapped_column(Integer, default=0)
    is_stream: Mapped[bool] = mapped_column(Boolean, default=False)
    channel: Mapped[int] = mapped_column(BigInteger, default=0, index=True)
    token_id: Mapped[int] = mapped_column(BigInteger, default=0, index=True)
    group: Mapped[str] = mapped_column(String(64), default="")
    ip: Mapped[str] = mapped_column(String(64), default="")
    request_id: Mapped[str] = mapped_column(String(128), default="", index=True)
    other: Mapped[str] = mapped_column(Text, default="")
    ref: Mapped[str | None] = mapped_column(String(64), nullable=True, unique=True)
    entry_id: Mapped[str | None] = mapped_column(String(40), nullable=True)


def log_metadata() -> MetaData:
    """A schema holding the `logs` table alone: what a separate log database contains."""
    metadata = MetaData(naming_convention=NAMING)
    cast(Table, Log.__table__).to_metadata(metadata)
    return metadata


class LogOutbox(Base):
    """Service logs waiting to be moved to the separate log database (only used with one): each row is
    one log row as JSON, written in the transaction of the change it records, with the unique `ref` the
    log row will carry there."""

    __tablename__ = "log_outbox"
    __table_args__ = never_reuse_ids()

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    ref: Mapped[str] = mapped_column(String(64), unique=True)
    row: Mapped[str] = mapped_column(Text)
    created_at: Mapped[int] = mapped_column(BigInteger)


class LogRepository:
    """Writes of log rows that are not balance changes (manage and system events).

    Balance-changing logs (consume, top-up, manage add_quota) travel with their change through the quota
    engine and are inserted by the sync, never here. In a session of a main database whose logs live
    elsewhere, the row goes to `log_outbox` (same transaction) under a fresh `ref`."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def add(self, *, type: int, user_id: int, username: str, content: str, created_at: int,
                  other: dict[str, Any] | None = None, quota: int = 0, channel: int = 0) -> None:
        row: dict[str, Any] = dict(
            type=type, user_id=user_id, username=username, content=content, created_at=created_at,
            quota=quota, other=json.dumps(other, separators=(",", ":"), ensure_ascii=False) if other else "",
            token_name="", model_name="", prompt_tokens=0, completion_tokens=0, use_time=0, is_stream=False,
            channel=channel, token_id=0, group="", ip="", request_id="",
        )
        if self.s.info.get(LOGS_ELSEWHERE):
            ref = f"log:{uuid.uuid4().hex}"
            text = json.dumps(row | {"ref": ref}, separators=(",", ":"), ensure_ascii=False)
            self.s.add(LogOutbox(ref=ref, created_at=created_at, row=text))
        else:
            self.s.add(Log(**row))
        await self.s.flush()


@dataclass(frozen=True, slots=True)
class LogFilter:
    """The filters of `GET /api/log/` (E.2); a zero or empty value does not filter.

    Text filters are exact but `model_name_part`, a literal part of the model name ignoring case.
    `user_id` restricts to one user's rows (the `/self` routes); `start` and `end` are inclusive."""

    user_id: int | None = None
    type: int = LogType.UNKNOWN  # every type
    start: int = 0
    end: int = 0
    username: str = ""
    token_name: str = ""
    model_name: str = ""
    channel: int = 0
    group: str = ""
    request_id: str = ""
    model_name_part: str = ""


@dataclass(frozen=True, slots=True)
class LogStat:
    quota: int
    rpm: int
    tpm: int


class LogQuery:
    """Reads (and the batched delete) of log rows; newest first everywhere (`created_at`, then `id`)."""

    NAME_COLUMNS = ("username", "token_name", "model_name")

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    def _exact(self, column: Any, value: str) -> ColumnElement[bool]:
        """`column = value`, case-sensitive on every database (`models.query.exact`)."""
        return query.exact(self.s, column, value)

    def _contains(self, column: Any, keyword: str) -> ColumnElement[bool]:
        """`keyword` is a substring of `column`, ignoring case; both sides are lowered by the database
        itself, so they are folded the same way (SQLite folds ASCII only)."""
        return query.contains(column, keyword)

    def conditions(self, f: LogFilter, *, window: bool = True) -> list[ColumnElement[bool]]:
        conds: list[ColumnElement[bool]] = []
        if f.user_id is not None:
            conds.append(Log.user_id == f.user_id)
        if f.type:
            conds.append(Log.type == f.type)
        if window and f.start:
            conds.append(Log.created_at >= f.start)
        if window and f.end:
            conds.append(Log.created_at <= f.end)
        for name in ("username", "token_name", "model_name", "group", "request_id"):
            value = getattr(f, name)
            if value:
                conds.append(self._exact(getattr(Log, name), value))
        if f.model_name_part:
            conds.append(self._contains(Log.model_name, f.model_name_part))
        if f.channel:
            conds.append(Log.channel == f.channel)
        return conds

    def keyword(self, keyword: str, *, user_id: int | None = None,
                names: Sequence[str] = NAME_COLUMNS) -> list[ColumnElement[bool]]:
        """Rows (of `user_id`, when given) where one of `names` equals `keyword` or `content` contains it;
        an empty keyword matches every row."""
        conds: list[ColumnElement[bool]] = []
        if user_id is not None:
            conds.append(Log.user_id == user_id)
        if keyword:
            conds.append(or_(*(self._exact(getattr(Log, n), keyword) for n in names),
                             self._contains(Log.content, keyword)))
        return conds

    async def page(self, conds: list[ColumnElement[bool]], *, offset: int, limit: int
                   ) -> tuple[Sequence[Log], int]:
        return await query.page(self.s, Log, conds, order_by=[Log.created_at.desc(), Log.id.desc()],
                                offset=offset, limit=limit)

    async def stat(self, f: LogFilter, since: int) -> LogStat:
        """`quota`: the sum over matching consume rows in the filter's window; `rpm` and `tpm`: the count
        and the tokens of matching consume rows created at `since` or later (the window ignored)."""
        consume = replace(f, type=LogType.CONSUME)
        quota = await self.s.scalar(
            select(func.coalesce(func.sum(Log.quota), 0)).where(*self.conditions(consume)))
        recent = (await self.s.execute(
            select(func.count(), func.coalesce(func.sum(Log.prompt_tokens + Log.completion_tokens), 0))
            .where(*self.conditions(consume, window=False), Log.created_at >= since)
        )).one()
        return LogStat(quota=int(quota or 0), rpm=int(recent[0] or 0), tpm=int(recent[1] or 0))

    async def delete_batch(self, before: int, limit: int) -> tuple[int, int]:
        """Delete up to `limit` rows created before `before`; returns (rows found, rows deleted)."""
        ids = (await self.s.scalars(select(Log.id).where(Log.created_at < before).limit(limit))).all()
        if not ids:
            return 0, 0
        result = await self.s.execute(
            delete(Log).where(Log.id.in_(ids), Log.created_at < before)
            .execution_options(synchronize_session=False))
        return len(ids), int(result.rowcount)  # type: ignore[attr-defined]



# ---- the dashboard's sums -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Spend:
    """The consume logs of one user, API key or model in a window; the fields that do not name the group
    are 0 or ""."""

    quota: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    user_id: int = 0
    username: str = ""
    token_id: int = 0
    token_name: str = ""
    model_name: str = ""


@dataclass(frozen=True, slots=True)
class ChannelActivity:
    """One channel's consume logs (`calls`, their `quota`) and error logs (`errors`) in a window."""

    channel: int
    calls: int
    errors: int
    quota: int


class LogTotals:
    """Sums over the rows created in [start, end] (inclusive), one GROUP BY each.

    The window is the only condition of each WHERE, so every database reads it through
    `ix_logs_created_at` (a `type = 2` beside it made SQLite read every consume log of the table through
    `ix_logs_type`); the log type is chosen inside the sums, and groups without a row of the counted types
    are dropped by HAVING. Ties are broken by the group's key. The sums' labels are no column's name, so
    ORDER BY can only mean them."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    @staticmethod
    def _window(start: int, end: int) -> list[ColumnElement[bool]]:
        return [Log.created_at >= start, Log.created_at <= end]

    @staticmethod
    def _sum_if(condition: ColumnElement[bool], value: Any) -> Any:
        """SUM(value) over the rows meeting `condition` (0 when none does)."""
        return func.coalesce(func.sum(case((condition, value), else_=0)), 0)

    async def _top(self, keys: dict[str, Any], names: dict[str, Any], start: int, end: int, limit: int
                   ) -> list[Spend]:
        """The `limit` groups of consume rows with the most quota, then the most calls. `keys`: the
        group's columns by their `Spend` field; `names`: text columns shown by their MAX (one value unless
        the user or key was renamed in the window)."""
        consume = Log.type == LogType.CONSUME
        quota = self._sum_if(consume, Log.quota).label("sum_quota")
        calls = self._sum_if(consume, 1).label("n_calls")
        stmt = (select(*(column.label(field) for field, column in keys.items()),
                       *(func.max(column).label(field) for field, column in names.items()), quota, calls,
                       self._sum_if(consume, Log.prompt_tokens).label("sum_prompt"),
                       self._sum_if(consume, Log.completion_tokens).label("sum_completion"))
                .where(*self._window(start, end))
                .group_by(*keys.values())
                .having(self._sum_if(consume, 1) > 0)
                .order_by(quota.desc(), calls.desc(), *keys.values())
                .limit(limit))
        return [Spend(quota=int(row["sum_quota"] or 0), calls=int(row["n_calls"] or 0),
                      prompt_tokens=int(row["sum_prompt"] or 0),
                      completion_tokens=int(row["sum_completion"] or 0),
                      user_id=int(row.get("user_id") or 0), username=str(row.get("username") or ""),
                      token_id=int(row.get("token_id") or 0), token_name=str(row.get("token_name") or ""),
                      model_name=str(row.get("model_name") or ""))
                for row in (await self.s.execute(stmt)).mappings()]

    async def top_users(self, start: int, end: int, limit: int) -> list[Spend]:
        return await self._top({"user_id": Log.user_id}, {"username": Log.username}, start, end, limit)

    async def top_keys(self, start: int, end: int, limit: int) -> list[Spend]:
        """Per API key (`token_id`, with its owner: a row without a key is each user's key 0)."""
        return await self._top({"user_id": Log.user_id, "token_id": Log.token_id},
                               {"username": Log.username, "token_name": Log.token_name}, start, end, limit)

    async def top_models(self, start: int, end: int, limit: int) -> list[Spend]:
        """Per model name as the caller named it, byte for byte (`GPT-4o` and `gpt-4o` are two models)."""
        return await self._top({"model_name": query.by_bytes(self.s, Log.model_name)}, {}, start, end, limit)

    async def channels(self, start: int, end: int) -> list[ChannelActivity]:
        """Every channel (id > 0) with a consume or an error log in the window: most calls first, then most
        errors, then by id. An error log counts for the last channel its call tried."""
        consume, error = Log.type == LogType.CONSUME, Log.type == LogType.ERROR
        calls = self._sum_if(consume, 1).label("n_calls")
        errors = self._sum_if(error, 1).label("n_errors")
        stmt = (select(Log.channel, calls, errors, self._sum_if(consume, Log.quota).label("sum_quota"))
                .where(*self._window(start, end))
                .group_by(Log.channel)
                .having(self._sum_if(consume | error, 1) > 0)
                .order_by(calls.desc(), errors.desc(), Log.channel))
        return [ChannelActivity(channel=int(c), calls=int(n or 0), errors=int(e or 0), quota=int(q or 0))
                for c, n, e, q in (await self.s.execute(stmt)).all()
                if c]  # channel 0: no channel was tried (not in WHERE: it would compete with the window)
