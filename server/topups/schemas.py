"""Request and reply schemas of the top-up record routes (`/api/user/topup…`, except redeeming); how a
top-up order is shown (docs/api/payments.md#top-up-records)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from models.topups import TopUp
from server.web.pagination import PageQuery
from server.web.schema import QueryTextRule, Reply, Schema, TextRule


class TopUpListQuery(PageQuery):
    keyword: Annotated[str, QueryTextRule()] = Field("", description="a part of the trade number")


class TopUpComplete(Schema):
    trade_no: Annotated[str, TextRule(min_len=1)] = Field(description="the order's trade number")


class TopUpView(Reply):
    """A top-up order."""

    id: int
    user_id: int
    username: str = Field(description="the owner's username")
    amount: int = Field(description="units ordered; one unit buys QuotaPerUnit quota")
    money: float = Field(description="what was paid")
    trade_no: str
    payment_method: str
    payment_provider: str
    create_time: int
    complete_time: int = Field(description="unix seconds, 0 until completed")
    status: str = Field(description="pending, success, failed, expired or review")

    @classmethod
    def of(cls, order: TopUp, username: str = "") -> TopUpView:
        return cls(id=order.id, user_id=order.user_id, username=username, amount=order.amount,
                   money=order.money, trade_no=order.trade_no, payment_method=order.payment_method,
                   payment_provider=order.payment_provider, create_time=order.create_time,
                   complete_time=order.complete_time, status=order.status)
