"""The sink's batched log rows (models/sync_sql.py) on SQLite, MariaDB and PostgreSQL: texts of every kind
arrive byte for byte, a batch partly applied before applies only the rest, and a value too long for its
column fails the batch as a plain INSERT does (nothing applied, the cursor unmoved)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import select

from core.enums import LogType
from models.db import Database
from models.logs import Log
from models.quota import PartitionCursor, SqlQuotaSink
from models.quota_data import QuotaData
from models.sync_sql import COLUMNS, as_dict, log_values
from quota.types import Entry
from tests.conftest import _Databases, fresh_database
from tests.quota.env import QuotaEnv, build

TEXTS = [
    "it's a \"quoted\" 'text'",
    "back\\slash \\' \\\" \\\\ \\n %s %(x)s {} {0}",
    "tab\tnew\nline\rret \x01\x1a\x7f",
    "é ñ 中文 \u2028\u2029 \ufeff",
    "4-byte: 😀🎉𝄞",
    "x" * 20_000,
    "",
]


def entry(n: int, uid: int, ref: str, amount: int, **log: Any) -> Entry:
    return Entry(id=f"1700000000000-{n}", kind="use", user_id=uid, key_id=0, key_limited=False, channel_id=0,
                 amount=amount, ref=ref, log={"type": LogType.CONSUME, "created_at": 1_700_000_000,
                                              "model_name": "m", **log})


async def current() -> bool:
    return True


async def epoch_of(db: Database) -> str:
    async with db.transaction() as tx:
        return str(await tx.scalar(select(PartitionCursor.epoch).where(PartitionCursor.partition == 0)))


async def cursor_of(db: Database) -> str:
    async with db.transaction() as tx:
        return str(await tx.scalar(select(PartitionCursor.last_id).where(PartitionCursor.partition == 0)))


async def stored(db: Database, uid: int) -> list[list[Any]]:
    async with db.transaction() as tx:
        logs = (await tx.scalars(select(Log).where(Log.user_id == uid).order_by(Log.id))).all()
    return [[getattr(row, c) for c in COLUMNS] for row in logs]


@pytest.fixture
async def env(db_url: str) -> AsyncIterator[QuotaEnv]:
    quota_env = build(db_url, None, "")
    yield quota_env
    await quota_env.close()


async def test_log_texts_are_stored_byte_for_byte(env: QuotaEnv) -> None:
    uid = await env.add_user(10**12)
    other = {"note": TEXTS[0] + TEXTS[1] + TEXTS[3] + TEXTS[4], "n": [1, 2.5, None, True], "big": 2**53}
    entries = [entry(n, uid, f"ref-{n}", 10 + n, content=text, username=text[:64], token_name=text[:64],
                     request_id=text[:128], group=text[:64], ip=text[:64], other=other,
                     prompt_tokens=2**40, completion_tokens=n, use_time=n, is_stream=n % 2 == 0)
               for n, text in enumerate(TEXTS)]
    entries.append(entry(len(TEXTS), uid, "ref-bare", 5))  # only the defaults: no content, no other
    sink = SqlQuotaSink(env.db, lambda: 1_700_000_123)
    assert await sink.apply(0, entries, await epoch_of(env.db), current) == entries[-1].id
    expected = [list(as_dict(log_values(e, 1_700_000_123)).values()) for e in entries]
    assert await stored(env.db, uid) == expected
    assert expected[0][COLUMNS.index("other")] == json.dumps(other, separators=(",", ":"), ensure_ascii=False)
    assert expected[-1][COLUMNS.index("other")] == ""
    user = await env.user_row(uid)
    assert (user.used_quota, user.request_count) == (sum(e.amount for e in entries), len(entries))


async def test_a_batch_partly_applied_before_applies_only_the_rest(env: QuotaEnv) -> None:
    uid = await env.add_user(10_000)
    sink = SqlQuotaSink(env.db, lambda: 0)
    epoch = await epoch_of(env.db)
    first = [entry(1, uid, "h1", 10), entry(2, uid, "h2", 20)]
    assert await sink.apply(0, first, epoch, current) == first[-1].id
    # replayed with what followed: h1, h2 at or below the cursor; h3 above it but logged already (a hold
    # settled twice across a loss of the store); h4 and h5 new
    again = [*first, entry(3, uid, "h3", 30), entry(4, uid, "h4", 40), entry(5, uid, "h5", 50)]
    assert await sink.apply(0, [entry(0, uid, "h3", 30)], epoch, current) == first[-1].id  # below: nothing
    async with env.db.transaction() as tx:
        tx.add(Log(user_id=uid, type=LogType.CONSUME, quota=30, ref="h3", entry_id="1600000000000-0"))
    assert await sink.apply(0, again, epoch, current) == again[-1].id
    user = await env.user_row(uid)
    assert (user.quota, user.used_quota, user.request_count) == (10_000 - 10 - 20 - 40 - 50, 120, 4)
    refs = [row[COLUMNS.index("ref")] for row in await stored(env.db, uid)]
    assert sorted(refs) == ["h1", "h2", "h3", "h4", "h5"]
    assert await cursor_of(env.db) == again[-1].id
    async with env.db.transaction() as tx:
        counted = (await tx.scalars(select(QuotaData.count).where(QuotaData.user_id == uid))).all()
    assert list(counted) == [4]  # h3's log was not the sync's: only the four it applied are counted


@pytest.mark.parametrize("kind", ["mariadb", "postgres"])  # SQLite does not enforce a column's length
async def test_a_value_too_long_for_its_column_fails_the_batch(kind: str, databases: _Databases) -> None:
    env = build(await fresh_database(databases, kind), None, "")
    try:
        await too_long_fails(env)
    finally:
        await env.close()


async def too_long_fails(env: QuotaEnv) -> None:
    uid = await env.add_user(10_000)
    sink = SqlQuotaSink(env.db, lambda: 0)
    batch = [entry(1, uid, "ok", 10), entry(2, uid, "long", 20, username="u" * 65)]
    with pytest.raises(Exception, match=r"(?i)too long"):
        await sink.apply(0, batch, await epoch_of(env.db), current)
    assert await stored(env.db, uid) == []
    assert (await env.user_row(uid)).used_quota == 0
    assert await cursor_of(env.db) == "0-0"
