"""Request and reply schemas of the payment routes (`/api/user/topup/info`, `/api/user/stripe/…`)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from server.web.schema import Int64, Reply, Schema, TextRule


class TopUpInfo(Reply):
    """What the top-up page needs to know."""

    enable_stripe_topup: bool = Field(description="online top-up is configured")
    stripe_min_topup: int = Field(description="the fewest units an order may buy")
    stripe_unit_price: float = Field(description="USD per unit")
    amount_options: list[Any] = Field(description="preset amounts the page offers")
    enable_online_topup: bool = Field(description="always false (no other online method)")
    enable_creem_topup: bool = Field(description="always false")
    pay_methods: list[Any] = Field(description="always empty")
    min_topup: int = Field(description="same as stripe_min_topup")
    discount: dict[str, Any] = Field(description="always empty: no discounts")

    @classmethod
    def of(cls, *, enabled: bool, minimum: int, unit_price: float, amount_options: list[Any]) -> TopUpInfo:
        """Stripe's settings; the other methods new-api knows are off."""
        return cls(enable_stripe_topup=enabled, stripe_min_topup=minimum, stripe_unit_price=unit_price,
                   amount_options=amount_options, enable_online_topup=False, enable_creem_topup=False,
                   pay_methods=[], min_topup=minimum, discount={})


class StripeAmount(Schema):
    amount: Int64 = Field(description="units to buy; one unit is one USD of quota")


class EpayAmount(Schema):
    amount: Int64 = Field(description="units to buy (new-api's EPay quote; not offered here)")


class StripePay(Schema):
    amount: Int64 = Field(description="units to buy; one unit is one USD of quota")
    payment_method: Annotated[str, TextRule(trim=True, max_len=32)] = Field(
        "", description="recorded on the order (default stripe)")
    success_url: Annotated[str, TextRule(trim=True, max_len=2048)] = Field(
        "", description="where the payer returns after paying; on ServerAddress (default /console/log)")
    cancel_url: Annotated[str, TextRule(trim=True, max_len=2048)] = Field(
        "", description="where the payer returns after cancelling; on ServerAddress (default /console/topup)")


class PayLink(Reply):
    """Where to pay for the order just opened."""

    pay_link: str = Field(description="the provider's checkout page for this order: send the payer there")

    @classmethod
    def of(cls, link: str) -> PayLink:
        return cls(pay_link=link)


class WebhookEvent(Schema):
    """A provider event, as signed and delivered (documentation only: the raw bytes are verified first)."""

    id: str = Field(description="the event id; an id already recorded changes nothing")
    type: str = Field(description="checkout.session.completed, …async_payment_succeeded, "
                                  "…async_payment_failed, …expired; others are ignored")
    data: dict[str, Any] = Field(description="`object`: the checkout session (client_reference_id, "
                                             "amount_total, currency, status, payment_status, customer)")
