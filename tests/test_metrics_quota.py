"""The quota, outbox, payment and infrastructure metrics count exactly what happened (server/metrics/).

Each test reads the figures of this process's registry before and after a known sequence and asserts the
difference, through the production code paths on real stores:

    quota steps       on Redis and in process: a reservation refused for quota and one for its rate
                      limit, holds settled, settled again, released; a hold whose lease passed is swept;
                      the open holds the store reports
    Redis errors      a Redis the test started: stopped → a connection error; paused (SIGSTOP) → a timeout
    database errors   a MariaDB address nobody listens on → a connection error; a unique-key violation and
                      a service's own exception are not database failures
    sign-in           N wrong passwords → N failures, the Nth starts one lockout, the next is `locked`
    webhooks          a paid event, its replay, an unsigned delivery, a delivery while top-up is off
    scrape            `/metrics` shows the open holds and the outbox's pending and failed credits
    cache reloads     an option changed reloads the options once on the worker that changed it
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
from pathlib import Path

import httpx
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import text

from backend.base import BackendUnavailable, Limit
from backend.redis import RedisBackend
from core.enums import CreditStatus
from models.credits import PendingCreditRepository
from models.db import Database
from models.migrate import upgrade
from quota.backends.redis_quota import RedisQuotaStore
from quota.partitions import tag
from quota.types import InsufficientQuota, RateLimited
from server import metrics
from server.auth.service import LOGIN_FAIL_LIMIT
from server.context import State
from tests.fakes.payment import UNIT_AMOUNT, FakeStripe, session_event
from tests.harness import Running, add_user, logged_in, make_config, serve
from tests.payments import API_KEY, PRICE, configure, deliver, open_order
from tests.quota.env import QuotaEnv
from tests.redis_server import own_redis
from tests.test_e2e_serve import free_port

TOKEN = "metrics-" + "b2" * 16


def value(name: str, **labels: str) -> float:
    """A sample of this process's registry, its buffered counts written first (server/metrics/tally.py)."""
    metrics.flush()
    return REGISTRY.get_sample_value(name, labels) or 0.0


def counts(name: str, label: str, values: list[str]) -> dict[str, float]:
    return {v: value(name, **{label: v}) for v in values}


def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {key: after[key] - before[key] for key in after if after[key] != before[key]}


RESERVE = ["held", "refused_quota", "refused_rate", "error"]
SETTLE = ["applied", "duplicate", "released", "error"]
KINDS = ["timeout", "connection", "other"]


async def test_quota_steps_are_counted_by_result(quota_env: QuotaEnv) -> None:
    engine = quota_env.engine
    engine.observer = metrics.QUOTA
    uid = await quota_env.add_user(1000)
    reserved = counts("tollway_quota_reservations_total", "result", RESERVE)
    settled = counts("tollway_quota_settlements_total", "result", SETTLE)
    timed = (value("tollway_quota_reservation_seconds_count"),
             value("tollway_quota_settlement_seconds_count"))
    swept = value("tollway_quota_holds_swept_total")

    with pytest.raises(InsufficientQuota):
        await engine.reserve(uid, 5000)
    # a model-call limit lives in its account's partition, as the relay names it (one slot on a cluster)
    limit = Limit(f"rl:{tag(quota_env.store.partition(uid))}:metrics:{secrets.token_hex(4)}", 1, 60.0)
    first = await engine.reserve(uid, 100, limits=[limit])
    with pytest.raises(RateLimited):
        await engine.reserve(uid, 100, limits=[limit])
    assert await engine.holds_in_flight() == 1
    assert (await engine.settle(first, 40)).applied
    assert not (await engine.settle(first, 40)).applied  # a duplicate settlement changes nothing
    assert not await engine.release(first)  # nor a release after it
    given_back = await engine.reserve(uid, 10)
    assert await engine.release(given_back)
    assert await engine.holds_in_flight() == 0

    engine.lease_ms = 50
    await engine.reserve(uid, 300)  # its worker "dies": never settled
    assert await engine.holds_in_flight() == 1
    released = 0
    for _ in range(200):  # until the lease has passed (the store's clock decides)
        released += await engine.sweep()
        if released:
            break
        await asyncio.sleep(0.02)
    assert released == 1
    assert await engine.holds_in_flight() == 0

    assert delta(counts("tollway_quota_reservations_total", "result", RESERVE), reserved) == {
        "held": 3, "refused_quota": 1, "refused_rate": 1}
    assert delta(counts("tollway_quota_settlements_total", "result", SETTLE), settled) == {
        "applied": 1, "duplicate": 2, "released": 1}
    assert value("tollway_quota_reservation_seconds_count") - timed[0] == 5
    assert value("tollway_quota_settlement_seconds_count") - timed[1] == 4
    assert value("tollway_quota_holds_swept_total") - swept == 1


async def test_redis_errors_are_counted_by_kind(tmp_path: Path) -> None:
    with own_redis(tmp_path / "redis") as redis:
        backend = RedisBackend(redis.url, f"t:{secrets.token_hex(4)}:", timeout=0.5,
                               on_error=metrics.redis_error)
        store = RedisQuotaStore(backend)
        try:
            before = counts("tollway_redis_errors_total", "kind", KINDS)
            await backend.ping()
            assert await store.open_holds() == 0
            assert counts("tollway_redis_errors_total", "kind", KINDS) == before  # success counts nothing

            assert redis.proc is not None
            pid = redis.proc.pid
            os.kill(pid, signal.SIGSTOP)  # the server answers nothing: the call runs into its deadline
            try:
                with pytest.raises(BackendUnavailable):
                    await backend.get_text("k")
            finally:
                os.kill(pid, signal.SIGCONT)
            await backend.ping()
            await asyncio.to_thread(redis.stop)
            with pytest.raises(BackendUnavailable):
                await store.open_holds()  # a store built on the backend counts through it
            with pytest.raises(BackendUnavailable):
                await backend.ping()
            assert delta(counts("tollway_redis_errors_total", "kind", KINDS), before) == {
                "timeout": 1, "connection": 2}
        finally:
            await backend.close()


async def test_database_errors_are_counted_by_kind_and_refusals_are_not(tmp_path: Path) -> None:
    before = counts("tollway_db_errors_total", "kind", KINDS)
    nobody = Database(f"mysql+aiomysql://root@127.0.0.1:{free_port()}/test", on_error=metrics.db_error)
    try:
        with pytest.raises(Exception, match="Can't connect"):
            async with nobody.transaction() as tx:
                await tx.execute(text("SELECT 1"))
    finally:
        await nobody.dispose()

    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'errors.db'}", on_error=metrics.db_error)
    await upgrade(db.engine)
    try:
        async with db.transaction() as tx:
            await PendingCreditRepository(tx).add(ref="r1", user_id=1, amount=5, log={}, created_at=0)
        with pytest.raises(Exception, match="UNIQUE"):  # a constraint: the service's 409, not a failure
            async with db.transaction() as tx:
                await PendingCreditRepository(tx).add(ref="r1", user_id=1, amount=5, log={}, created_at=0)
        with pytest.raises(LookupError):  # the service's own exception inside the transaction
            async with db.transaction():
                raise LookupError("not the database")
        async with db.transaction() as tx:
            await PendingCreditRepository(tx).fail("r1", "test", 0)
            assert await PendingCreditRepository(tx).counts() == {CreditStatus.PENDING: 0,
                                                                   CreditStatus.FAILED: 1}
    finally:
        await db.dispose()
    assert delta(counts("tollway_db_errors_total", "kind", KINDS), before) == {"connection": 1}


async def test_failed_sign_ins_and_the_lockout_are_counted(embedded_app: Running) -> None:
    await add_user(embedded_app.state, "carol")
    reasons = [reason.value for reason in metrics.SignInFailure]
    failures = counts("tollway_sign_in_failures_total", "reason", reasons)
    lockouts = value("tollway_sign_in_lockouts_total")
    for _ in range(LOGIN_FAIL_LIMIT):
        assert (await embedded_app.client().login("carol", "wrong-password")).status_code == 401
    assert value("tollway_sign_in_lockouts_total") - lockouts == 1
    assert (await embedded_app.client().login("carol", "wrong-password")).status_code == 429
    assert (await embedded_app.client().login("nobody-here", "x")).status_code == 401
    assert delta(counts("tollway_sign_in_failures_total", "reason", reasons), failures) == {
        "password": LOGIN_FAIL_LIMIT + 1, "locked": 1}
    assert value("tollway_sign_in_lockouts_total") - lockouts == 1


async def test_webhook_deliveries_are_counted_by_outcome(embedded_app: Running) -> None:
    app = embedded_app
    outcomes = ["credited", "replayed", "bad_signature", "disabled", "bad_event", "no_order"]

    def now() -> int:
        return app.clock.now_s()

    before = {o: value("tollway_payment_webhooks_total", provider="stripe", outcome=o) for o in outcomes}
    http = app.client()
    await add_user(app.state, "payer")
    payer = await logged_in(app, "payer")
    early = session_event("ref_" + "2" * 32, amount_total=800)
    assert (await deliver(http, early, now())).status_code == 409  # online top-up is off
    async with FakeStripe(api_key=API_KEY, price_id=PRICE) as fake:
        await configure(app.state, fake)
        order = await open_order(payer, app.state, 2)
        paid = session_event(order.trade_no, amount_total=2 * UNIT_AMOUNT)
        assert (await deliver(http, paid, now())).status_code == 200
        assert (await deliver(http, paid, now())).status_code == 200  # the provider's replay
        assert (await deliver(http, paid, now(), header="t=1,v1=00")).status_code == 400
        assert (await deliver(http, b'["not an event"]', now())).status_code == 400
    after = {o: value("tollway_payment_webhooks_total", provider="stripe", outcome=o) for o in outcomes}
    assert delta(after, before) == {"disabled": 1, "credited": 1, "replayed": 1, "bad_signature": 1,
                                    "bad_event": 1}


async def outbox(state: State) -> dict[CreditStatus, int]:
    async with state.db.transaction() as tx:
        return await PendingCreditRepository(tx).counts()


async def scrape(client: httpx.AsyncClient) -> str:
    reply = await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert reply.status_code == 200
    return reply.text


async def test_the_scrape_reads_open_holds_and_the_outbox(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'scrape.db'}"
    db = Database(url, pool_size=1)
    await upgrade(db.engine)
    await db.dispose()
    config = make_config(url, tmp_path / "data", metrics_token=TOKEN)
    async with serve(config) as running, httpx.AsyncClient(base_url=running.url, timeout=30) as client:
        state = running.state
        uid = await add_user(state, "holder")
        held = [await state.quota.reserve(uid, 0) for _ in range(3)]
        async with state.db.transaction() as tx:
            credits = PendingCreditRepository(tx)
            for n in range(3):  # credits for users that do not exist: the replay settles them as failed
                await credits.add(ref=f"metrics:{n}", user_id=10**9 + n, amount=5, log={}, created_at=0)
        for _ in range(300):  # until the replay's next pass (every 5 s) has failed them
            if (await outbox(state))[CreditStatus.FAILED] == 3:
                break
            await asyncio.sleep(0.1)
        first = await scrape(client)
        assert (value("tollway_credits_pending"), value("tollway_credits_failed")) == (0, 3)
        assert value("tollway_quota_holds_in_flight") == 3

        for reservation in held[:2]:
            await state.quota.release(reservation)
        async with state.db.transaction() as tx:  # the replay may fail these any time: counted either way
            await PendingCreditRepository(tx).add(ref="metrics:3", user_id=10**9 + 3, amount=5, log={},
                                                  created_at=0)
        second = await scrape(client)
        assert value("tollway_quota_holds_in_flight") == 1
        assert value("tollway_credits_pending") + value("tollway_credits_failed") == 4
        assert value("tollway_credits_failed") >= 3

        reloads = value("tollway_cache_reloads_total", kind="options")
        await state.options.put("SystemName", "metrics test")
        assert value("tollway_cache_reloads_total", kind="options") - reloads == 1
    assert "tollway_quota_holds_in_flight 3.0" in first and "tollway_credits_failed 3.0" in first
    assert "tollway_quota_holds_in_flight 1.0" in second
