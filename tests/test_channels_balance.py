"""Channel balances (docs/api/channels.md#channel-tests-balances-and-model-lists), over HTTP against the real
app on SQLite and on MariaDB + Redis, with the fake OpenAI-compatible upstream on 127.0.0.1 answering every
provider's balance endpoint:

- `GET /api/channel/update_balance/:id` reads the balance the way each supported type publishes it
  (OpenAI and Custom: subscription limit minus usage; OpenRouter: credits minus usage; Moonshot,
  SiliconFlow, DeepSeek: in CNY, turned into USD with `USDExchangeRate`), stores `balance` and
  `balance_updated_time`, answers `{balance}` at the top level and in `data`; other types and multi-key
  channels are a 400 naming the type, an unknown channel a 404, a failing upstream a 502 without the key;
- `GET /api/channel/update_balance` updates every enabled single-key channel of those types → `{updated,
  failed}`; a balance of zero or less disables the channel (with `auto_ban` 1, and the option on), which
  stops routing at once; a second run while one runs is a 409.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from backend.locks import exclusive
from core.enums import ChannelStatus
from models.channels import Channel
from server.channels.balances import BALANCE_LOCK
from tests.conftest import _Databases, _stack
from tests.fakes.openai import FakeOpenAI
from tests.harness import Running, data_of, make_config, serve
from tests.test_channels import OPENAI, admin_of, create, fails, routed, row_of

OPENROUTER, MOONSHOT, SILICONFLOW, DEEPSEEK, CUSTOM = 20, 25, 40, 43, 8


@pytest.fixture(params=["sqlite", "mariadb+redis"])
async def balance_app(request: pytest.FixtureRequest, databases: _Databases, tmp_path: Path
                      ) -> AsyncIterator[Running]:
    async for stack in _stack(request.param, databases):
        config = make_config(stack.database_url, tmp_path, stack.redis_url, stack.prefix,
                             admin_upstream_timeout=1.0)
        async with serve(config) as running:
            yield running


def balance_of(body: dict[str, Any]) -> float:
    assert body["success"] is True and body["message"] == ""
    assert body["data"] == {"balance": body["balance"]}
    return float(body["balance"])


async def test_each_supported_type_reads_its_balance_in_usd(balance_app: Running,
                                                            openai_fake: FakeOpenAI) -> None:
    admin = await admin_of(balance_app)
    openai_fake.balance, openai_fake.used = 73.0, 12.5
    expected = {OPENAI: 73.0, CUSTOM: 73.0, OPENROUTER: 73.0, MOONSHOT: 10.0, SILICONFLOW: 10.0,
                DEEPSEEK: 10.0}  # CNY at the default 7.3 per USD
    for channel_type, usd in expected.items():
        key = f"sk-key-of-{channel_type}"
        [cid] = await create(admin, type=channel_type, base_url=openai_fake.url, key=key, models="m")
        reply = await admin.get(f"/api/channel/update_balance/{cid}")
        assert reply.status_code == 200, (channel_type, reply.text)
        assert balance_of(reply.json()) == pytest.approx(usd), channel_type
        assert openai_fake.last.headers["authorization"] == f"Bearer {key}"
        row = await row_of(balance_app, cid)
        assert row is not None and row.balance == pytest.approx(usd)
        assert row.balance_updated_time >= balance_app.clock.now_s() - 60
        assert row.status == ChannelStatus.ENABLED  # a single update never changes a status
    usage = openai_fake.requests_to("/v1/dashboard/billing/usage")[-1]
    today = datetime.datetime.fromtimestamp(balance_app.clock.now_s(), datetime.UTC).date()
    assert usage.query == {"start_date": today.replace(day=1).isoformat(), "end_date": today.isoformat()}
    openai_fake.balance_currency = "USD"
    [usd_account] = await create(admin, type=DEEPSEEK, base_url=openai_fake.url, models="m")
    assert balance_of((await admin.get(f"/api/channel/update_balance/{usd_account}")).json()) == 73.0


async def test_balance_refusals(balance_app: Running, openai_fake: FakeOpenAI) -> None:
    admin = await admin_of(balance_app)
    [gemini] = await create(admin, base_url=openai_fake.url)
    fails(await admin.get(f"/api/channel/update_balance/{gemini}"), 400,
          "balance query is not supported for channel type Gemini (24)")
    [multi] = await create(admin, "multi_to_single", type=OPENAI, base_url=openai_fake.url, key="sk-a\nsk-b")
    fails(await admin.get(f"/api/channel/update_balance/{multi}"), 400,
          "balance query is not supported for multi-key channels")
    fails(await admin.get("/api/channel/update_balance/999999"), 404)
    # a Custom channel cannot be saved without its address any more; one stored before that rule has none
    [custom] = await create(admin, type=CUSTOM, models="m", base_url=openai_fake.url)
    async with balance_app.state.db.transaction() as tx:
        stored = await tx.get(Channel, custom)
        assert stored is not None
        stored.base_url = ""
    fails(await admin.get(f"/api/channel/update_balance/{custom}"), 400, "base_url:")
    assert openai_fake.received == []

    secret = "sk-balance-secret-0123456789abcdef"
    [cid] = await create(admin, type=OPENAI, base_url=openai_fake.url, key=secret, models="m")
    for mode in ("401", "garbage", "hang", "huge"):
        openai_fake.echo_key = True
        openai_fake.fail(mode)
        reply = await admin.get(f"/api/channel/update_balance/{cid}")
        assert reply.status_code == 502, (mode, reply.text)
        assert secret not in reply.text
    row = await row_of(balance_app, cid)
    assert row is not None and row.balance_updated_time == 0


async def test_updating_every_balance(balance_app: Running) -> None:
    state = balance_app.state
    admin = await admin_of(balance_app)
    async with FakeOpenAI() as rich, FakeOpenAI() as broke, FakeOpenAI() as failing:
        broke.balance = 0.0
        failing.fail("500")
        [ok] = await create(admin, type=OPENAI, base_url=rich.url, models="m-ok")
        [used_up] = await create(admin, type=MOONSHOT, base_url=broke.url, models="m-used-up")
        [kept] = await create(admin, type=SILICONFLOW, base_url=broke.url, auto_ban=0, models="m-kept")
        [bad] = await create(admin, type=DEEPSEEK, base_url=failing.url, models="m-bad")
        [multi] = await create(admin, "multi_to_single", type=OPENAI, base_url=rich.url, key="sk-a\nsk-b")
        [off] = await create(admin, type=OPENAI, base_url=rich.url, status=2)
        [gemini] = await create(admin, base_url=rich.url)
        assert data_of(await admin.get("/api/channel/update_balance")) == {"updated": 3, "failed": 1}
        statuses = {cid: (await row_of(balance_app, cid)).status  # type: ignore[union-attr]
                    for cid in (ok, used_up, kept, bad, multi, off, gemini)}
        assert statuses == {ok: 1, used_up: 3, kept: 1, bad: 1, multi: 1, off: 2, gemini: 1}
        assert routed(balance_app, "m-used-up", types=frozenset({MOONSHOT})) is None
        assert state.channels.get(used_up).status == ChannelStatus.AUTO_DISABLED  # type: ignore[union-attr]
        row = await row_of(balance_app, used_up)
        assert row is not None and "balance is used up" in row.other_info
        assert (await row_of(balance_app, ok)).balance == 100.0  # type: ignore[union-attr]
        assert (await row_of(balance_app, off)).balance_updated_time == 0  # type: ignore[union-attr]

        async with exclusive(state.backend, BALANCE_LOCK, ttl=60):  # a run on another worker or node
            fails(await admin.get("/api/channel/update_balance"), 409,
                  "a balance update of every channel is already running")
        # with the option off, a used-up balance is stored and nothing is disabled
        await state.options.put("AutomaticDisableChannelEnabled", False)
        [other] = await create(admin, type=MOONSHOT, base_url=broke.url, models="m-other")
        assert data_of(await admin.get("/api/channel/update_balance")) == {"updated": 3, "failed": 1}
        assert (await row_of(balance_app, other)).status == ChannelStatus.ENABLED  # type: ignore[union-attr]
