"""How a top-up order is shown (docs/API.md#top-up-records)."""

from __future__ import annotations

from typing import Any

from models.topups import TopUp


def topup_view(order: TopUp) -> dict[str, Any]:
    return {
        "id": order.id, "user_id": order.user_id, "amount": order.amount, "money": order.money,
        "trade_no": order.trade_no, "payment_method": order.payment_method,
        "payment_provider": order.payment_provider, "create_time": order.create_time,
        "complete_time": order.complete_time, "status": order.status,
    }
