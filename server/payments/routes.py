"""`GET /api/user/topup/info`, `POST /api/user/stripe/amount`, `POST /api/user/stripe/pay`, the provider's
webhook `POST /api/stripe/webhook` (docs/api/payments.md#payments), and new-api's EPay quote `POST
/api/user/amount`, refused (docs/api/options.md#coming-from-new-api)."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.payments.schemas import EpayAmount, PayLink, StripeAmount, StripePay, TopUpInfo, WebhookEvent
from server.web.access import Access, route
from server.web.envelope import ok
from server.web.state import principal_of, services_of

bp = Blueprint("payments")

# new-api's console reads a quote or a checkout link only from a reply whose message is "success"
NEW_API_SUCCESS = "success"


@route(bp, "GET", "/api/user/topup/info", access=Access.USER, reply=TopUpInfo)
async def topup_info(request: Request) -> HTTPResponse:
    """What the top-up page offers.
    Whether online top-up is configured, the minimum order, the unit price and the preset amounts."""
    return ok(services_of(request).payments.info())


@route(bp, "POST", "/api/user/stripe/amount", access=Access.USER, body=StripeAmount, reply=str)
async def stripe_amount(request: Request, body: StripeAmount) -> HTTPResponse:
    """The price of an order.
    `amount` units × StripeUnitPrice, as a string with two decimals; 403 while online top-up is off,
    400 outside StripeMinTopUp–10000. The message is "success", which new-api's console checks for."""
    return ok(services_of(request).payments.price(body.amount), NEW_API_SUCCESS)


@route(bp, "POST", "/api/user/amount", access=Access.USER, body=EpayAmount, reply=str)
async def epay_amount(request: Request, body: EpayAmount) -> HTTPResponse:
    """new-api's price of an EPay order: not offered.
    Tollway takes payments by Stripe only, so this is always a 403 (200 with `NewApiCompatibleErrors`)
    whose message is also in `data`, where new-api's console reads it; the price of an order is
    `POST /api/user/stripe/amount`."""
    return ok(services_of(request).payments.epay_price(body.amount))


@route(bp, "POST", "/api/user/stripe/pay", access=Access.USER, body=StripePay, reply=PayLink)
async def stripe_pay(request: Request, body: StripePay) -> HTTPResponse:
    """Open a checkout for a new order.
    Stores a pending order and opens the provider's checkout session for it; answers the link to pay.
    A provider failure marks the order failed and answers 500 `payment provider error`. The message is
    "success", which new-api's console checks for."""
    link = await services_of(request).payments.pay(principal_of(request), body.amount,
                                                   payment_method=body.payment_method,
                                                   success_url=body.success_url, cancel_url=body.cancel_url)
    return ok(PayLink.of(link), NEW_API_SUCCESS)


@route(bp, "POST", "/api/stripe/webhook", access=Access.PUBLIC, body=WebhookEvent, passthrough=True,
       reply=None, real_statuses=True)
async def stripe_webhook(request: Request) -> HTTPResponse:
    """The payment provider's event delivery.
    Signed with `Stripe-Signature` (HMAC-SHA256 with the webhook secret over `t.body`, at most 300 s old);
    a paid checkout completes its pending order and credits its quota exactly once. Real statuses in every
    error mode (the provider takes any 2xx as delivered): 409 while online top-up is off; 400 unsigned,
    badly signed, stale or not an event; 200 once the event is recorded or ignored; 500 when it could not
    be recorded (the provider delivers it again after every non-2xx)."""
    await services_of(request).payments.receive(request.headers.get("stripe-signature", ""),
                                                request.body or b"")
    return ok()
