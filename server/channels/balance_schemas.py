"""Reply schemas of the balance routes (server/channels/balances.py, `ChannelBalances`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from server.web.schema import Reply, Schema


class BalanceData(Reply):
    """A channel's balance just read from its upstream."""

    balance: float = Field(description="in USD (an upstream that counts in CNY is converted)")

    @classmethod
    def of(cls, balance: float) -> BalanceData:
        return cls(balance=balance)


class BalanceReply(Schema):
    """The envelope with `balance` next to `data` too (where new-api's clients read it)."""

    success: Literal[True]
    message: str
    balance: float = Field(description="USD")
    data: BalanceData


class BalanceRun(Reply):
    """The outcome of updating every channel's balance."""

    updated: int = Field(description="channels whose balance was read and stored")
    failed: int = Field(description="channels whose upstream did not tell")

    @classmethod
    def of(cls, *, updated: int, failed: int) -> BalanceRun:
        return cls(updated=updated, failed=failed)
