"""The payment webhook's door and its exactly-once fulfilment under concurrency
(docs/api/payments.md#payments, docs/MONEY.md#payment-webhooks-exactly-once).

Proved here:
- 409 while online top-up is not configured (the provider delivers again); a missing, garbage or wrongly
  keyed `Stripe-Signature`, a tampered body, a `t` 301 s old (against the service's clock), a signed body
  that is not JSON or not an event, and an oversized delivery are 4xx that change nothing — and nothing
  is logged at error level, and no log line quotes the body; a fresh signature of the stale delivery,
  and a header with two `v1` of which one is valid, are accepted; a `t` 299 s old is accepted;
- with `NewApiCompatibleErrors` on (every other `/api` refusal answers 200), the webhook keeps its real
  statuses, which the provider retries: another key's signature 400, a stale one 400, top-up switched
  off 409 with the order still pending; switched on again, the redelivery credits once;
- on two nodes (one SQL database, one Redis; MariaDB and PostgreSQL), the same paid event delivered ten
  times at once across both nodes credits once, and five distinct paid events for one order credit
  once; the user, who could not afford a model call before, makes one on the other node right after,
  and SQL, the logs and the live balance of both nodes agree.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import httpx
import pytest

from core.enums import TopUpStatus
from tests.fakes.openai import FakeOpenAI
from tests.fakes.payment import UNIT_AMOUNT, FakeStripe, session_event, signature, signed
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user, data_of, fails, logged_in, set_error_mode
from tests.payments import (
    API_KEY,
    PER_UNIT,
    PRICE,
    WEBHOOK_SECRET,
    books,
    configure,
    deliver,
    live_quota,
    open_order,
    stored,
)

MOD = "omni-moderation-latest"
MARKER = "cus_BODYMARKER"


@pytest.fixture
async def stripe_fake() -> AsyncIterator[FakeStripe]:
    async with FakeStripe(api_key=API_KEY, price_id=PRICE) as fake:
        yield fake


async def test_only_fresh_genuine_deliveries_get_in(embedded_app: Running, stripe_fake: FakeStripe,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    app = embedded_app
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger="tollway")
    http = app.client()
    now = app.clock.now_s
    uid = await add_user(app.state, "payer")
    payer = await logged_in(app, "payer")
    early = session_event("ref_" + "1" * 32, amount_total=800, customer=MARKER)
    fails(await deliver(http, early, now()), 409)  # not configured: nothing read, delivered again later

    await configure(app.state, stripe_fake)
    order = await open_order(payer, app.state, 2)
    paid = session_event(order.trade_no, amount_total=2 * UNIT_AMOUNT, customer=MARKER)
    t = now()
    good = signature(WEBHOOK_SECRET, paid, t)
    refused = {
        "missing": "", "garbage": "nonsense", "no v1": f"t={t}", "no t": f"v1={good}",
        "bad t": f"t=abc,v1={good}", "other key": signed("whsec_other", paid, t),
        "v0 only": f"t={t},v0={good}", "other t": f"t={t + 1},v1={good}",
        "upper hex": f"t={t},v1={good.upper()}",
        "huge": "t=1," + "v1=0," * 900,
    }
    for name, header in refused.items():
        reply = await deliver(http, paid, t, header=header)
        assert reply.status_code == 400, (name, reply.text)
        assert reply.json()["message"].startswith("Stripe-Signature:"), name
    fails(await deliver(http, paid.replace(b'"paid"', b'"PAID"'), t, header=f"t={t},v1={good}"), 400)
    app.clock.shift(301)
    fails(await deliver(http, paid, t), 400, "Stripe-Signature:")  # signed 301 s ago
    # ahead by more than the 300 s allowed, with room for the seconds the server reads its clock later
    fails(await deliver(http, paid, now() + 310), 400, "Stripe-Signature:")
    marker = MARKER.encode()
    for body in (b"not json " + marker, b'["a list"]', b'{"type": "x", "m": "' + marker + b'"}',
                 b'{"id": 5, "type": "checkout.session.completed"}', b'{"id": "e"}', b"\xff\xfe" + marker):
        fails(await deliver(http, body, now()), 400)
    fails(await deliver(http, b'{"id": "evt_big", "pad": "' + b"x" * 300_000 + b'"}', now()), 413)
    assert (await stored(app.state, order.trade_no)).status == TopUpStatus.PENDING
    assert await live_quota(payer) == 0

    # the same event with a fresh signature, two v1 of which one is valid, 299 s old
    app.clock.shift(-2)
    reply = await deliver(http, paid, now() - 299,
                          header=signed(WEBHOOK_SECRET, paid, now() - 299, extra_v1=("0" * 64, "zz")))
    assert data_of(reply) is None
    assert (await stored(app.state, order.trade_no)).status == TopUpStatus.SUCCESS
    assert await live_quota(payer) == 2 * PER_UNIT
    final = await books(app, uid, order.trade_no)
    assert (final.quota, final.topups, final.events, final.customer) == (2 * PER_UNIT, [2 * PER_UNIT], 1,
                                                                          MARKER)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert MARKER not in caplog.text and "BODYMARKER" not in caplog.text


async def test_refusals_keep_their_status_with_new_api_errors_and_a_redelivery_credits_once(
        embedded_app: Running, stripe_fake: FakeStripe) -> None:
    app = embedded_app
    http = app.client()
    now = app.clock.now_s
    uid = await add_user(app.state, "payer")
    payer = await logged_in(app, "payer")
    await configure(app.state, stripe_fake)
    await set_error_mode(app, "new-api")
    fails(await payer.post("/api/user/stripe/amount", json={"amount": 0}), 200, "amount:")  # the mode is on
    order = await open_order(payer, app.state, 2)
    paid = session_event(order.trade_no, amount_total=2 * UNIT_AMOUNT)

    t = now()
    fails(await deliver(http, paid, t, header=signed("whsec_rotated", paid, t)), 400, "Stripe-Signature:")
    app.clock.shift(301)
    fails(await deliver(http, paid, t), 400, "Stripe-Signature:")  # signed 301 s ago
    await app.state.options.put("StripePriceId", "")  # online top-up switched off
    off = await deliver(http, paid, now())
    fails(off, 409, "online top-up is not enabled")
    assert (await stored(app.state, order.trade_no)).status == TopUpStatus.PENDING
    assert await live_quota(payer) == 0

    await app.state.options.put("StripePriceId", PRICE)  # on again: the provider's next attempt
    for _ in range(2):
        assert data_of(await deliver(http, paid, now())) is None
    assert (await stored(app.state, order.trade_no)).status == TopUpStatus.SUCCESS
    assert await live_quota(payer) == 2 * PER_UNIT
    final = await books(app, uid, order.trade_no)
    assert (final.quota, final.topups, final.events) == (2 * PER_UNIT, [2 * PER_UNIT], 1)


async def test_concurrent_and_repeated_events_credit_once_on_two_nodes(
        nodes: tuple[Running, Running], stripe_fake: FakeStripe, openai_fake: FakeOpenAI) -> None:
    one, two = nodes
    await configure(one.state, stripe_fake)
    uid = await add_user(one.state, "payer")
    _, key = await seed_key(one.state, uid, unlimited=True)
    await seed_channel(one.state, type=1, base_url=openai_fake.url, models=MOD)
    await one.state.options.put("ModelPrice", f'{{"{MOD}": 0.002}}')  # 2 points a call at 1000 a unit
    payer_one, payer_two = await logged_in(one, "payer"), await logged_in(two, "payer")
    calls = two.client()

    async def model_call() -> httpx.Response:
        return await calls.post("/v1/moderations", json={"input": "hi"}, headers={"Authorization": key})

    assert (await model_call()).status_code == 429  # nothing to spend yet
    order = await open_order(payer_one, one.state, 3)
    paid = session_event(order.trade_no, amount_total=3 * UNIT_AMOUNT)
    https = [one.client(), two.client()]
    replies = await asyncio.gather(*(deliver(https[n % 2], paid, one.clock.now_s()) for n in range(10)))
    assert [r.status_code for r in replies] == [200] * 10, [r.text for r in replies]
    assert (await model_call()).status_code == 200  # the very next call, on the other node
    assert await live_quota(payer_one) == await live_quota(payer_two) == 3 * PER_UNIT - 2

    second = await open_order(payer_two, two.state, 2)
    kinds = ["checkout.session.completed", "checkout.session.async_payment_succeeded"] * 2 + [
        "checkout.session.completed"]
    replies = await asyncio.gather(*(
        deliver(https[n % 2], session_event(second.trade_no, amount_total=2 * UNIT_AMOUNT, type_=kind),
                one.clock.now_s()) for n, kind in enumerate(kinds)))
    assert [r.status_code for r in replies] == [200] * 5, [r.text for r in replies]
    expected = 5 * PER_UNIT - 2
    assert await live_quota(payer_one) == await live_quota(payer_two) == expected
    await two.state.quota_sync.drain()
    first_books = await books(one, uid, order.trade_no)
    assert (first_books.quota, sorted(first_books.topups), first_books.events) == (
        expected, [2 * PER_UNIT, 3 * PER_UNIT], 1)
    assert (await books(one, uid, second.trade_no)).events == 1
    for done in (order, second):
        assert (await stored(one.state, done.trade_no)).status == TopUpStatus.SUCCESS
