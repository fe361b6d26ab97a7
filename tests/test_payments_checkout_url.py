"""The provider's checkout `url` is where the payer's browser goes next: it is handed on only when it is an
absolute `https:` address (server/payments/checkout.py `payer_url`).

    refused     a session whose `url` is `javascript:`, `data:`, `vbscript:`, plain `http:`, relative,
                scheme-relative, with a user name (`https://checkout.example@evil.example/`), with white space
                or a control character (`java\\tscript:`), or longer than `URL_MAX`: `stripe/pay` answers 500
                `payment provider error` with no link, and the order is failed (the real app, the fake
                provider on a socket)
    any scheme  every scheme but https is refused; so is every address with a character outside printable
                ASCII (property tests, hypothesis)
    accepted    Stripe's own shape, also with a port or an upper-case scheme
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from core.enums import TopUpStatus
from models.topups import TopUp
from server.payments.checkout import URL_MAX, CheckoutFailed, payer_url
from tests.fakes.payment import FakeStripe
from tests.harness import Running, add_user, data_of, fails, logged_in
from tests.payments import API_KEY, PRICE, configure

HOSTILE = [
    "javascript:alert(document.cookie)//{id}",
    "JavaScript:alert(1)",
    "java\tscript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:msgbox(1)",
    "http://checkout.stripe.test/c/pay/{id}",
    "/c/pay/{id}",
    "//evil.example/c/pay/{id}",
    "https://checkout.stripe.test@evil.example/c/pay/{id}",
    "https://user:pass@checkout.stripe.test/c/pay/{id}",
    "https:///c/pay/{id}",
    "https://checkout.stripe.test:99999/c/pay/{id}",
    " https://checkout.stripe.test/c/pay/{id}",
    "https://checkout.stripe.test/c/pay/{id}\nSet-Cookie: x=1",
    "https://checkout.stripé.test/c/pay/{id}",
    "https://checkout.stripe.test/c/pay/{id}#" + "a" * URL_MAX,
]


@pytest.fixture
async def stripe_fake() -> AsyncIterator[FakeStripe]:
    async with FakeStripe(api_key=API_KEY, price_id=PRICE) as fake:
        yield fake


async def test_a_checkout_url_that_is_not_https_fails_the_order(embedded_app: Running,
                                                                 stripe_fake: FakeStripe) -> None:
    await add_user(embedded_app.state, "payer")
    payer = await logged_in(embedded_app, "payer")
    await configure(embedded_app.state, stripe_fake)
    for url in HOSTILE:
        stripe_fake.checkout_url = url
        reply = await payer.post("/api/user/stripe/pay", json={"amount": 3})
        fails(reply, 500, "payment provider error")
        assert "pay_link" not in reply.text and "script" not in reply.text, (url, reply.text)
    async with embedded_app.state.db.transaction() as tx:
        orders = (await tx.scalars(select(TopUp).order_by(TopUp.id))).all()
    assert [order.status for order in orders] == [TopUpStatus.FAILED] * len(HOSTILE)
    assert len(stripe_fake.sessions) == len(HOSTILE)  # each was opened at the provider, none handed on

    for url in ("https://checkout.stripe.test/c/pay/{id}#fidkdWxOYHwn", "HTTPS://checkout.stripe.test:8443/{id}"):
        stripe_fake.checkout_url = url
        link = data_of(await payer.post("/api/user/stripe/pay", json={"amount": 3}))["pay_link"]
        assert link == url.replace("{id}", list(stripe_fake.sessions)[-1])


SCHEME = st.from_regex(r"[A-Za-z][A-Za-z0-9+.\-]{0,9}", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(scheme=SCHEME, rest=st.sampled_from(["//checkout.example/pay/1", "checkout.example/pay", "alert(1)"]))
@example(scheme="http", rest="//checkout.example/pay/1").via("plain http")
@example(scheme="javascript", rest="alert(1)").via("script")
def test_every_scheme_but_https_is_refused(scheme: str, rest: str) -> None:
    url = f"{scheme}:{rest}"
    if scheme.lower() == "https" and rest.startswith("//"):
        assert payer_url(url) == url
        return
    with pytest.raises(CheckoutFailed):
        payer_url(url)


@settings(max_examples=300, deadline=None)
@given(before=st.text(max_size=5), odd=st.characters().filter(lambda c: not "!" <= c <= "~"),
       after=st.text(max_size=5))
def test_a_character_outside_printable_ascii_is_refused(before: str, odd: str, after: str) -> None:
    with pytest.raises(CheckoutFailed):
        payer_url(f"https://checkout.example/{before}{odd}{after}")
