"""Credits decided in SQL reach the live balance exactly once (server/credits.py,
docs/MONEY.md#credits-decided-in-sql), on every stack.

Proved here, with the worker's own `CreditOutbox`:
- a credit recorded with its fact but never delivered (the process died in between) is applied by the
  replay, once: more replays, or replays racing the delivery, change nothing; its row goes once the
  sync has written its log row, and not before;
- a recorded credit the engine had already applied (the process died after the engine call) is not
  applied again — the engine's idempotency key absorbs it;
- a recorded credit whose log row the sync already wrote is only deleted, never handed to the engine;
- when the quota store cannot take the credit during the request, the request still succeeds (the code is
  used, the credit is durable) and the replay applies it once the store answers again; whether it fits
  under the cap is then decided on the SQL balance (a code that would pass it stays unused, 409);
- credits the engine refuses for good (the balance would pass 2^53 − 1, the user is gone), 101 of them
  ahead of a normal one: one replay pass settles each as failed — kept, with its reason — and applies the
  normal one; later passes leave them alone; each is named in one error line, with no traceback; a
  delivery that meets such a refusal settles its credit at once;
- while the store is unreachable, a pass stops at the first refusal, and the passes of one streak write
  one warning (another after `WARN_EVERY` seconds, counting the quiet passes), without a traceback;
- every worker runs the replay in the background.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from sqlalchemy import select

from backend.base import BackendUnavailable
from core.enums import CreditStatus, LogType
from models.credits import PendingCredit, PendingCreditRepository
from models.logs import Log
from models.users import UserRepository
from quota.types import BALANCE_MAX
from server.credits import WARN_EVERY, Credit, CreditOutbox
from tests.harness import Running, add_user, data_of, logged_in


@pytest.fixture
async def quiet(app: Running) -> Running:
    """The app with its background tasks stopped, so that each replay below is the only one running
    (the quota sync is drained by hand)."""
    await app.state.tasks.drain()
    return app


def credit_for(user_id: int, ref: str, amount: int = 250) -> Credit:
    return Credit(ref=ref, user_id=user_id, amount=amount,
                  log={"type": LogType.TOPUP, "username": "u", "quota": amount, "content": "test credit"})


async def recorded(app: Running, credit: Credit) -> None:
    """What a request commits before it delivers: here, the process 'dies' right after."""
    async with app.state.db.transaction() as tx:
        await app.state.credits.record(tx, credit)


async def recorded_unchecked(app: Running, credit: Credit) -> None:
    """An outbox row whose credit no longer fits when it is applied: `record` decides under the user's
    row lock and would refuse it now, but a row decided while the store could not answer (on the SQL
    balance) or written before that decision existed can still meet a refusal for good."""
    async with app.state.db.transaction() as tx:
        await PendingCreditRepository(tx).add(ref=credit.ref, user_id=credit.user_id, amount=credit.amount,
                                              log=credit.log, created_at=app.clock.now_s())


async def pending(app: Running) -> list[str]:
    async with app.state.db.transaction() as tx:
        return list((await tx.scalars(select(PendingCredit.ref))).all())


async def settle(app: Running) -> None:
    """The sync writes what the engine queued; the next replay forgets the credits now in SQL."""
    await app.state.quota_sync.drain()
    await app.state.credits.replay()


async def books(app: Running, user_id: int) -> tuple[int, int, list[int]]:
    """(live balance, SQL balance, topup log amounts) after the sync."""
    await app.state.quota_sync.drain()
    async with app.state.db.transaction() as tx:
        user = await UserRepository(tx).get(user_id)
        logs = (await tx.scalars(select(Log.quota).where(Log.user_id == user_id))).all()
    assert user is not None
    return await app.state.quota.balance("user", user_id), user.quota, list(logs)


async def test_a_credit_never_delivered_is_replayed_once(quiet: Running) -> None:
    app = quiet
    uid = await add_user(app.state, "alice", quota=1000)
    await recorded(app, credit_for(uid, "test:lost"))
    assert await app.state.credits.replay() == 0  # credited now, but not in SQL yet: kept
    assert await app.state.credits.replay() == 0
    assert await pending(app) == ["test:lost"]
    assert await app.state.quota.balance("user", uid) == 1250
    await app.state.quota_sync.drain()
    assert await app.state.credits.replay() == 1  # in SQL: forgotten
    assert await pending(app) == []
    assert await app.state.credits.replay() == 0
    assert await books(app, uid) == (1250, 1250, [250])


async def test_a_replay_racing_the_delivery_applies_once(quiet: Running) -> None:
    app = quiet
    uid = await add_user(app.state, "bob", quota=0)
    credit = credit_for(uid, "test:race", 40)
    await recorded(app, credit)
    results = await asyncio.gather(app.state.credits.deliver(credit), app.state.credits.replay(),
                                   app.state.credits.replay())
    assert results[0] is True
    await settle(app)
    assert await pending(app) == []
    assert await books(app, uid) == (40, 40, [40])


async def test_a_credit_the_engine_already_applied_is_not_applied_again(quiet: Running) -> None:
    app = quiet
    uid = await add_user(app.state, "carol", quota=10)
    credit = credit_for(uid, "test:applied", 5)
    await recorded(app, credit)
    await app.state.quota.credit("user", uid, 5, ref=credit.ref, log=credit.log)  # then the process died
    assert await app.state.credits.replay() == 0
    await settle(app)
    assert await pending(app) == []
    assert await books(app, uid) == (15, 15, [5])


class Untouchable:
    """A quota engine that must not be called."""

    async def credit(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a credit already in SQL was handed to the engine again")


async def test_a_credit_already_in_sql_is_only_forgotten(quiet: Running) -> None:
    app = quiet
    uid = await add_user(app.state, "dave", quota=0)
    credit = credit_for(uid, "test:synced", 8)
    await recorded(app, credit)
    await app.state.quota.credit("user", uid, 8, ref=credit.ref, log=credit.log)
    await app.state.quota_sync.drain()  # its log row is in SQL now
    outbox = CreditOutbox(db=app.state.db, quota=Untouchable(), clock=app.state.clock)  # type: ignore[arg-type]
    assert await outbox.replay() == 1
    assert await pending(app) == []
    assert await books(app, uid) == (8, 8, [8])


class Unreachable:
    """The quota store is down: every credit, and the check before the code is used, fails as the engine
    fails then."""

    async def credit(self, *args: Any, **kwargs: Any) -> Any:
        raise BackendUnavailable("redis is down")

    async def can_credit(self, *args: Any, **kwargs: Any) -> Any:
        raise BackendUnavailable("redis is down")

    async def ceilings(self, *args: Any, **kwargs: Any) -> Any:
        raise BackendUnavailable("redis is down")


async def test_a_store_outage_during_a_redeem_is_caught_up_by_the_replay(quiet: Running) -> None:
    app = quiet
    await add_user(app.state, "root", role=100)
    uid = await add_user(app.state, "erin", quota=1)
    root, erin = await logged_in(app, "root"), await logged_in(app, "erin")
    [key] = data_of(await root.post("/api/redemption/", json={"name": "n", "quota": 60, "count": 1}))
    outbox = app.state.credits
    engine = outbox.quota
    outbox.quota = Unreachable()  # type: ignore[assignment]
    try:
        assert data_of(await erin.post("/api/user/topup", json={"key": key})) == 60
        assert len(await pending(app)) == 1
        await outbox.replay()  # still down: kept
        assert len(await pending(app)) == 1
        assert data_of(await erin.get("/api/user/self"))["quota"] == 1  # not yet
    finally:
        outbox.quota = engine
    await outbox.replay()
    assert data_of(await erin.get("/api/user/self"))["quota"] == 61
    await settle(app)
    assert await pending(app) == []
    assert await books(app, uid) == (61, 61, [60])


async def test_with_the_store_unreachable_the_sql_balance_decides(quiet: Running) -> None:
    app = quiet
    await add_user(app.state, "root", role=100)
    await add_user(app.state, "brim", quota=BALANCE_MAX - 100)
    root, brim = await logged_in(app, "root"), await logged_in(app, "brim")
    [key] = data_of(await root.post("/api/redemption/", json={"name": "n", "quota": 500, "count": 1}))
    outbox = app.state.credits
    engine = outbox.quota
    outbox.quota = Unreachable()  # type: ignore[assignment]
    try:
        reply = await brim.post("/api/user/topup", json={"key": key})
    finally:
        outbox.quota = engine
    assert reply.status_code == 409, reply.text
    assert "largest supported amount" in reply.json()["message"]
    assert await pending(app) == []  # nothing decided: the code is still unused
    code = data_of(await root.get("/api/redemption/"))["items"][0]
    assert (code["status"], code["used_user_id"]) == (1, 0)


async def rows(app: Running) -> dict[str, PendingCredit]:
    async with app.state.db.transaction() as tx:
        return {row.ref: row for row in (await tx.scalars(select(PendingCredit))).all()}


def lines_naming(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "tollway.credits" and text in r.getMessage()]


async def test_credits_refused_for_good_are_settled_as_failed_and_never_block_the_others(
        quiet: Running, caplog: pytest.LogCaptureFixture) -> None:
    app = quiet
    caplog.set_level(logging.INFO, logger="tollway.credits")
    full = await add_user(app.state, "full", quota=BALANCE_MAX - 50)
    gone = 10**9  # no such user
    refused = [credit_for(full, f"test:full:{n}", 100) for n in range(100)]
    refused.append(credit_for(gone, "test:gone", 5))
    for credit in refused:
        await recorded_unchecked(app, credit)
    uid = await add_user(app.state, "normal", quota=10)
    await recorded(app, credit_for(uid, "test:normal", 70))  # its process died before delivering it

    await app.state.credits.replay()  # one pass
    assert await app.state.quota.balance("user", uid) == 80
    assert await app.state.quota.balance("user", full) == BALANCE_MAX - 50
    kept = await rows(app)
    assert {ref: row.status for ref, row in kept.items() if ref != "test:normal"} == {
        c.ref: CreditStatus.FAILED for c in refused}
    assert all("largest supported amount" in kept[c.ref].reason for c in refused[:100])
    assert kept["test:gone"].reason == f"user {gone} does not exist"
    assert all(row.failed_at >= row.created_at > 0 for ref, row in kept.items() if ref != "test:normal")

    await settle(app)  # the normal one is in SQL now: forgotten; the failed ones stay for an admin
    await app.state.credits.replay()
    assert set(await rows(app)) == {c.ref for c in refused}
    assert await books(app, uid) == (80, 80, [70])
    for credit in refused:
        assert len(lines_naming(caplog, credit.ref + " ")) == 1, credit.ref  # named once, in 3 passes
    assert all(r.levelno == logging.ERROR and r.exc_info is None
               for c in refused for r in lines_naming(caplog, c.ref + " "))
    assert not [r for r in caplog.records if r.exc_info], caplog.text

    late = credit_for(full, "test:full:late", 100)  # a delivery meeting the refusal settles it at once
    await recorded_unchecked(app, late)
    assert await app.state.credits.deliver(late) is False
    assert (await rows(app))[late.ref].status == CreditStatus.FAILED
    assert len(lines_naming(caplog, late.ref + " ")) == 1


async def test_an_unreachable_store_is_one_warning_per_streak(quiet: Running,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    app = quiet
    caplog.set_level(logging.INFO, logger="tollway.credits")
    uid = await add_user(app.state, "waiting", quota=0)
    for n in range(5):
        await recorded(app, credit_for(uid, f"test:wait:{n}", 10))
    outbox = app.state.credits
    engine = outbox.quota
    outbox.quota = Unreachable()  # type: ignore[assignment]
    try:
        for _ in range(3):
            await outbox.replay()
        app.clock.shift(WARN_EVERY)
        await outbox.replay()
    finally:
        outbox.quota = engine
    warnings = [r for r in caplog.records if r.name == "tollway.credits" and r.levelno == logging.WARNING]
    assert len(warnings) == 2, caplog.text
    assert "2 more failing passes" in warnings[1].getMessage()
    assert not [r for r in caplog.records if r.exc_info], caplog.text
    assert all(row.status == CreditStatus.PENDING for row in (await rows(app)).values())
    await outbox.replay()  # the store answers again: all of them, once
    assert await app.state.quota.balance("user", uid) == 50
    await settle(app)
    assert await rows(app) == {}


async def test_every_worker_runs_the_replay(app: Running) -> None:
    assert "credit-replay" in app.state.tasks.names
