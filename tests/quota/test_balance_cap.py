"""The balance cap (2^53 − 1, `BALANCE_MAX`) counts the calls in flight, on every store (in process with
SQLite, Redis with MariaDB and PostgreSQL, a Redis Cluster).

A hold takes quota out of the live balance until its call ends; a release gives it back. So the balance
a credit must keep within the cap is the live one plus the open holds — what it returns to — or a credit
made while a call is in flight, then a release, leaves a balance the stores no longer compute exactly.
Proved here: a credit that fits the live balance but not the balance with its holds is refused
(BalanceOutOfRange, nothing changed) and the release then stays within the cap; so is an override past
the cap that the open holds hide; `ceilings` and `can_credit` count the holds; an edit with
`load=False` on an account the store has not loaded raises NeedsLoad and loads nothing (the admin's
edits run it under a SQL row lock).
"""

from __future__ import annotations

import pytest

from quota.store import NeedsLoad
from quota.types import BALANCE_MAX, BalanceOutOfRange
from tests.quota.env import QuotaEnv


async def test_a_credit_counts_the_holds_it_would_return_to(quota_env: QuotaEnv) -> None:
    engine = quota_env.engine
    uid = await quota_env.add_user(BALANCE_MAX - 1000)
    hold = await engine.reserve(uid, 800)
    assert await engine.balance("user", uid) == BALANCE_MAX - 1800
    with pytest.raises(BalanceOutOfRange):
        await engine.credit("user", uid, 1500, ref="over-with-holds")  # fits the live balance only
    assert await engine.balance("user", uid) == BALANCE_MAX - 1800  # nothing changed
    assert not await engine.can_credit("user", uid, 1001)
    assert await engine.can_credit("user", uid, 1000)
    assert await engine.ceilings("user", [uid]) == {uid: BALANCE_MAX - 1000}
    await engine.credit("user", uid, 1000, ref="to-the-cap")
    assert await engine.release(hold)
    assert await engine.balance("user", uid) == BALANCE_MAX
    with pytest.raises(BalanceOutOfRange):
        await engine.credit("user", uid, 1, ref="past-the-cap")
    await quota_env.sync.drain()
    assert (await quota_env.user_row(uid)).quota == BALANCE_MAX


async def test_an_override_is_the_balance_with_its_holds(quota_env: QuotaEnv) -> None:
    engine = quota_env.engine
    uid = await quota_env.add_user(5000)
    hold = await engine.reserve(uid, 300)
    with pytest.raises(BalanceOutOfRange):  # the live balance would be BALANCE_MAX − 200, until the release
        await engine.set("user", uid, BALANCE_MAX + 100, ref="override-past-the-cap")
    adjusted = await engine.set("user", uid, 2000, ref="override")
    assert adjusted.after == 1700 and await engine.ceilings("user", [uid]) == {uid: 2000}
    await engine.release(hold)
    assert await engine.balance("user", uid) == 2000


async def test_without_loading_an_edit_of_an_unloaded_account_changes_nothing(quota_env: QuotaEnv) -> None:
    engine = quota_env.engine
    uid = await quota_env.add_user(70)
    assert await engine.ceilings("user", [uid]) == {}  # not loaded: nothing to tell, nothing loaded
    for edit in (engine.credit("user", uid, 5, ref="a", load=False),
                 engine.set("user", uid, 5, ref="b", load=False),
                 engine.debit("user", uid, 5, ref="c", load=False)):
        with pytest.raises(NeedsLoad):
            await edit
    assert await engine.balances("user", [uid]) == {}
    assert (await engine.credit("user", uid, 5, ref="a")).after == 75  # the same ref, loading: applied
