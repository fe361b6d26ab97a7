"""Options whose value becomes quota are bounded by the balance cap (2^53 − 1, core/money.py), and so is a
new user's starting balance made of them (docs/api/options.md#options, server/auth/service.py).

Proved here:
- every quota option (`QuotaForNewUser`, `QuotaForInvitee`, `QuotaForInviter`, `PreConsumedQuota`,
  `QuotaRemindThreshold`; the test also finds any new integer option named for quota) takes every amount
  from 0 to the cap and refuses every amount above it with a 400 naming the option and the cap, the
  stored value unchanged (property test over the HTTP route);
- the cap core/ knows is the quota engine's (`quota.types.BALANCE_MAX`);
- a value stored before the bound existed reads as the cap;
- registering with QuotaForNewUser and QuotaForInvitee whose sum passes the cap starts the user at the
  cap exactly — live and in SQL, which then agree through later changes — and logs the part of the
  invitee's reward that was paid; the inviter's rewards (`aff_quota`, `aff_history_quota`) stop at the
  cap too, on every stack.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from core import money
from core.enums import LogType
from core.option_registry import REGISTRY
from models.logs import Log
from models.system import OptionRepository
from models.tables import User
from models.users import UserRepository
from quota.types import BALANCE_MAX
from tests.harness import Api, Running, add_user, data_of, fails, logged_in

QUOTA_OPTIONS = ("QuotaForNewUser", "QuotaForInvitee", "QuotaForInviter", "PreConsumedQuota",
                 "QuotaRemindThreshold")
PASSWORD = "password123"


def test_every_integer_option_named_for_quota_is_a_quota_option() -> None:
    named = {key for key, spec in REGISTRY.items() if spec.kind == "int" and "quota" in key.lower()}
    assert named == set(QUOTA_OPTIONS)
    assert money.BALANCE_MAX == BALANCE_MAX == 2**53 - 1
    assert {key: (REGISTRY[key].bounds.minimum, REGISTRY[key].bounds.maximum) for key in QUOTA_OPTIONS} == {
        key: (0, BALANCE_MAX) for key in QUOTA_OPTIONS}  # what the Settings page is told, too


async def root_of(app: Running) -> Api:
    await add_user(app.state, "root", role=100)
    return await logged_in(app, "root")


@pytest.fixture
async def root(embedded_app: Running) -> Api:
    """Root's session on the embedded app (one for all the examples hypothesis runs on it)."""
    return await root_of(embedded_app)


async def stored(app: Running, key: str) -> str | None:
    async with app.state.db.transaction() as tx:
        return (await OptionRepository(tx).all()).get(key)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(key=st.sampled_from(QUOTA_OPTIONS),
       above=st.one_of(st.integers(BALANCE_MAX + 1, 2**63 - 1), st.integers(BALANCE_MAX + 1, 10**30)),
       within=st.one_of(st.just(BALANCE_MAX), st.just(0), st.integers(0, BALANCE_MAX)),
       as_text=st.booleans())
async def test_a_quota_option_takes_up_to_the_cap_and_refuses_more(
        embedded_app: Running, root: Api, key: str, above: int, within: int, as_text: bool) -> None:
    def value(n: int) -> Any:
        return str(n) if as_text else n

    data_of(await root.put("/api/option/", json={"key": key, "value": value(within)}))
    assert await stored(embedded_app, key) == str(within)
    message = fails(await root.put("/api/option/", json={"key": key, "value": value(above)}), 400, f"{key}: ",
                    prefix=True)
    if above < 2**63:  # larger ones are refused as out of range before the bound is looked at
        assert str(BALANCE_MAX) in message, message
    assert await stored(embedded_app, key) == str(within)  # unchanged
    attr = REGISTRY[key].attr
    if attr is not None:
        assert getattr(embedded_app.state.options.settings, attr) == within


async def test_a_value_stored_before_the_bound_reads_as_the_cap(embedded_app: Running) -> None:
    async with embedded_app.state.db.transaction() as tx:
        for key in ("QuotaForNewUser", "QuotaForInvitee", "QuotaForInviter", "PreConsumedQuota"):
            await OptionRepository(tx).put(key, str(BALANCE_MAX + 2))
    await embedded_app.state.options.reload()
    s = embedded_app.state.options.settings
    assert (s.quota_for_new_user, s.quota_for_invitee, s.quota_for_inviter, s.pre_consumed_quota) == \
        (BALANCE_MAX,) * 4


async def books(app: Running, user_id: int) -> tuple[int, int]:
    """(live balance, SQL balance) once the quota sync has caught up."""
    await app.state.quota_sync.drain()
    async with app.state.db.transaction() as tx:
        user = await UserRepository(tx).get(user_id)
    assert user is not None
    return await app.state.quota.balance("user", user_id), user.quota


async def test_registration_never_starts_a_balance_above_the_cap(app: Running) -> None:
    root = await root_of(app)
    for key, value in (("QuotaForNewUser", BALANCE_MAX - 10), ("QuotaForInvitee", BALANCE_MAX),
                       ("QuotaForInviter", BALANCE_MAX)):
        data_of(await root.put("/api/option/", json={"key": key, "value": value}))
    inviter = await add_user(app.state, "inviter")
    code = data_of(await (await logged_in(app, "inviter")).get("/api/user/aff"))
    anonymous = app.client()
    for name in ("invited1", "invited2"):
        data_of(await anonymous.post("/api/user/register", json={"username": name, "password": PASSWORD,
                                                                  "aff_code": code}))
    data_of(await anonymous.post("/api/user/register", json={"username": "alone", "password": PASSWORD}))

    for name, paid in (("invited1", 10), ("invited2", 10), ("alone", None)):
        api = await logged_in(app, name)
        uid = data_of(await api.get("/api/user/self"))["id"]
        expected = BALANCE_MAX if paid else BALANCE_MAX - 10
        assert await books(app, uid) == (expected, expected), name
        async with app.state.db.transaction() as tx:
            logs = (await tx.scalars(select(Log).where(Log.user_id == uid))).all()
        assert [(x.type, x.quota) for x in logs] == ([(LogType.SYSTEM, paid)] if paid else [])
        for n in range(5):  # the live balance and SQL keep agreeing, exactly, through later changes
            data_of(await root.post("/api/user/manage", json={"id": uid, "action": "add_quota",
                                                              "mode": "subtract", "value": 1 + n}))
        assert await books(app, uid) == (expected - 15, expected - 15), name
        room = BALANCE_MAX - (expected - 15)
        fails(await root.post("/api/user/manage", json={"id": uid, "action": "add_quota", "mode": "add",
                                                        "value": room + 1}), 409, "largest supported amount")

    async with app.state.db.transaction() as tx:
        held = await tx.scalar(select(User).where(User.id == inviter))
    assert held is not None
    assert (held.aff_count, held.aff_quota, held.aff_history_quota) == (2, BALANCE_MAX, BALANCE_MAX)
