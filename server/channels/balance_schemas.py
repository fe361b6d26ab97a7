"""Reply schemas of the balance routes (server/channels/balances.py, `ChannelBalances`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from server.web.schema import Schema


class BalanceData(Schema):
    balance: float = Field(description="USD")


class BalanceReply(Schema):
    """The envelope with `balance` next to `data` too (where new-api's clients read it)."""

    success: Literal[True]
    message: str
    balance: float = Field(description="USD")
    data: BalanceData


class BalanceRun(Schema):
    updated: int = Field(description="channels whose balance was read and stored")
    failed: int = Field(description="channels whose upstream did not tell")
