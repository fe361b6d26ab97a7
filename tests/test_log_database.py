"""`LOG_DATABASE_URL` puts the logs in a database of their own, each exactly once
(docs/MONEY.md#logs-in-a-separate-database), on two real pairs: SQLite main + MariaDB logs
(embedded) and MariaDB main + PostgreSQL logs (with Redis).

Proved here, over HTTP against the real app:
- model calls, an admin's `add_quota`, a redeemed code and an admin's manage action leave their logs in
  the log database only (the main `logs` table stays empty, the outbox drains, the recorded credit is
  gone); every route reads them there (`/api/log/`, `/stat`, `/self`, `/self/stat`, `/token`,
  `/api/data/top`), and the counts and sums agree with the balances, `used_quota` and `request_count` in
  the main database;
- a service log copied to the log database twice (a crash between the copy and the outbox delete) is
  there once;
- the second net of the sync: a ref logged by another entry at or below the cursor is skipped, one logged
  by the same entry or by one above the cursor (a batch whose main commit was lost) is charged once;
- `kill -9` of the quota sync process between the log database's commit and the main database's
  commit of a batch, then a restart: every log once, every charge once, the credit's outbox row gone,
  and the books conserve (initial + credits − balance = the consume logs); a further run changes nothing.
"""

from __future__ import annotations

import secrets
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from core.enums import LogType
from models.credits import PendingCredit
from models.db import Database
from models.log_outbox import insert_logs, outbox_row
from models.logs import Log, LogOutbox, LogRepository
from models.migrate import upgrade
from models.quota import PartitionCursor, SqlQuotaSink
from models.sync_sql import as_dict, log_values
from models.tables import User
from quota.types import Entry
from tests.conftest import _Databases, fresh_database
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user, data_of, logged_in, make_config, serve
from tests.services import REDIS_URL, create_database, drop_database, redis_ping, redis_purge, unavailable
from tests.test_e2e_serve import clean_env

MOD = "omni-moderation-latest"
PRICE = 500  # points per moderation call at 0.001 USD
START = 1_000_000
ADDED = 7_000
CODE = 4_321
CALLS = 6
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Pair:
    main_url: str
    logs_url: str
    redis_url: str | None
    prefix: str


async def _log_database(kind: str) -> str:
    url = create_database(kind)
    db = Database(url, pool_size=1)
    try:
        await upgrade(db.engine, logs=True)
    finally:
        await db.dispose()
    return url


@pytest.fixture(params=["sqlite/mariadb", "mariadb+redis/postgres"])
async def pair(request: pytest.FixtureRequest, databases: _Databases) -> AsyncIterator[Pair]:
    main, _, log_kind = str(request.param).partition("/")
    kind, _, cache = main.partition("+")
    main_url = await fresh_database(databases, kind)
    try:
        if cache:
            await redis_ping()
        logs_url = await _log_database(log_kind)
    except Exception as exc:
        unavailable(f"{request.param}", exc)
        raise
    prefix = f"twtest:{secrets.token_hex(4)}:"
    try:
        yield Pair(main_url, logs_url, REDIS_URL if cache else None, prefix)
    finally:
        if cache:
            await redis_purge(prefix)
        drop_database(log_kind, logs_url)


async def all_logs(db: Database) -> list[Log]:
    async with db.transaction() as tx:
        return list((await tx.scalars(select(Log).order_by(Log.id))).all())


async def count(db: Database, model: Any) -> int:
    async with db.transaction() as tx:
        return int(await tx.scalar(select(func.count()).select_from(model)) or 0)


async def sql_user(db: Database, user_id: int) -> User:
    async with db.transaction() as tx:
        user = await tx.get(User, user_id)
    assert user is not None
    return user


async def calls(app: Running, key: str, n: int) -> None:
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
        for _ in range(n):
            reply = await client.post("/v1/moderations", json={"input": "hello"},
                                      headers={"Authorization": key})
            assert reply.status_code == 200, reply.text


async def priced_channel(app: Running, fake: FakeOpenAI) -> None:
    await seed_channel(app.state, type=1, base_url=fake.url, models=MOD)
    await app.state.options.put("ModelPrice", f'{{"{MOD}": 0.001}}')


async def test_calls_credits_and_admin_changes_log_only_in_the_log_database(
        pair: Pair, tmp_path: Path, openai_fake: FakeOpenAI) -> None:
    config = make_config(pair.main_url, tmp_path, pair.redis_url, pair.prefix, log_database_url=pair.logs_url)
    async with serve(config) as app:
        state = app.state
        assert state.log_db is not state.db and "log-outbox" in state.tasks.names
        await add_user(state, "root", role=100)
        uid = await add_user(state, "alice", quota=START)
        key_id, key = await seed_key(state, uid, unlimited=True)
        await priced_channel(app, openai_fake)
        await calls(app, key, CALLS)
        root, alice = await logged_in(app, "root"), await logged_in(app, "alice")
        data_of(await root.post("/api/user/manage", json={"id": uid, "action": "add_quota", "mode": "add",
                                                          "value": ADDED}))
        data_of(await root.post("/api/user/manage", json={"id": uid, "action": "promote"}))
        [code] = data_of(await root.post("/api/redemption/", json={"name": "c", "quota": CODE, "count": 1}))
        assert data_of(await alice.post("/api/user/topup", json={"key": code})) == CODE
        await state.quota_sync.drain()
        assert state.log_outbox is not None
        await state.log_outbox.drain()

        assert await count(state.db, Log) == 0  # nothing in the main database's logs table
        assert await count(state.db, LogOutbox) == 0 and await count(state.db, PendingCredit) == 0
        logs = await all_logs(state.log_db)
        mine = [x for x in logs if x.user_id == uid]
        consume = [x for x in mine if x.type == LogType.CONSUME]
        assert len(consume) == CALLS and {x.quota for x in consume} == {PRICE}
        assert [x.quota for x in mine if x.type == LogType.TOPUP] == [CODE]  # the redemption, once
        manage = sorted((x.quota, x.content) for x in mine if x.type == LogType.MANAGE)
        assert [q for q, _ in manage] == [0, ADDED] and "promoted" in manage[0][1]
        refs = [x.ref for x in logs]
        assert None not in refs and len(set(refs)) == len(refs)

        spent = CALLS * PRICE
        user = await sql_user(state.db, uid)
        assert user.quota == START + ADDED + CODE - spent
        assert (user.used_quota, user.request_count) == (spent, CALLS)
        assert await state.quota.balance("user", uid) == user.quota

        page = data_of(await root.get("/api/log/", params={"type": LogType.CONSUME}))
        assert page["total"] == CALLS and {r["quota"] for r in page["items"]} == {PRICE}
        assert data_of(await root.get("/api/log/", params={"username": "alice"}))["total"] == len(mine)
        assert data_of(await root.get("/api/log/stat", params={"type": LogType.CONSUME}))["quota"] == spent
        assert data_of(await alice.get("/api/log/self"))["total"] == len(mine)
        assert data_of(await alice.get("/api/log/self/stat"))["quota"] == spent
        search = data_of(await root.get("/api/log/search", params={"keyword": "alice"}))
        assert search["total"] == len(mine)
        top = data_of(await root.get("/api/data/top"))  # the dashboard sums the log database's rows
        assert [(u["user_id"], u["calls"], u["quota"]) for u in top["users"]] == [(uid, CALLS, spent)]
        assert [(k["token_id"], k["calls"]) for k in top["keys"]] == [(key_id, CALLS)]
        assert [(c["calls"], c["errors"], c["quota"]) for c in top["channels"]] == [(CALLS, 0, spent)]
        client = app.client()
        bearer = {"Authorization": f"Bearer {key}"}
        token_rows = data_of(await client.get("/api/log/token", headers=bearer))
        assert len(token_rows) == CALLS and {r["token_id"] for r in token_rows} == {key_id}


async def test_a_service_log_copied_twice_is_in_the_log_database_once(pair: Pair, tmp_path: Path) -> None:
    config = make_config(pair.main_url, tmp_path, pair.redis_url, pair.prefix, log_database_url=pair.logs_url,
                         quota_sync_in_server=pair.redis_url is None)
    async with serve(config) as app:
        state = app.state
        assert state.log_outbox is not None  # (its task may move the row meanwhile: copies are skipped)
        async with state.db.transaction() as tx:  # what a service writes with its change
            await LogRepository(tx).add(type=LogType.SYSTEM, user_id=1, username="root", content="once",
                                        created_at=state.clock.now_s())
            item = await tx.scalar(select(LogOutbox).order_by(LogOutbox.id.desc()).limit(1))
        assert item is not None and item.ref.startswith("log:")
        async with state.log_db.transaction() as tx:  # copied, then the process "died" before the delete
            await insert_logs(tx, [outbox_row(item)])
        async with state.log_db.transaction() as tx:  # a second copy is skipped
            await insert_logs(tx, [outbox_row(item)])
        await state.log_outbox.drain()
        assert await count(state.db, LogOutbox) == 0
        logs = [x for x in await all_logs(state.log_db) if x.content == "once"]
        assert len(logs) == 1 and logs[0].ref == item.ref and logs[0].type == LogType.SYSTEM


def run_sync(tmp_path: Path, pair: Pair, **extra: str) -> subprocess.CompletedProcess[bytes]:
    """`python -m scripts.quota_sync --once` against the pair (the standalone sync process)."""
    env = clean_env(DATABASE_URL=pair.main_url, LOG_DATABASE_URL=pair.logs_url, REDIS_URL=REDIS_URL,
                    REDIS_KEY_PREFIX=pair.prefix, SECRET_KEY=secrets.token_hex(32),
                    DATA_DIR=str(tmp_path / "sync"), PYTHONPATH=str(ROOT), **extra)
    return subprocess.run([sys.executable, "-m", "scripts.quota_sync", "--once"], cwd=tmp_path, env=env,
                          capture_output=True, timeout=120, check=False)


async def cursor(db: Database) -> str:
    async with db.transaction() as tx:
        rows = await tx.scalars(select(PartitionCursor.last_id).order_by(PartitionCursor.partition))
        return ",".join(rows.all())  # every partition's


# With Redis only: in embedded mode the unsynced usage lives in the process, and a kill -9 loses it.
@pytest.mark.parametrize("pair", ["mariadb+redis/postgres"], indirect=True)
async def test_kill_9_between_the_log_commit_and_the_main_commit_loses_and_doubles_nothing(
        pair: Pair, tmp_path: Path, openai_fake: FakeOpenAI) -> None:
    config = make_config(pair.main_url, tmp_path, pair.redis_url, pair.prefix, log_database_url=pair.logs_url,
                         quota_sync_in_server=False)
    async with serve(config) as app:
        state = app.state
        await add_user(state, "root", role=100)
        uid = await add_user(state, "carl", quota=START)
        _, key = await seed_key(state, uid, unlimited=True)
        await priced_channel(app, openai_fake)
        await calls(app, key, CALLS)
        root, carl = await logged_in(app, "root"), await logged_in(app, "carl")
        [code] = data_of(await root.post("/api/redemption/", json={"name": "c", "quota": CODE, "count": 1}))
        assert data_of(await carl.post("/api/user/topup", json={"key": code})) == CODE
        before = await cursor(state.db)

        died = run_sync(tmp_path, pair, TOLLWAY_TEST_FAULTS="1", TEST_KILL_AFTER_LOG_COMMIT="true")
        assert died.returncode == -signal.SIGKILL, died.stderr.decode(errors="replace")
        logged = [x for x in await all_logs(state.log_db) if x.user_id == uid]
        assert len(logged) == CALLS + 1  # the batch's logs are committed …
        assert await cursor(state.db) == before  # … its charges and cursor are not
        assert (await sql_user(state.db, uid)).quota == START
        assert await count(state.db, PendingCredit) == 1

        for _ in range(2):  # the restarted sync, then one more run that finds nothing left
            done = run_sync(tmp_path, pair)
            assert done.returncode == 0, done.stderr.decode(errors="replace")
            logs = [x for x in await all_logs(state.log_db) if x.user_id == uid]
            consume = [x for x in logs if x.type == LogType.CONSUME]
            assert len(consume) == CALLS and [x.quota for x in logs if x.type == LogType.TOPUP] == [CODE]
            assert len({x.ref for x in logs}) == len(logs)
            user = await sql_user(state.db, uid)
            spent = sum(x.quota for x in consume)
            assert START + CODE - user.quota == spent  # initial + credits − balance = Σ consume logs
            assert (user.used_quota, user.request_count) == (spent, CALLS)
            assert await count(state.db, PendingCredit) == 0 and await count(state.db, Log) == 0
            assert await state.quota.balance("user", uid) == user.quota


async def test_the_second_net_skips_a_repeated_ref_but_applies_a_batch_whose_main_commit_was_lost(
        pair: Pair, tmp_path: Path) -> None:
    """The sink fed by hand: a ref logged by another entry at or below the cursor is a repetition (skipped,
    not charged); a ref logged by the same entry, or by one above the cursor, comes from a batch whose main
    commit never happened (charged, its log kept once)."""
    config = make_config(pair.main_url, tmp_path, pair.redis_url, pair.prefix, log_database_url=pair.logs_url,
                         quota_sync_in_server=False)
    async with serve(config) as app:
        state = app.state
        uid = await add_user(state, "dora", quota=START)
        sink = SqlQuotaSink(state.db, state.clock.now, logs=state.log_db)

        def use(entry_id: str, ref: str, amount: int) -> Entry:
            return Entry(id=entry_id, kind="use", user_id=uid, key_id=0, key_limited=False, channel_id=0,
                         amount=amount, ref=ref, log={"type": LogType.CONSUME, "username": "dora"})

        async def current() -> bool:
            return True

        async def apply(*entries: Entry) -> None:
            async with state.db.transaction() as tx:
                epoch = str(await tx.scalar(select(PartitionCursor.epoch)
                                            .where(PartitionCursor.partition == 0)))
            assert await sink.apply(0, list(entries), epoch, current) is not None

        async def logged_before(entry: Entry, entry_id: str) -> None:  # a batch that died between commits
            async with state.log_db.transaction() as tx:
                await insert_logs(tx, [as_dict(log_values(entry, 0)) | {"entry_id": entry_id}])

        await apply(use("100-0", "h1", 10))
        await apply(use("200-0", "h1", 10), use("200-1", "h2", 20), use("200-2", "h2", 20))
        replayed = use("300-0", "h3", 30)
        await logged_before(replayed, "300-0")
        await apply(replayed)
        orphan = use("400-0", "h4", 40)
        await logged_before(orphan, "900-0")  # written under a store incarnation that was lost since
        await apply(orphan)

        user = await sql_user(state.db, uid)
        assert (user.quota, user.request_count) == (START - 10 - 20 - 30 - 40, 4)
        logs = sorted((x.ref, x.quota) for x in await all_logs(state.log_db) if x.user_id == uid)
        assert logs == [("h1", 10), ("h2", 20), ("h3", 30), ("h4", 40)]
