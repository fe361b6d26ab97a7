"""The balance routes (`ChannelBalances`, server/channels/balances.py): one channel's balance, or every
channel's."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.channels.balance_schemas import BalanceData, BalanceReply, BalanceRun
from server.channels.schemas import ChannelPath
from server.web.access import Access, Wire, route
from server.web.envelope import ok
from server.web.state import services_of

bp = Blueprint("channel_balances")


@route(bp, "GET", "/api/channel/update_balance/<channel_id>", access=Access.ADMIN, path_params=ChannelPath,
       reply=BalanceReply, wire=Wire.RAW, calls_upstream=True)
async def update_balance(request: Request, channel_id: int) -> HTTPResponse:
    """Ask a channel's upstream for its balance and store it.
    For single-key channels of type OpenAI, Custom, OpenRouter, Moonshot, SiliconFlow and DeepSeek;
    amounts in CNY are turned into USD with `USDExchangeRate`. `balance` (USD) is in the reply and in
    `data`. Another type or a multi-key channel is a 400; a failed query a 502."""
    data = BalanceData.of(await services_of(request).channels.balances.update_balance(channel_id))
    return ok(data, extra=dict(data))


@route(bp, "GET", "/api/channel/update_balance", access=Access.ADMIN, reply=BalanceRun, calls_upstream=True)
async def update_all_balances(request: Request) -> HTTPResponse:
    """Update the balance of every enabled single-key channel whose type publishes one.
    Eight at a time, each given 10 seconds; a balance of zero or less disables the channel when
    `AutomaticDisableChannelEnabled` and its `auto_ban` is 1. The reply counts the channels updated and
    those that failed; one run at a time in the whole deployment (a second one is a 409)."""
    return ok(await services_of(request).channels.balances.update_all_balances())
