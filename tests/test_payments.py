"""Online top-up (docs/api/payments.md#payments) on every stack, over HTTP against the real app and a local
fake Stripe-compatible provider (tests/fakes/payment.py).

Proved here:
- `topup/info`, `stripe/amount` and `stripe/pay`: off until the API secret, webhook secret and price are
  set (403); the price is units × unit price with two decimals; bounds are 400s naming `amount`; return
  URLs must be on ServerAddress; `pay` stores a pending order and opens the checkout with the Bearer
  secret, `Idempotency-Key` = the trade number and the documented form; a provider failure (500, a
  wrong key, an unreachable provider) marks the order failed and answers 500 `payment provider error`;
- a paid `checkout.session.completed` credits units × QuotaPerUnit once — live at once, in SQL after
  the sync, with one top-up log, the event recorded and the customer id kept; the same event again, and
  four more distinct events for the same order, change nothing;
- an unpaid completion is ignored and a later `async_payment_succeeded` credits; `async_payment_failed`
  and `expired` move pending orders; an amount or currency mismatch holds the order for review with no
  credit; an unknown order and other event types are 200 with nothing changed;
- a paid order whose credit the owner's balance cannot take (it would pass 2^53 − 1) is held for review,
  the event recorded and nothing credited or left to fail; the admin's completion is a 409 until the
  balance has room, then credits it once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import parse_qsl

import pytest
from sqlalchemy import func, select

from core.enums import TopUpStatus
from models.credits import PendingCredit
from quota.types import BALANCE_MAX
from tests.fakes.payment import UNIT_AMOUNT, FakeStripe, session_event
from tests.harness import Running, add_user, data_of, fails, logged_in
from tests.payments import (
    API_KEY,
    PER_UNIT,
    PRICE,
    SERVER,
    Books,
    books,
    configure,
    deliver,
    live_quota,
    open_order,
    stored,
)


@pytest.fixture
async def stripe_fake() -> AsyncIterator[FakeStripe]:
    async with FakeStripe(api_key=API_KEY, price_id=PRICE) as fake:
        yield fake


async def test_checkout_opens_an_order_at_the_provider(app: Running, stripe_fake: FakeStripe) -> None:
    await add_user(app.state, "payer")
    payer = await logged_in(app, "payer")
    info = data_of(await payer.get("/api/user/topup/info"))
    assert info == {"enable_stripe_topup": False, "stripe_min_topup": 1, "stripe_unit_price": 8.0,
                    "amount_options": [10, 20, 50, 100, 200, 500], "enable_online_topup": False,
                    "enable_creem_topup": False, "pay_methods": [], "min_topup": 1, "discount": {}}
    fails(await payer.post("/api/user/stripe/amount", json={"amount": 10}), 403)
    fails(await payer.post("/api/user/stripe/pay", json={"amount": 10}), 403)
    assert stripe_fake.received == []

    await configure(app.state, stripe_fake)
    await app.state.options.put("StripeMinTopUp", "2")
    info = data_of(await payer.get("/api/user/topup/info"))
    assert (info["enable_stripe_topup"], info["stripe_min_topup"], info["min_topup"]) == (True, 2, 2)
    quote = await payer.post("/api/user/stripe/amount", json={"amount": 10})
    assert data_of(quote) == "80.00"
    assert quote.json()["message"] == "success"  # new-api's console reads the price only then
    assert data_of(await payer.post("/api/user/stripe/amount", json={"amount": 10_000})) == "80000.00"
    for bad in (1, 10_001, -5, "ten", None, 2.5, True):
        fails(await payer.post("/api/user/stripe/amount", json={"amount": bad}), 400, "amount:", prefix=True)
    for field, url in (("success_url", "https://evil.example/console/log"), ("cancel_url", "/console"),
                       ("success_url", "javascript:alert(1)"), ("cancel_url", "https://tollway.example/x")):
        fails(await payer.post("/api/user/stripe/pay", json={"amount": 3, field: url}), 400, f"{field}:",
              prefix=True)
    assert stripe_fake.received == []

    paying = await payer.post("/api/user/stripe/pay", json={
        "amount": 3, "cancel_url": f"{SERVER}/console/topup?again=1"})
    link = data_of(paying)["pay_link"]
    assert paying.json()["message"] == "success"  # new-api's console opens the link only then
    order = await open_order(payer, app.state, 4)  # a second one, with the default URLs
    first = stripe_fake.received[0]
    assert link == f"https://checkout.stripe.test/c/pay/{next(iter(stripe_fake.sessions))}"
    assert first.headers["authorization"] == f"Bearer {API_KEY}"
    form = dict(parse_qsl(stripe_fake.last.body.decode()))
    assert stripe_fake.last.headers["idempotency-key"] == order.trade_no == form["client_reference_id"]
    assert first.headers["idempotency-key"] != order.trade_no
    assert form == {"mode": "payment", "client_reference_id": order.trade_no,
                    "metadata[trade_no]": order.trade_no, "line_items[0][price]": PRICE,
                    "line_items[0][quantity]": "4", "success_url": f"{SERVER}/console/log",
                    "cancel_url": f"{SERVER}/console/topup", "customer_creation": "always"}
    assert dict(parse_qsl(first.body.decode()))["cancel_url"] == f"{SERVER}/console/topup?again=1"
    assert order.trade_no.startswith("ref_") and len(order.trade_no) == 36
    assert (order.status, order.amount, order.money, order.payment_provider, order.complete_time) == (
        TopUpStatus.PENDING, 4, 32.0, "stripe", 0)

    stripe_fake.fail("500")
    fails(await payer.post("/api/user/stripe/pay", json={"amount": 5}), 500, "payment provider error")
    stripe_fake.reset()
    await app.state.options.put("StripeApiSecret", "sk_test_wrong")
    fails(await payer.post("/api/user/stripe/pay", json={"amount": 6}), 500, "payment provider error")
    await configure(app.state, None, api_base="http://127.0.0.1:9")  # nobody listens there
    reply = await payer.post("/api/user/stripe/pay", json={"amount": 7})
    fails(reply, 500, "payment provider error")
    assert API_KEY not in reply.text
    mine = data_of(await payer.get("/api/user/topup/self", params={"page_size": 10}))["items"]
    assert [(o["amount"], o["status"]) for o in mine] == [
        (7, "failed"), (6, "failed"), (5, "failed"), (4, "pending"), (3, "pending")]


async def test_a_paid_checkout_credits_once(app: Running, stripe_fake: FakeStripe) -> None:
    await configure(app.state, stripe_fake)
    uid = await add_user(app.state, "payer", quota=7)
    payer = await logged_in(app, "payer")
    order = await open_order(payer, app.state, 3)
    paid = session_event(order.trade_no, amount_total=3 * UNIT_AMOUNT, customer="cus_A1")
    http = app.client()
    app.clock.shift(20)
    sent = app.clock.now_s()
    assert data_of(await deliver(http, paid, sent)) is None
    done = await stored(app.state, order.trade_no)
    assert done.status == TopUpStatus.SUCCESS and sent <= done.complete_time <= app.clock.now_s()
    assert await live_quota(payer) == 7 + 3 * PER_UNIT  # at once, before any sync
    for _ in range(3):
        data_of(await deliver(http, paid, app.clock.now_s()))  # a redelivery
    for kind in ("checkout.session.completed", "checkout.session.async_payment_succeeded",
                 "checkout.session.async_payment_failed", "checkout.session.expired"):
        data_of(await deliver(http, session_event(order.trade_no, amount_total=3 * UNIT_AMOUNT, type_=kind,
                                                  customer="cus_other"), app.clock.now_s()))
    after = await stored(app.state, order.trade_no)
    assert (after.status, after.complete_time) == (TopUpStatus.SUCCESS, done.complete_time)
    assert await live_quota(payer) == 7 + 3 * PER_UNIT
    assert await books(app, uid, order.trade_no) == Books(7 + 3 * PER_UNIT, [3 * PER_UNIT], 1, "cus_A1")
    logs = data_of(await payer.get("/api/log/self", params={"type": 1}))["items"]
    assert [x["quota"] for x in logs] == [3 * PER_UNIT] and order.trade_no in logs[0]["content"]

    # an admin completing it afterwards adds nothing either
    await add_user(app.state, "root", role=100)
    root = await logged_in(app, "root")
    data_of(await root.post("/api/user/topup/complete", json={"trade_no": order.trade_no}))
    assert (await books(app, uid, order.trade_no)).topups == [3 * PER_UNIT]


async def test_other_events_move_or_hold_orders_without_credit(app: Running, stripe_fake: FakeStripe) -> None:
    await configure(app.state, stripe_fake)
    uid = await add_user(app.state, "payer")
    payer = await logged_in(app, "payer")
    http = app.client()
    now = app.clock.now_s
    unpaid, failing, lapsing, short, foreign = [await open_order(payer, app.state, 2) for _ in range(5)]
    total = 2 * UNIT_AMOUNT

    data_of(await deliver(http, session_event(unpaid.trade_no, amount_total=total, payment_status="unpaid"),
                          now()))
    assert (await stored(app.state, unpaid.trade_no)).status == TopUpStatus.PENDING
    data_of(await deliver(http, session_event(failing.trade_no, amount_total=total,
                                              type_="checkout.session.async_payment_failed"), now()))
    data_of(await deliver(http, session_event(lapsing.trade_no, amount_total=total,
                                              type_="checkout.session.expired"), now()))
    data_of(await deliver(http, session_event(short.trade_no, amount_total=total - 1), now()))
    data_of(await deliver(http, session_event(foreign.trade_no, amount_total=total, currency="eur"), now()))
    data_of(await deliver(http, session_event("ref_" + "0" * 32, amount_total=total), now()))
    data_of(await deliver(http, session_event(None, amount_total=total), now()))
    data_of(await deliver(http, session_event(unpaid.trade_no, amount_total=total,
                                              type_="customer.created"), now()))
    orders = (unpaid, failing, lapsing, short, foreign)
    statuses = [(await stored(app.state, o.trade_no)).status for o in orders]
    assert statuses == [TopUpStatus.PENDING, TopUpStatus.FAILED, TopUpStatus.EXPIRED, TopUpStatus.REVIEW,
                        TopUpStatus.REVIEW]
    assert await live_quota(payer) == 0
    assert (await books(app, uid, short.trade_no)).topups == []
    # a failed order stays failed even if a success arrives later
    data_of(await deliver(http, session_event(failing.trade_no, amount_total=total,
                                              type_="checkout.session.async_payment_succeeded"), now()))
    assert (await stored(app.state, failing.trade_no)).status == TopUpStatus.FAILED

    # the unpaid completion is settled by the asynchronous success
    data_of(await deliver(http, session_event(unpaid.trade_no, amount_total=total,
                                              type_="checkout.session.async_payment_succeeded"), now()))
    assert (await stored(app.state, unpaid.trade_no)).status == TopUpStatus.SUCCESS
    assert await live_quota(payer) == 2 * PER_UNIT
    final = await books(app, uid, unpaid.trade_no)
    assert (final.quota, final.topups, final.events) == (2 * PER_UNIT, [2 * PER_UNIT], 1)
    assert (await books(app, uid, short.trade_no)).events == 1  # the review was recorded with its event


async def test_a_paid_order_the_balance_cannot_take_is_held_for_review(app: Running,
                                                                      stripe_fake: FakeStripe) -> None:
    await configure(app.state, stripe_fake)
    near_max = BALANCE_MAX - PER_UNIT  # room for one unit, not for two
    uid = await add_user(app.state, "payer", quota=near_max)
    payer = await logged_in(app, "payer")
    order = await open_order(payer, app.state, 2)
    paid = session_event(order.trade_no, amount_total=2 * UNIT_AMOUNT, customer="cus_full")
    http = app.client()
    assert data_of(await deliver(http, paid, app.clock.now_s())) is None  # the payment is recorded
    assert (await stored(app.state, order.trade_no)).status == TopUpStatus.REVIEW
    assert await live_quota(payer) == near_max
    async with app.state.db.transaction() as tx:
        assert await tx.scalar(select(func.count()).select_from(PendingCredit)) == 0
    held = await books(app, uid, order.trade_no)
    assert (held.quota, held.topups, held.events) == (near_max, [], 1)
    data_of(await deliver(http, paid, app.clock.now_s()))  # a redelivery changes nothing
    assert (await stored(app.state, order.trade_no)).status == TopUpStatus.REVIEW

    await add_user(app.state, "root", role=100)
    root = await logged_in(app, "root")
    fails(await root.post("/api/user/topup/complete", json={"trade_no": order.trade_no}), 409,
          "the balance would exceed the largest supported amount")
    assert (await stored(app.state, order.trade_no)).status == TopUpStatus.REVIEW
    data_of(await root.post("/api/user/manage", json={"id": uid, "action": "add_quota", "mode": "subtract",
                                                      "value": 3 * PER_UNIT}))
    data_of(await root.post("/api/user/topup/complete", json={"trade_no": order.trade_no}))
    assert (await stored(app.state, order.trade_no)).status == TopUpStatus.SUCCESS
    assert await live_quota(payer) == near_max - PER_UNIT
    final = await books(app, uid, order.trade_no)
    assert (final.quota, final.topups) == (near_max - PER_UNIT, [2 * PER_UNIT])
