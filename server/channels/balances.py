"""`ChannelBalances` (docs/api/channels.md#channel-tests-balances-and-model-lists): ask a channel's upstream
for its account balance and store it. A service of its own: it writes a column nothing else writes and
runs its own cluster-wide run.

- One channel (`GET /api/channel/update_balance/:id`): a single-key channel of a type that publishes a
  balance (OpenAI, Custom, OpenRouter, Moonshot, SiliconFlow, DeepSeek: the wire of each is in
  `server/upstream/providers/balances.py`); any other type, or a multi-key channel, is a 400. The balance
  is stored in USD (an amount in CNY is divided by the `USDExchangeRate` option) with
  `balance_updated_time`.
- Every channel (`GET /api/channel/update_balance`): every enabled single-key channel of those types,
  eight at a time, each given 10 seconds, → how many were updated and how many failed. One run at a time
  in the whole deployment (a lock shared by every worker and node): a second one is a 409. A balance of
  zero or less disables the channel (status 3, routed at once everywhere) when
  `AutomaticDisableChannelEnabled` and the channel's `auto_ban` is 1. Its progress is published as it
  moves (`server/channels/runs.py` `Progress`, `GET /api/channel/progress?run=balance`).
"""

from __future__ import annotations

import datetime
import logging

from backend.base import KeyValue
from backend.locks import Busy, exclusive
from core.enums import ChannelRun, ChannelStatus
from core.multikey import MultiKeyState
from models.channels import ChannelRepository
from models.db import Database
from server.channels.balance_schemas import BalanceRun
from server.channels.key_rules import UNREADABLE_KEYS
from server.channels.runs import Progress, each, lock_ttl
from server.clock import Clock
from server.components.catalog import type_name
from server.components.channel_table import ChannelTable, RoutedChannel
from server.components.options import Options
from server.errors import BadRequest, Conflict, NotFound, UpstreamFailed
from server.metrics import DisableReason
from server.upstream.admin import UpstreamAdmin

log = logging.getLogger("tollway.channels")

BALANCE_LOCK = "lock:channel-balance"
BALANCE_CONCURRENCY = 8
BALANCE_SECONDS = 10.0  # each channel of a run, both requests included
USED_UP = "balance update: the balance is used up ({balance:.2f} USD)"


class ChannelBalances:
    """One channel's balance, or every channel's in one run."""

    def __init__(self, *, db: Database, channels: ChannelTable, options: Options, backend: KeyValue,
                 admin: UpstreamAdmin, clock: Clock) -> None:
        self.db = db
        self.channels = channels
        self.options = options  # the exchange rate and the automatic-disable switch
        self.backend = backend  # the cluster-wide lock of a run and its progress
        self.admin = admin  # the upstream's balance query
        self.clock = clock

    async def update_balance(self, channel_id: int) -> float:
        """`GET /api/channel/update_balance/:id` → the balance in USD, stored with its time."""
        async with self.db.transaction() as tx:
            row = await ChannelRepository(tx).get(channel_id)
        if row is None:
            raise NotFound("channel not found")
        if not self.admin.balance_supported(row.type):
            raise BadRequest(f"balance query is not supported for channel type {type_name(row.type)} "
                             f"({row.type})")
        if MultiKeyState.parse(row.channel_info).is_multi_key:
            raise BadRequest("balance query is not supported for multi-key channels")
        channel = self.channels.routed(row)
        if not channel.keys:
            raise Conflict(UNREADABLE_KEYS)
        return await self._update(channel, None)

    async def _update(self, channel: RoutedChannel, seconds: float | None) -> float:
        """Query, convert to USD and store the balance of `channel` → the balance."""
        target = self.admin.target(channel.type, channel.base_url, channel.header_override)
        today = datetime.datetime.fromtimestamp(self.clock.now_s(), datetime.UTC).date()
        money = await self.admin.balance(target, channel.keys[0], today, seconds=seconds, known=channel.keys)
        if money.currency == "USD":
            balance = money.amount
        elif money.currency == "CNY":
            balance = money.amount / self.options.settings.usd_exchange_rate
        else:
            raise UpstreamFailed(f"the balance is in {money.currency}, which cannot be converted to USD")
        balance = round(balance, 6)
        async with self.db.transaction() as tx:
            await ChannelRepository(tx).record_balance(channel.id, balance, self.clock.now_s())
        return balance

    async def update_all_balances(self) -> BalanceRun:
        """`GET /api/channel/update_balance` → `{updated, failed}` (see the module docstring)."""
        async with self.db.transaction() as tx:
            rows = await ChannelRepository(tx).with_statuses(
                (ChannelStatus.ENABLED,), sorted(self.admin.balance_types))
        channels = [self.channels.routed(row) for row in rows
                    if not MultiKeyState.parse(row.channel_info).is_multi_key]
        seconds = min(BALANCE_SECONDS, self.admin.timeout)
        ttl = lock_ttl(len(channels), BALANCE_CONCURRENCY, seconds)
        progress = Progress.start(self.backend, ChannelRun.BALANCE, len(channels), self.clock.now_s(), ttl)

        async def step(channel: RoutedChannel) -> None:
            try:
                if not channel.keys:
                    raise Conflict(UNREADABLE_KEYS)
                balance = await self._update(channel, seconds)
            except (UpstreamFailed, BadRequest, Conflict) as exc:
                log.info("channel %d: balance not updated: %s", channel.id, exc.message[:200])
                return await progress.failed_one(channel.id, channel.name, exc.message)
            except Exception:
                log.exception("channel %d: balance not updated", channel.id)
                return await progress.failed_one(channel.id, channel.name, "internal error")
            await progress.passed_one()
            settings = self.options.settings
            if balance <= 0 and channel.auto_ban and settings.automatic_disable_channel_enabled:
                await self.channels.auto_disable(channel, None, USED_UP.format(balance=balance),
                                                 why=DisableReason.BALANCE_USED_UP)

        try:
            async with exclusive(self.backend, BALANCE_LOCK, ttl=ttl):
                await progress.publish()
                try:
                    await each(channels, BALANCE_CONCURRENCY, step)
                finally:
                    await progress.finish(self.clock.now_s())
        except Busy:
            raise Conflict("a balance update of every channel is already running") from None
        return BalanceRun.of(updated=progress.state.passed, failed=progress.state.failed)

