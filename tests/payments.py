"""Shared steps of the payment tests: configure online top-up against the fake provider, open an order
through the API, deliver signed webhook events, and read the books (SQL balance, top-up logs, events)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from sqlalchemy import select

from core.enums import LogType
from models.logs import Log
from models.payments import PaymentEventRepository
from models.topups import TopUp, TopUpRepository
from models.users import UserRepository
from server.context import State
from tests.fakes.payment import FakeStripe, signed
from tests.harness import Api, Running, data_of

WEBHOOK_SECRET = "whsec_test_0123456789abcdef"
API_KEY = "sk_test_fake"
PRICE = "price_fake"
SERVER = "http://tollway.example"  # http: the test clients keep the session cookie
PER_UNIT = 1000


async def configure(state: State, fake: FakeStripe | None, *, api_base: str | None = None) -> None:
    values = {"StripeApiSecret": API_KEY, "StripeWebhookSecret": WEBHOOK_SECRET, "StripePriceId": PRICE,
              "ServerAddress": SERVER, "QuotaPerUnit": str(PER_UNIT)}
    if fake is not None or api_base is not None:
        values["StripeApiBase"] = api_base or (fake.url if fake else "")
    for key, value in values.items():
        await state.options.put(key, value)


async def open_order(api: Api, state: State, amount: int) -> TopUp:
    """`POST /api/user/stripe/pay` and the pending order it stored."""
    data_of(await api.post("/api/user/stripe/pay", json={"amount": amount}))
    async with state.db.transaction() as tx:
        newest = await tx.scalar(select(TopUp).order_by(TopUp.id.desc()).limit(1))
    assert newest is not None
    return newest


async def deliver(http: httpx.AsyncClient | Api, payload: bytes, t: int, *, header: str | None = None
                  ) -> httpx.Response:
    headers = {"Content-Type": "application/json",
               "Stripe-Signature": signed(WEBHOOK_SECRET, payload, t) if header is None else header}
    return await http.post("/api/stripe/webhook", content=payload, headers=headers)


async def stored(state: State, trade_no: str) -> TopUp:
    async with state.db.transaction() as tx:
        found = await TopUpRepository(tx).by_trade_no(trade_no)
    assert found is not None
    return found


@dataclass
class Books:
    quota: int  # SQL, after the quota sync
    topups: list[int]  # the quota of each top-up log
    events: int  # payment events recorded for the order
    customer: str


async def books(app: Running, user_id: int, trade_no: str) -> Books:
    await app.state.quota_sync.drain()
    async with app.state.db.transaction() as tx:
        user = await UserRepository(tx).get(user_id)
        logs = (await tx.scalars(select(Log).where(Log.user_id == user_id, Log.type == LogType.TOPUP))).all()
        events = await PaymentEventRepository(tx).count(trade_no)
    assert user is not None
    return Books(user.quota, [x.quota for x in logs], events, user.stripe_customer)


MOD = "omni-moderation-latest"


async def paid_calls(state: State, user_id: int, upstream_url: str) -> str:
    """A moderation channel at the fake OpenAI, priced 2 points a call at PER_UNIT, and an API key of
    `user_id`; the key."""
    from tests.gateway import seed_channel, seed_key

    _, key = await seed_key(state, user_id, unlimited=True)
    await seed_channel(state, type=1, base_url=upstream_url, models=MOD)
    await state.options.put("ModelPrice", f'{{"{MOD}": 0.002}}')
    return key


async def model_call(http: httpx.AsyncClient | Api, key: str) -> httpx.Response:
    return await http.post("/v1/moderations", json={"input": "hi"}, headers={"Authorization": key})


async def live_quota(api: Api) -> int:
    quota: int = data_of(await api.get("/api/user/self"))["quota"]
    return quota
