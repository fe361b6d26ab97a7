"""The rules of paying online (docs/api/payments.md#payments): what the top-up page shows, the price of an
order, opening a checkout, and the provider's webhook, which completes an order exactly once.

A webhook event that completes an order is ONE SQL transaction — the order's conditional move from
`pending` to `success`, the payer's customer id, the credit recorded in the outbox (with its top-up log)
and the event id in `payment_events` — and only after its commit the credit is applied to the live
balance through the quota engine, keyed by the order (`topup:<trade_no>`), retried by the outbox until
SQL has it (server/credits.py). A delivery is acknowledged (2xx) only once its transaction has
committed; one that could not commit is a 500, and the provider delivers it again
(docs/MONEY.md#payment-webhooks-exactly-once). A paid order whose credit the owner's balance
cannot take (the quota engine's exact range, counting the credits already decided for the owner) is
held for `review` instead of completed: the payment is recorded, nothing is credited, an admin completes
it later. That is decided in the transaction, under the owner's row lock (server/credits.py): a credit
refused there rolls it back, and the event is applied again as a `review`.
"""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession

from core.enums import LogType, TopUpStatus
from core.identity import Principal
from core.log_entry import LogEntry
from models.db import Database
from models.payments import EVENT_ID_MAX, PaymentEventRepository, remember_customer
from models.topups import TopUp, TopUpRepository, credit_ref
from models.users import UserRepository
from server import metrics
from server.clock import Clock
from server.components.options import Options
from server.credits import Credit, CreditOutbox, CreditRefused
from server.errors import (
    BadRequest,
    Forbidden,
    NotOffered,
    PayloadTooLarge,
    PaymentNotRecorded,
    PaymentProviderError,
    PaymentsNotReady,
)
from server.payments.checkout import Checkout, CheckoutFailed, CheckoutRequest
from server.payments.schemas import TopUpInfo
from server.payments.signature import BadSignature, verify

log = logging.getLogger("tollway.payments")

PROVIDER = "stripe"
AMOUNT_MAX = 10_000
WEBHOOK_MAX_BODY = 256 * 1024  # the largest delivery read (a checkout-session event is a few KB)
COMPLETED = "checkout.session.completed"
ASYNC_SUCCEEDED = "checkout.session.async_payment_succeeded"
ASYNC_FAILED = "checkout.session.async_payment_failed"
EXPIRED = "checkout.session.expired"


class Outcome(StrEnum):
    """What a webhook delivery did (logged; the reply is 200 for each), and, below, why one was refused
    (not logged here; a 4xx or 5xx). Every value is a label of `tollway_payment_webhooks_total`."""

    CREDITED = "credited"
    FAILED = "failed"
    EXPIRED = "expired"
    REVIEW = "review"
    REPLAYED = "replayed"  # the event was recorded before
    NO_ORDER = "no_order"  # no pending order of this provider has the event's reference
    IGNORED = "ignored"
    # refused
    DISABLED = "disabled"  # 409: online top-up is off
    TOO_LARGE = "too_large"  # 413
    BAD_SIGNATURE = "bad_signature"  # 400: unsigned, badly signed or stale
    BAD_EVENT = "bad_event"  # 400: not JSON, or not an event
    NOT_RECORDED = "not_recorded"  # 500: could not commit (the provider delivers it again)


@dataclass(frozen=True, slots=True)
class Event:
    """A verified webhook event: its id, type and `data.object` (a checkout session)."""

    id: str
    type: str
    session: dict[str, Any]

    @classmethod
    def parse(cls, value: Any) -> Event:
        """From the parsed JSON body; a 400 when it is not an event."""
        if not isinstance(value, dict):
            raise BadRequest("body: must be a JSON object")
        event_id, type_ = value.get("id"), value.get("type")
        if not isinstance(event_id, str) or not 0 < len(event_id) <= EVENT_ID_MAX:
            raise BadRequest(f"id: must be a string of 1–{EVENT_ID_MAX} characters")
        if not isinstance(type_, str) or not type_:
            raise BadRequest("type: must be a non-empty string")
        data = value.get("data")
        session = data.get("object") if isinstance(data, dict) else None
        return cls(event_id, type_[:128], session if isinstance(session, dict) else {})

    def text(self, name: str) -> str:
        value = self.session.get(name)
        return value if isinstance(value, str) else ""


class PaymentService:
    def __init__(self, *, db: Database, credits: CreditOutbox, options: Options, checkout: Checkout,
                 clock: Clock) -> None:
        self.db = db
        self.credits = credits
        self.options = options
        self.checkout = checkout
        self.clock = clock

    # ---- settings ---------------------------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """Online top-up works once the API secret, the webhook secret and the price are all set."""
        return all(self.options[k] for k in ("StripeApiSecret", "StripeWebhookSecret", "StripePriceId"))

    def info(self) -> TopUpInfo:
        return TopUpInfo.of(enabled=self.enabled, minimum=int(self.options["StripeMinTopUp"]),
                            unit_price=float(self.options["StripeUnitPrice"]),
                            amount_options=list(self.options["payment_setting.amount_options"]))

    def price(self, amount: int) -> str:
        """What `amount` units cost, "80.00" style; 403 when online top-up is off, 400 out of bounds."""
        return f"{self._money(amount):.2f}"

    @staticmethod
    def epay_price(amount: int) -> str:
        """new-api's price of `amount` units paid through EPay (`POST /api/user/amount`): a method Tollway
        does not have, so always a refusal (`NotOffered`) naming the one it has."""
        raise NotOffered(f"EPay top-up is not offered here; the price of {amount} units by card is "
                         "POST /api/user/stripe/amount")

    def _money(self, amount: int) -> float:
        if not self.enabled:
            raise Forbidden("online top-up is not enabled")
        minimum = int(self.options["StripeMinTopUp"])
        if not minimum <= amount <= AMOUNT_MAX:
            raise BadRequest(f"amount: must be between {minimum} and {AMOUNT_MAX}")
        return round(amount * float(self.options["StripeUnitPrice"]), 2)

    # ---- opening a checkout -----------------------------------------------------------------------------

    def _return_url(self, given: str | None, field: str, default_path: str) -> str:
        server = str(self.options["ServerAddress"]).rstrip("/")
        if not server:
            raise BadRequest(f"{field}: ServerAddress is not set, so no return address can be checked")
        if not given:
            return server + default_path
        parts, home = urlsplit(given), urlsplit(server)
        if parts.scheme not in ("http", "https") or not parts.netloc or \
                (parts.scheme, parts.netloc.lower()) != (home.scheme, home.netloc.lower()):
            raise BadRequest(f"{field}: must be an absolute http(s) URL on {server}")
        return given

    async def pay(self, payer: Principal, amount: int, *, payment_method: str = "", success_url: str = "",
                  cancel_url: str = "") -> str:
        """Store a pending order and open its checkout; the payment link. A provider failure marks the
        order failed and is a 500 `payment provider error`."""
        money = self._money(amount)
        success = self._return_url(success_url, "success_url", "/console/log")
        cancel = self._return_url(cancel_url, "cancel_url", "/console/topup")
        trade_no = f"ref_{secrets.token_hex(16)}"
        async with self.db.transaction() as tx:
            user = await UserRepository(tx).get(payer.id)
            await TopUpRepository(tx).add(TopUp(
                user_id=payer.id, amount=amount, money=money, trade_no=trade_no,
                payment_method=(payment_method or PROVIDER)[:32], payment_provider=PROVIDER,
                create_time=self.clock.now_s(), complete_time=0, status=TopUpStatus.PENDING))
        request = CheckoutRequest(
            api_base=str(self.options["StripeApiBase"]), api_secret=str(self.options["StripeApiSecret"]),
            trade_no=trade_no, price_id=str(self.options["StripePriceId"]), quantity=amount,
            success_url=success, cancel_url=cancel, customer=user.stripe_customer if user else "",
            customer_email=user.email if user else "")
        try:
            return await self.checkout.open_session(request)
        except CheckoutFailed as failed:
            log.warning("checkout for order %s failed: %s", trade_no, failed)
            async with self.db.transaction() as tx:
                await TopUpRepository(tx).transition(trade_no, (TopUpStatus.PENDING,), TopUpStatus.FAILED)
            raise PaymentProviderError() from None

    # ---- the webhook ------------------------------------------------------------------------------------

    async def receive(self, signature_header: str, body: bytes) -> Outcome:
        """One delivery, as received: 409 while online top-up is off (a refusal that may pass later: the
        provider delivers the event again), 413 over `WEBHOOK_MAX_BODY`, 400 unless genuinely signed within
        the tolerance and an event; then `handle`. Each delivery is counted once, by its outcome."""
        if not self.enabled:
            metrics.payment_webhook(PROVIDER, Outcome.DISABLED)
            raise PaymentsNotReady()
        if len(body) > WEBHOOK_MAX_BODY:
            metrics.payment_webhook(PROVIDER, Outcome.TOO_LARGE)
            raise PayloadTooLarge(f"a webhook delivery is at most {WEBHOOK_MAX_BODY // 1024} KB")
        try:
            verify(signature_header, body, str(self.options["StripeWebhookSecret"]), self.clock.now())
        except BadSignature as refused:
            log.info("payment webhook refused: %s", refused)
            metrics.payment_webhook(PROVIDER, Outcome.BAD_SIGNATURE)
            raise BadRequest(f"Stripe-Signature: {refused}") from None
        try:
            event = Event.parse(json.loads(body))
        except (ValueError, RecursionError):
            metrics.payment_webhook(PROVIDER, Outcome.BAD_EVENT)
            raise BadRequest("body: not valid JSON") from None
        except BadRequest:
            metrics.payment_webhook(PROVIDER, Outcome.BAD_EVENT)
            raise
        try:
            outcome = await self.handle(event)
        except PaymentNotRecorded:
            metrics.payment_webhook(PROVIDER, Outcome.NOT_RECORDED)
            raise
        metrics.payment_webhook(PROVIDER, outcome)
        return outcome

    async def handle(self, event: Event) -> Outcome:
        """Apply a verified event once; raises `PaymentNotRecorded` (500) when it could not commit."""
        if event.type == COMPLETED and (event.text("status"), event.text("payment_status")) != ("complete",
                                                                                                "paid"):
            outcome = Outcome.IGNORED  # an unpaid completion: the async events settle it later
        elif event.type in (COMPLETED, ASYNC_SUCCEEDED, ASYNC_FAILED, EXPIRED):
            outcome = await self._apply(event)
        else:
            outcome = Outcome.IGNORED
        log.info("payment event %s (%s) for order %r: %s", event.id, event.type,
                 event.text("client_reference_id")[:64], outcome)
        return outcome

    async def _room(self, event: Event, per_unit: float) -> str | None:
        """Before the transaction: why its owner's balance cannot take its credit now, or None — an early
        answer; the decision is `CreditOutbox.record`'s, in the transaction."""
        if event.type not in (COMPLETED, ASYNC_SUCCEEDED):
            return None
        async with self.db.transaction() as tx:
            order = await TopUpRepository(tx).by_trade_no(event.text("client_reference_id"))
        if order is None or order.status != TopUpStatus.PENDING:
            return None
        return await self.credits.refusal(order.user_id, order.quota(per_unit))

    async def _apply(self, event: Event) -> Outcome:
        credit: Credit | None = None
        per_unit = self.options.settings.quota_per_unit
        try:
            refused = await self._room(event, per_unit)
            try:
                async with self.db.transaction() as tx:
                    outcome, credit = await self._in_transaction(tx, event, refused, per_unit)
            except CreditRefused as no_room:  # decided under the owner's row lock: rolled back; hold it
                async with self.db.transaction() as tx:
                    outcome, credit = await self._in_transaction(tx, event, str(no_room), per_unit)
        except IntegrityError:  # the same event, committed by a concurrent delivery meanwhile
            async with self.db.transaction() as tx:
                if await PaymentEventRepository(tx).seen(PROVIDER, event.id):
                    return Outcome.REPLAYED
            log.warning("payment event %s could not be recorded (integrity error)", event.id)
            raise PaymentNotRecorded() from None
        except (SQLAlchemyError, OSError) as exc:
            log.warning("payment event %s could not be recorded: %s", event.id, type(exc).__name__)
            raise PaymentNotRecorded() from None
        if credit is not None:
            await self.credits.deliver(credit)  # committed: the outbox retries it until applied
        return outcome

    async def _in_transaction(self, tx: AsyncSession, event: Event, refused: str | None, per_unit: float
                              ) -> tuple[Outcome, Credit | None]:
        events = PaymentEventRepository(tx)
        if await events.seen(PROVIDER, event.id):
            return Outcome.REPLAYED, None
        trade_no = event.text("client_reference_id")
        orders = TopUpRepository(tx)
        order = await orders.by_trade_no(trade_no)
        if order is None or order.payment_provider != PROVIDER or order.status != TopUpStatus.PENDING:
            return Outcome.NO_ORDER, None
        now = self.clock.now_s()

        async def move(to: TopUpStatus, outcome: Outcome, complete_time: int | None = None
                       ) -> tuple[Outcome, Credit | None]:
            if not await orders.transition(trade_no, (TopUpStatus.PENDING,), to, complete_time=complete_time):
                return Outcome.NO_ORDER, None  # moved meanwhile by someone else
            await events.add(provider=PROVIDER, event_id=event.id, type_=event.type, trade_no=trade_no,
                             received_at=now)
            return outcome, None

        if event.type == ASYNC_FAILED:
            return await move(TopUpStatus.FAILED, Outcome.FAILED)
        if event.type == EXPIRED:
            return await move(TopUpStatus.EXPIRED, Outcome.EXPIRED)
        total, currency = event.session.get("amount_total"), event.text("currency")
        if isinstance(total, bool) or not isinstance(total, int) or total != round(order.money * 100) \
                or currency.lower() != "usd":
            log.warning("payment event %s: order %s paid %r %r, expected %d usd; held for review",
                        event.id, trade_no, total, currency[:8], round(order.money * 100))
            return await move(TopUpStatus.REVIEW, Outcome.REVIEW)
        if refused is not None:  # paid, but the balance cannot take the credit: an admin completes it later
            log.warning("payment event %s: order %s paid, but its credit is refused (%s); held for review",
                        event.id, trade_no, refused)
            return await move(TopUpStatus.REVIEW, Outcome.REVIEW)
        outcome, _ = await move(TopUpStatus.SUCCESS, Outcome.CREDITED, complete_time=now)
        if outcome is not Outcome.CREDITED:
            return outcome, None
        customer = event.text("customer")
        if customer:
            await remember_customer(tx, order.user_id, customer)
        quota = order.quota(per_unit)
        if quota <= 0:
            return outcome, None
        owner = await UserRepository(tx).get(order.user_id, include_deleted=True)
        credit = Credit(ref=credit_ref(trade_no), user_id=order.user_id, amount=quota, log=LogEntry(
            type=LogType.TOPUP, username=owner.username if owner else "", quota=quota,
            content=f"online top-up {trade_no} paid: {order.amount} units, +{quota} quota",
            other={"payment": {"provider": PROVIDER, "event_id": event.id}}, created_at=now).to_log())
        await self.credits.record(tx, credit)
        return outcome, credit
