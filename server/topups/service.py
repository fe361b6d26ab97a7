"""The rules of top-up records: the lists, and completing an order by hand
(docs/api/payments.md#top-up-records).

Completing is one SQL transaction — the order's conditional move from `pending` or `review` to
`success` and, only if it moved, the credit recorded beside it — followed by the credit through the quota
engine, keyed by the order (`topup:<trade_no>`), so the order's quota is added exactly once, whoever
completes it and even when the process dies between the two (server/credits.py). The payment webhook
completes orders the same way. A credit the owner's balance cannot take (the quota engine's exact range,
counting the credits already decided for the owner) is refused in that transaction, under the owner's
row lock: it rolls back — 409, the order still completable.
"""

from __future__ import annotations

from typing import Any

from core.enums import LogType, TopUpStatus
from core.identity import Principal
from core.log_entry import LogEntry, admin_info
from models.db import Database
from models.topups import TopUpRepository, credit_ref
from models.users import UserRepository
from server.clock import Clock
from server.components.options import Options
from server.credits import Credit, CreditOutbox, CreditRefused
from server.errors import BadRequest, Conflict, NotFound
from server.topups.schemas import TopUpView
from server.web.pagination import Page

COMPLETABLE = (TopUpStatus.PENDING, TopUpStatus.REVIEW)


class TopUpService:
    def __init__(self, *, db: Database, credits: CreditOutbox, options: Options, clock: Clock) -> None:
        self.db = db
        self.credits = credits
        self.options = options
        self.clock = clock

    async def list_orders(self, page: Page, *, keyword: str = "", user_id: int | None = None
                          ) -> dict[str, Any]:
        async with self.db.transaction() as tx:
            rows, total = await TopUpRepository(tx).page(offset=page.offset, limit=page.size, user_id=user_id,
                                                         keyword=keyword)
            names = await UserRepository(tx).usernames(r.user_id for r in rows)
        return page.payload([TopUpView.of(r, names.get(r.user_id, "")) for r in rows], total)

    async def complete(self, actor: Principal, trade_no: str) -> None:
        """Mark a pending (or held for review) order paid and credit its quota once; an order already
        completed is left as it is. A credit the owner's balance cannot take is refused in the transaction
        that would move the order (409, the order unchanged)."""
        if not trade_no:
            raise BadRequest("trade_no: is required")
        now = self.clock.now_s()
        per_unit = self.options.settings.quota_per_unit
        async with self.db.transaction() as tx:
            seen = await TopUpRepository(tx).by_trade_no(trade_no)
        if seen is not None and seen.status in COMPLETABLE:  # else the UPDATE below refuses it
            reason = await self.credits.refusal(seen.user_id, seen.quota(per_unit))
            if reason is not None:
                raise Conflict(f"the top-up order is not completed: {reason}")
        async with self.db.transaction() as tx:
            orders = TopUpRepository(tx)
            if not await orders.transition(trade_no, COMPLETABLE, TopUpStatus.SUCCESS, complete_time=now):
                order = await orders.by_trade_no(trade_no)
                if order is None:
                    raise NotFound("top-up order not found")
                if order.status == TopUpStatus.SUCCESS:
                    return  # completed before: never credited twice
                raise Conflict(f"the top-up order is {order.status}, it cannot be completed")
            order = await orders.by_trade_no(trade_no)
            assert order is not None  # this transaction has just moved it
            quota = order.quota(per_unit)  # the units and the owner never change: the amount checked
            if quota <= 0:
                return
            owner = await UserRepository(tx).get(order.user_id, include_deleted=True)
            credit = Credit(ref=credit_ref(order.trade_no), user_id=order.user_id, amount=quota, log=LogEntry(
                type=LogType.TOPUP, username=owner.username if owner else "", quota=quota,
                content=f"admin {actor.user.username} completed top-up {order.trade_no}: {order.amount} "
                        f"units, +{quota} quota",
                other=admin_info(actor), created_at=now).to_log())
            try:
                await self.credits.record(tx, credit)  # decided here, under the owner's row lock
            except CreditRefused as refused:  # rolls the transaction back: the order does not move
                raise Conflict(f"the top-up order is not completed: {refused}") from None
        await self.credits.deliver(credit)
