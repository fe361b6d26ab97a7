"""The rules of redemption codes: the admin's list, search, create, edit and delete, and redeeming
(docs/api/payments.md#redemption-codes).

Redeeming is one SQL transaction — the code's single conditional UPDATE (enabled, live, not expired →
used by the caller) and, only if it changed the row, the credit recorded beside it — followed by the
credit through the quota engine, keyed by the code (`redeem:<id>`), so the quota is added exactly once
even when the process dies between the two (server/credits.py). Whether the caller's balance can take
the credit (its exact range, 2^53 − 1) is decided inside that transaction, under the lock of the
caller's row, counting the credits already decided for them: one that does not fit rolls the
transaction back — a 409, the code unused — even when another redemption is decided at the same
instant on another worker or node. (A check before the transaction answers the obvious case early.)
"""

from __future__ import annotations

import uuid
from typing import Any

from core.enums import LogType, RedemptionStatus
from core.identity import Principal
from core.log_entry import LogEntry
from models.db import Database
from models.redemptions import KEY_LENGTH, Redemption, RedemptionRepository
from models.users import UserRepository
from server.clock import Clock
from server.credits import Credit, CreditOutbox, CreditRefused
from server.errors import BadRequest, Conflict, NotFound, TollwayError
from server.redemptions.schemas import RedemptionView
from server.web.pagination import Page

EDITABLE = ("name", "quota", "expired_time")


def unusable(code: Redemption | None, now: int) -> TollwayError | None:
    """Why the code cannot be redeemed now, or None when it can (what the conditional UPDATE requires)."""
    if code is None or code.deleted_at is not None:
        return BadRequest("redemption code not found")
    if code.status == RedemptionStatus.USED:
        return Conflict("redemption code already used")
    if code.status != RedemptionStatus.ENABLED:
        return BadRequest("redemption code is disabled")
    if code.expired_time and code.expired_time < now:
        return BadRequest("redemption code has expired")
    return None


def refusal(code: Redemption | None, now: int) -> TollwayError:
    """Why a code could not be redeemed (it was read again after the conditional update changed nothing)."""
    return unusable(code, now) or Conflict("redemption code already used")  # (changed meanwhile)


class RedemptionService:
    def __init__(self, *, db: Database, credits: CreditOutbox, clock: Clock) -> None:
        self.db = db
        self.credits = credits
        self.clock = clock

    def _check_expiry(self, expired_time: int) -> int:
        if expired_time != 0 and expired_time <= self.clock.now_s():
            raise BadRequest("expired_time: must be 0 (never) or a time in the future")
        return expired_time

    # ---- admin --------------------------------------------------------------------------------------

    async def list_codes(self, page: Page, keyword: str = "") -> dict[str, Any]:
        async with self.db.transaction() as tx:
            rows, total = await RedemptionRepository(tx).page(offset=page.offset, limit=page.size,
                                                              keyword=keyword)
            names = await UserRepository(tx).usernames(r.used_user_id for r in rows)
        return page.payload([RedemptionView.of(r, names.get(r.used_user_id, "")) for r in rows], total)

    async def get_code(self, code_id: int) -> RedemptionView:
        async with self.db.transaction() as tx:
            code = await RedemptionRepository(tx).get(code_id)
            names = await UserRepository(tx).usernames([code.used_user_id] if code is not None else [])
        if code is None:
            raise NotFound("redemption code not found")
        return RedemptionView.of(code, names.get(code.used_user_id, ""))

    async def create_codes(self, actor: Principal, *, name: str, quota: int, count: int,
                           expired_time: int) -> list[str]:
        """`count` enabled codes in one transaction (all or none); their keys."""
        self._check_expiry(expired_time)
        now = self.clock.now_s()
        rows = [Redemption(user_id=actor.id, key=uuid.uuid4().hex, status=RedemptionStatus.ENABLED, name=name,
                           quota=quota, created_time=now, redeemed_time=0, expired_time=expired_time,
                           used_user_id=0)
                for _ in range(count)]
        async with self.db.transaction() as tx:
            await RedemptionRepository(tx).add_many(rows)
        return [r.key for r in rows]

    async def update_code(self, code_id: int, changes: dict[str, Any], *, status_only: bool
                          ) -> RedemptionView:
        """`changes` holds the fields sent; with `status_only` only `status` (1 or 2) is applied, else
        `name`, `quota` and `expired_time`. A used code cannot be edited."""
        if status_only:
            status = changes.get("status")
            if status is None:
                raise BadRequest("status: is required")
            if status not in (RedemptionStatus.ENABLED, RedemptionStatus.DISABLED):
                raise BadRequest("status: must be 1 (enabled) or 2 (disabled)")
            values: dict[str, Any] = {"status": status}
        else:
            values = {k: changes[k] for k in EDITABLE if changes.get(k) is not None}
            if "expired_time" in values:
                self._check_expiry(values["expired_time"])
        async with self.db.transaction() as tx:
            codes = RedemptionRepository(tx)
            code = await codes.get(code_id, lock=True)  # a redeem of this code waits, or went first
            if code is None:
                raise NotFound("redemption code not found")
            if code.status == RedemptionStatus.USED:
                raise Conflict("redemption code already used")
            if values:
                await codes.update_fields(code.id, **values)
                for field, value in values.items():
                    setattr(code, field, value)
            return RedemptionView.of(code)

    async def delete_code(self, code_id: int) -> None:
        async with self.db.transaction() as tx:
            if not await RedemptionRepository(tx).soft_delete(code_id, self.clock.now_s()):
                raise NotFound("redemption code not found")

    async def delete_invalid(self) -> int:
        async with self.db.transaction() as tx:
            return await RedemptionRepository(tx).delete_invalid(self.clock.now_s())

    # ---- redeeming ----------------------------------------------------------------------------------

    async def redeem(self, principal: Principal, key: str) -> int:
        """Use the code for the caller; the quota it adds (live at once on every worker and node). A credit
        the caller's balance cannot take is refused in the transaction that would use the code (409, the
        code unchanged)."""
        now = self.clock.now_s()
        if len(key) > KEY_LENGTH:  # no code has a longer key: nothing to look up
            raise refusal(None, now)
        async with self.db.transaction() as tx:
            seen = await RedemptionRepository(tx).by_key(key)
        if seen is not None and unusable(seen, now) is None:  # else the UPDATE below refuses it
            reason = await self.credits.refusal(principal.id, seen.quota)
            if reason is not None:
                raise Conflict(f"redemption code not used: {reason}")
        async with self.db.transaction() as tx:
            codes = RedemptionRepository(tx)
            if not await codes.redeem(key, principal.id, now):
                raise refusal(await codes.by_key(key), now)
            code = await codes.by_key(key)
            assert code is not None  # this transaction has just changed it
            if seen is None or code.quota != seen.quota:  # edited since it was checked: roll back
                raise Conflict("redemption code was changed meanwhile; redeem it again")
            credit = Credit(ref=f"redeem:{code.id}", user_id=principal.id, amount=code.quota, log=LogEntry(
                type=LogType.TOPUP, username=principal.user.username, quota=code.quota,
                content=f"redeemed code #{code.id} ({code.name}): +{code.quota} quota",
                created_at=now).to_log())
            try:
                await self.credits.record(tx, credit)  # decided here, under the caller's row lock
            except CreditRefused as refused:  # rolls the transaction back: the code stays unused
                raise Conflict(f"redemption code not used: {refused}") from None
        await self.credits.deliver(credit)
        return code.quota
