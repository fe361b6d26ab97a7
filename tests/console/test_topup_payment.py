"""Buying quota online from the console's Top up page in Chromium, against a real `tollway serve`
(embedded) whose payment provider is the fake Stripe (tests/fakes/payment.py) on a thread of its own.

    https page    Pay opens the checkout page the provider answered (`https://checkout.stripe.test/…`,
                  answered here by the test in place of the provider's site)
    anything else a `pay_link` that is not an https: address (`javascript:`, `data:`, plain `http:`, a
                  scheme-relative or credentialed link), put in the server's reply by the test as a hostile
                  or broken server would, opens nothing: the page says so and stays where it is, and no
                  script runs or policy violation happens (the server refuses such links itself:
                  tests/test_payments_checkout_url.py)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, Route, expect

from tests.console.browser import Server, on_thread, set_option, sign_in, tollway
from tests.fakes.payment import FakeStripe
from tests.payments import API_KEY, PRICE, WEBHOOK_SECRET

pytestmark = pytest.mark.slow

REFUSED = "The payment provider did not answer an https: checkout page; nothing was opened."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with tollway(tmp_path_factory.mktemp("console-pay"), set_up=True) as running:
        yield running


@pytest.fixture(scope="module")
def stripe(server: Server) -> Iterator[FakeStripe]:
    with on_thread(FakeStripe(api_key=API_KEY, price_id=PRICE)) as fake:
        assert isinstance(fake, FakeStripe)
        settings = {"StripeApiSecret": API_KEY, "StripeWebhookSecret": WEBHOOK_SECRET, "StripePriceId": PRICE,
                    "StripeApiBase": fake.url, "ServerAddress": server.url}
        for key, value in settings.items():
            set_option(server, key, value)
        yield fake


def pay(page: Page, server: Server) -> None:
    """Sign a new user in, open Top up, and pay for 3 units."""
    name, _ = server.add_user()
    sign_in(page, server, name)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Top up").click()
    expect(page.get_by_role("heading", level=1, name="Top up")).to_be_visible()
    page.get_by_label("Amount").fill("3")
    page.get_by_role("button", name="Pay", exact=True).click()


def test_pay_opens_the_providers_https_checkout_page(page: Page, server: Server, stripe: FakeStripe) -> None:
    page.route("https://checkout.stripe.test/**", lambda route: route.fulfill(
        status=200, content_type="text/html", body="<!doctype html><title>Checkout</title><h1>Checkout</h1>"))
    pay(page, server)
    expect(page).to_have_url(re.compile(r"^https://checkout\.stripe\.test/c/pay/cs_test_[0-9a-f]+$"))
    assert page.url.rsplit("/", 1)[1] in stripe.sessions


@pytest.mark.parametrize("link", ["javascript:alert(document.cookie)", "data:text/html,<h1>pay</h1>",
                                  "http://evil.example/pay", "//evil.example/pay",
                                  "https://checkout.stripe.test@evil.example/pay"])
def test_pay_opens_nothing_but_an_https_page(page: Page, server: Server, stripe: FakeStripe,
                                             link: str) -> None:
    left: list[str] = []

    def elsewhere(route: Route) -> None:
        left.append(route.request.url)
        route.abort()

    page.route("http://evil.example/**", elsewhere)
    page.route("https://evil.example/**", elsewhere)
    page.route("**/api/user/stripe/pay", lambda route: route.fulfill(
        status=200, content_type="application/json",
        body=json.dumps({"success": True, "message": "success", "data": {"pay_link": link}})))
    pay(page, server)
    expect(page.get_by_role("alert")).to_have_text(REFUSED)
    expect(page).to_have_url(f"{server.url}/topup")
    assert left == []
