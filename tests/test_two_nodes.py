"""Two nodes (two app instances) on one database (MariaDB, then PostgreSQL) and one Redis: an admin
change made on one node applies on the other from its next request (a disabled user's access token
refused, a demoted admin refused), and a quota change made on one node is the balance the other node
shows."""

from __future__ import annotations

import asyncio

from sqlalchemy import select

from models.logs import Log
from models.users import UserRepository
from tests.harness import Running, add_user, logged_in


async def eventually_status(api_call: object, expected: int, seconds: float = 1.0) -> int:
    status = 0
    for _ in range(int(seconds / 0.05) + 1):
        status = (await api_call()).status_code  # type: ignore[operator]
        if status == expected:
            return status
        await asyncio.sleep(0.05)
    return status


async def test_disabling_a_user_on_one_node_refuses_them_on_the_other(nodes: tuple[Running, Running]) -> None:
    one, two = nodes
    await add_user(one.state, "root", role=100)
    uid = await add_user(one.state, "alice")
    alice = await logged_in(two, "alice")
    token = (await alice.get("/api/user/token")).json()["data"]
    by_token = two.client()
    by_token.user_id, by_token.token = uid, token
    assert (await by_token.get("/api/user/self")).status_code == 200  # now cached on node two
    root = await logged_in(one, "root")
    assert (await root.post("/api/user/manage", json={"id": uid, "action": "disable"})).status_code == 200
    assert await eventually_status(lambda: by_token.get("/api/user/self"), 403) == 403
    assert (await alice.get("/api/user/self")).status_code == 401  # the session was revoked


async def test_a_demotion_on_one_node_applies_on_the_other(nodes: tuple[Running, Running]) -> None:
    one, two = nodes
    await add_user(one.state, "root", role=100)
    aid = await add_user(one.state, "boss", role=10)
    boss = await logged_in(two, "boss")
    assert (await boss.get("/api/user/")).status_code == 200
    root = await logged_in(one, "root")
    assert (await root.post("/api/user/manage", json={"id": aid, "action": "demote"})).status_code == 200
    assert await eventually_status(lambda: boss.get("/api/user/"), 401) == 401  # demotion revokes sessions
    boss_again = await logged_in(two, "boss")
    assert (await boss_again.get("/api/user/")).status_code == 403


async def test_a_quota_change_on_one_node_is_the_balance_on_the_other(nodes: tuple[Running, Running]) -> None:
    one, two = nodes
    await add_user(one.state, "root", role=100)
    uid = await add_user(one.state, "carol", quota=100)
    root_one = await logged_in(one, "root")
    root_two = await logged_in(two, "root")
    reply = await root_one.post("/api/user/manage", json={"id": uid, "action": "add_quota", "mode": "add",
                                                          "value": 50})
    assert reply.json()["data"]["quota"] == 150
    assert (await root_two.get(f"/api/user/{uid}")).json()["data"]["quota"] == 150
    reply = await root_two.post("/api/user/manage", json={"id": uid, "action": "add_quota",
                                                          "mode": "override", "value": 7})
    assert reply.json()["data"]["quota"] == 7
    await one.state.quota_sync.drain()
    await two.state.quota_sync.drain()
    async with one.state.db.transaction() as tx:
        user = await UserRepository(tx).get(uid)
        manage_logs = (await tx.scalars(select(Log).where(Log.user_id == uid).order_by(Log.id))).all()
    assert user is not None and user.quota == 7
    assert [(x.type, x.quota) for x in manage_logs] == [(3, 50), (3, 7)]
    assert manage_logs[0].content.endswith("balance 100 -> 150")
    assert manage_logs[1].content.endswith("balance 150 -> 7")
    assert '"admin_username":"root"' in manage_logs[1].other
