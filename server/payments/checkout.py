"""Opening a checkout session at the payment provider (Stripe's API, or anything that speaks it).

`POST {StripeApiBase}/v1/checkout/sessions`, form-encoded, `Authorization: Bearer <API secret>` and
`Idempotency-Key: <trade_no>` (a retried request can never open a second session for one order). The
call goes through the worker's upstream client — the same pooled transport and destination policy as
every other outgoing call — within `timeout` seconds for the whole exchange, reading at most `MAX_BODY`
bytes of the answer. Any failure (no connection, timeout, non-2xx, an answer without `url`) is a
`CheckoutFailed` whose message never carries the API secret.

The session's `url` is where the payer's browser is sent next, so it is the provider's word put into our
page: it is accepted only as an absolute `https:` address with a host, no user name or password (the
`https://checkout.example@evil.example/` disguise), nothing but printable ASCII (a browser drops tabs and
line breaks, so `java\tscript:` would be `javascript:`) and at most `URL_MAX` characters (`payer_url`).
Anything else — `javascript:`, `data:`, plain `http:`, a relative path — fails the checkout like any other
bad answer. No exception is made for a provider addressed over `http:` (a test fake, a local mock): the
link is followed by the payer's browser, not by this server, and a checkout page is `https:` wherever a
real payer pays (the tests' fake Stripe answers `https:` links too).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

import httpx

from server.redaction import redact
from server.upstream.client import BodyTooLarge, Upstream, read_capped
from server.upstream.providers.base import UpstreamCall

log = logging.getLogger("tollway.payments")

TIMEOUT = 30.0
MAX_BODY = 1024 * 1024
SESSIONS_PATH = "/v1/checkout/sessions"
URL_MAX = 8192


class CheckoutFailed(Exception):
    """The provider did not open a session; the message is safe to log."""


def payer_url(url: object) -> str:
    """`url` if a payer's browser may be sent there (see the module docstring), else `CheckoutFailed`."""
    if not isinstance(url, str) or not url:
        raise CheckoutFailed("the provider's answer has no url")
    refused = CheckoutFailed("the provider's checkout url is not an https: address a payer may be sent to")
    if len(url) > URL_MAX or not all("!" <= c <= "~" for c in url):
        raise refused
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a port that is not a number in range)
    except ValueError:
        raise refused from None
    if parts.scheme != "https" or not parts.hostname or parts.username is not None \
            or parts.password is not None:
        raise refused
    return url


@dataclass(frozen=True, slots=True)
class CheckoutRequest:
    api_base: str
    api_secret: str
    trade_no: str
    price_id: str
    quantity: int
    success_url: str
    cancel_url: str
    customer: str = ""
    customer_email: str = ""

    def form(self) -> list[tuple[str, str]]:
        fields = [("mode", "payment"), ("client_reference_id", self.trade_no),
                  ("metadata[trade_no]", self.trade_no), ("line_items[0][price]", self.price_id),
                  ("line_items[0][quantity]", str(self.quantity)), ("success_url", self.success_url),
                  ("cancel_url", self.cancel_url)]
        if self.customer:
            fields.append(("customer", self.customer))
        else:
            fields.append(("customer_creation", "always"))
            if self.customer_email:
                fields.append(("customer_email", self.customer_email))
        return fields


class Checkout:
    """Opens checkout sessions through the worker's upstream client."""

    def __init__(self, upstream: Upstream, *, timeout: float = TIMEOUT, max_body: int = MAX_BODY) -> None:
        self.upstream = upstream
        self.timeout = timeout
        self.max_body = max_body

    async def open_session(self, req: CheckoutRequest) -> str:
        """The URL the payer is sent to (an `https:` address: `payer_url`), else `CheckoutFailed`."""
        call = UpstreamCall("POST", req.api_base.rstrip("/") + SESSIONS_PATH, {
            "Authorization": f"Bearer {req.api_secret}", "Idempotency-Key": req.trade_no,
            "Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json",
        }, urlencode(req.form()).encode())
        try:
            async with asyncio.timeout(self.timeout):
                response = await self.upstream.open(call, seconds=self.timeout)
                try:
                    body = await read_capped(response, self.max_body)
                finally:
                    await response.close()
        except (TimeoutError, httpx.TimeoutException):
            raise CheckoutFailed(f"no answer within {self.timeout:g} s") from None
        except BodyTooLarge:
            raise CheckoutFailed("the provider's answer is too large") from None
        except (httpx.HTTPError, ValueError, UnicodeError, OSError) as exc:
            raise CheckoutFailed(redact(f"the provider could not be reached ({exc})", (req.api_secret,))
                                 ) from None
        if not 200 <= response.status < 300:
            raise CheckoutFailed(f"the provider answered {response.status}")
        try:
            url = json.loads(body).get("url")
        except (ValueError, AttributeError):
            url = None
        return payer_url(url)
