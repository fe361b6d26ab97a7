"""Invitations (docs/api/accounts.md#invitations): your invitation code, and moving the rewards it earned
(`aff_quota`) into your balance.

The move is one SQL transaction — ONE conditional update that takes the amount from `aff_quota` only
if it is there (`WHERE aff_quota >= :amount`), and the credit recorded beside it — followed by the credit
through the quota engine with a key of its own, so the amount reaches the live balance exactly once, even
when the process dies between the two (server/credits.py). Concurrent transfers can never move more
than the rewards held. A credit the balance cannot take (the quota engine's exact range, counting the
credits already decided for the caller) is refused in that transaction, under the caller's row lock:
it rolls back — 409, the rewards untouched. The rewards themselves are paid at registration
(server/auth/service.py), held to the same range.
"""

from __future__ import annotations

import secrets

from sqlalchemy.exc import IntegrityError

from core.enums import LogType
from core.identity import Principal
from core.log_entry import LogEntry
from models.db import Database
from models.users import UserRepository
from server.clock import Clock
from server.components.options import Options
from server.components.user_rules import fresh_aff_code
from server.credits import Credit, CreditOutbox, CreditRefused
from server.errors import BadRequest, Conflict, NotFound

CODE_ATTEMPTS = 3  # a fresh code that another user took at the same instant is drawn again


def _amount(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


class InvitationService:
    def __init__(self, *, db: Database, credits: CreditOutbox, options: Options, clock: Clock) -> None:
        self.db = db
        self.credits = credits
        self.options = options
        self.clock = clock

    async def code(self, principal: Principal) -> str:
        """The caller's invitation code, made on first use and never changed afterwards."""
        async with self.db.transaction() as tx:
            user = await UserRepository(tx).get(principal.id)
        if user is not None and user.aff_code:
            return user.aff_code
        for attempt in range(CODE_ATTEMPTS):
            try:
                async with self.db.transaction() as tx:
                    users = UserRepository(tx)
                    user = await users.get_for_update(principal.id)  # two first calls: one makes it
                    if user is None:
                        raise NotFound("user not found")
                    if user.aff_code:
                        return user.aff_code
                    code = await fresh_aff_code(users)
                    await users.update_fields(user.id, aff_code=code)
                    return code
            except IntegrityError:
                if attempt == CODE_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    async def transfer(self, principal: Principal, amount: int) -> None:
        """Move `amount` (at least `QuotaPerUnit`) from the caller's rewards to their balance."""
        per_unit = self.options.settings.quota_per_unit
        if amount < max(per_unit, 1):
            raise BadRequest(f"quota: must be at least {_amount(per_unit)} (QuotaPerUnit)")
        reason = await self.credits.refusal(principal.id, amount)
        if reason is not None:
            raise Conflict(f"invitation rewards not moved: {reason}")
        async with self.db.transaction() as tx:
            if not await UserRepository(tx).take_aff_quota(principal.id, amount):
                raise BadRequest("quota: is more than your invitation rewards (aff_quota)")
            credit = Credit(ref=f"aff:{principal.id}:{secrets.token_hex(12)}", user_id=principal.id,
                            amount=amount, log=LogEntry(
                                type=LogType.SYSTEM, username=principal.user.username, quota=amount,
                                content=f"moved {amount} quota of invitation rewards to the balance",
                                created_at=self.clock.now_s()).to_log())
            try:
                await self.credits.record(tx, credit)  # decided here, under the caller's row lock
            except CreditRefused as refused:  # rolls the transaction back: the rewards stay
                raise Conflict(f"invitation rewards not moved: {refused}") from None
        await self.credits.deliver(credit)
