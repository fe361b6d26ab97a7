"""A fake Stripe-compatible payment provider on a real socket, and webhook deliveries signed like
Stripe signs them.

- `POST /v1/checkout/sessions` — form-encoded, `Authorization: Bearer <key>` checked against
  `valid_keys`: the form must carry `mode=payment`, `client_reference_id`, `metadata[trade_no]` (equal
  to it), `line_items[0][price]` (= `price_id` when set), a positive whole `line_items[0][quantity]`,
  `success_url` and `cancel_url`; the answer is a checkout session `{id, object, url,
  client_reference_id, amount_total: quantity × unit_amount, currency: "usd", status, payment_status,
  customer, metadata}`, its `url` made from `checkout_url` (Stripe's `https:` page by default; a test sets a
  hostile one). A repeated `Idempotency-Key` answers the session it opened the first time, as Stripe does.
  Anything else is Stripe's 404 or 400 error object.
- The failure switch of every fake (`fail("500")`, `fail("drop")`, …) answers Stripe's `api_error`.

`signed(secret, payload, t)` is the `Stripe-Signature` header for a delivery; `session_event(...)` a
checkout-session event as Stripe sends it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from typing import Any
from urllib.parse import parse_qsl

from tests.fakes.base import FakeServer, Recorded, Reply, json_reply

UNIT_AMOUNT = 800  # cents per unit: the price the fake's Price is worth
REQUIRED = ("mode", "client_reference_id", "metadata[trade_no]", "line_items[0][price]",
            "line_items[0][quantity]", "success_url", "cancel_url")


def stripe_error(status: int, message: str, type_: str = "invalid_request_error",
                 param: str | None = None) -> Reply:
    error: dict[str, Any] = {"message": message, "type": type_}
    if param is not None:
        error["param"] = param
    return json_reply(status, {"error": error})


class FakeStripe(FakeServer):
    def __init__(self, *, api_key: str = "sk_test_fake", price_id: str = "price_fake") -> None:
        super().__init__(valid_keys=[api_key])
        self.price_id = price_id
        self.checkout_url = "https://checkout.stripe.test/c/pay/{id}"
        """The `url` of a new session; `{id}` is replaced by the session's id."""
        self.sessions: dict[str, dict[str, Any]] = {}  # by id
        self._by_idempotency: dict[str, dict[str, Any]] = {}

    def form(self, request: Recorded) -> dict[str, str]:
        return dict(parse_qsl(request.body.decode(), keep_blank_values=True))

    def api_key(self, request: Recorded) -> str | None:
        auth = request.headers.get("authorization", "")
        return auth[7:] if auth.startswith("Bearer ") else None

    def key_error(self, request: Recorded, key: str | None) -> Reply:
        if key is None:
            return stripe_error(401, "You did not provide an API key.")
        return stripe_error(401, "Invalid API Key provided.")

    def error_reply(self, mode: str, request: Recorded) -> Reply:
        status = int(mode)
        return stripe_error(status, "An error occurred with our connection to Stripe.",
                            "api_error" if status >= 500 else "invalid_request_error")

    def route(self, request: Recorded) -> Reply:
        if (request.method, request.path) != ("POST", "/v1/checkout/sessions"):
            return stripe_error(404, f"Unrecognized request URL ({request.method}: {request.path}).")
        if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            return stripe_error(400, "Invalid request: expected a form body.")
        form = self.form(request)
        for name in REQUIRED:
            if not form.get(name):
                return stripe_error(400, f"Missing required param: {name}.", param=name)
        if form["mode"] != "payment" or form["metadata[trade_no]"] != form["client_reference_id"]:
            return stripe_error(400, "Invalid mode or metadata.", param="mode")
        if form["line_items[0][price]"] != self.price_id:
            return stripe_error(400, f"No such price: '{form['line_items[0][price]']}'",
                                param="line_items[0][price]")
        quantity = form["line_items[0][quantity]"]
        if not quantity.isdigit() or int(quantity) < 1:
            return stripe_error(400, "Invalid integer: quantity", param="line_items[0][quantity]")
        if "customer" not in form and form.get("customer_creation") != "always":
            return stripe_error(400, "customer or customer_creation is expected", param="customer")
        key = request.headers.get("idempotency-key", "")
        if key and key in self._by_idempotency:
            return json_reply(200, self._by_idempotency[key])
        session_id = f"cs_test_{secrets.token_hex(12)}"
        session = {"id": session_id, "object": "checkout.session",
                   "url": self.checkout_url.replace("{id}", session_id),
                   "client_reference_id": form["client_reference_id"],
                   "amount_total": int(quantity) * UNIT_AMOUNT, "currency": "usd", "status": "open",
                   "payment_status": "unpaid", "customer": form.get("customer"),
                   "metadata": {"trade_no": form["metadata[trade_no]"]}}
        self.sessions[session_id] = session
        if key:
            self._by_idempotency[key] = session
        return json_reply(200, session)


def signature(secret: str, payload: bytes, t: int) -> str:
    return hmac.new(secret.encode(), f"{t}.".encode() + payload, hashlib.sha256).hexdigest()


def signed(secret: str, payload: bytes, t: int | None = None, *, extra_v1: tuple[str, ...] = ()) -> str:
    """The `Stripe-Signature` header Stripe sends for `payload` at `t` (default now)."""
    t = int(time.time()) if t is None else t
    parts = [f"t={t}", *(f"v1={v}" for v in extra_v1), f"v1={signature(secret, payload, t)}",
             "v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39"]
    return ",".join(parts)


def session_event(trade_no: str | None, *, amount_total: int, type_: str = "checkout.session.completed",
                  event_id: str | None = None, currency: str = "usd", status: str = "complete",
                  payment_status: str = "paid", customer: str | None = "cus_fake") -> bytes:
    """A checkout-session event as Stripe delivers it (the exact bytes to sign and post)."""
    event = {
        "id": event_id or f"evt_{secrets.token_hex(12)}", "object": "event", "api_version": "2024-06-20",
        "created": int(time.time()), "type": type_, "livemode": False, "pending_webhooks": 1,
        "data": {"object": {
            "id": f"cs_test_{secrets.token_hex(12)}", "object": "checkout.session",
            "client_reference_id": trade_no, "amount_total": amount_total, "currency": currency,
            "customer": customer, "status": status, "payment_status": payment_status, "mode": "payment",
            "metadata": {"trade_no": trade_no}}},
    }
    return json.dumps(event).encode()
