"""Ids are never given twice (docs/SHARED_STATE.md#ids-are-never-reused), on SQLite, MariaDB + Redis and
PostgreSQL + Redis.

For every resource whose id other records name — channels, API keys, users, redemption codes, top-up
orders, passkeys, logs — through the API: make two, delete the newer, make another: its id is above the
deleted one. Where the API only marks a row deleted (users, keys, codes) or deletes nothing (orders), the
row is then removed in SQL, the clean-up an operator may run: an id must not come back even then.

And across a restart of the database server: a MariaDB server of the test's own, killed (SIGKILL, InnoDB
recovers from its redo log) between the delete and the next create, and SQLite reopened, give no deleted
id again.

(On SQLite without AUTOINCREMENT every case here got the deleted id back: max(id) + 1.)
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import pytest
from sqlalchemy import Column, Table, delete, func, select

from models.base import Base
from models.channels import Channel
from models.db import Database
from models.keys import ApiKey
from models.logs import Log
from models.migrate import upgrade
from models.passkeys import PasskeyCredential
from models.redemptions import Redemption
from models.tables import User
from models.topups import TopUp
from tests.fakes.passkey import SoftPasskey
from tests.fakes.payment import FakeStripe
from tests.harness import Api, Running, add_user, data_of, logged_in, make_config, serve
from tests.mariadb_server import own_mariadb
from tests.passkey_flows import enable_passkeys, new_passkey, register, stored, verify
from tests.payments import API_KEY, PRICE, configure, open_order
from tests.services import _admin
from tests.test_channels import create as create_channels


@dataclass
class World:
    app: Running
    admin: Api
    alice: Api
    alice_id: int
    passkeys: dict[int, SoftPasskey] = field(default_factory=dict)


def id_of(model: type[Base]) -> Column[int]:
    return cast(Table, model.__table__).c.id


async def newest_id(app: Running, model: type[Base]) -> int:
    async with app.state.db.transaction() as tx:
        return int(await tx.scalar(select(func.max(id_of(model)))) or 0)


async def exists(app: Running, model: type[Base], row_id: int) -> bool:
    async with app.state.db.transaction() as tx:
        found = await tx.scalar(select(func.count()).where(id_of(model) == row_id))
    return bool(found)


async def purge(app: Running, model: type[Base], row_id: int) -> None:
    """Remove a row the API only marked deleted, as an operator's clean-up would."""
    async with app.state.db.transaction() as tx:
        await tx.execute(delete(model).where(id_of(model) == row_id))


# ---- each resource: make one (its id), delete one ------------------------------------------------------

async def make_channel(w: World) -> int:
    [channel_id] = await create_channels(w.admin)
    return channel_id


async def delete_channel(w: World, channel_id: int) -> None:
    data_of(await w.admin.delete(f"/api/channel/{channel_id}"))


async def make_key(w: World) -> int:
    made = data_of(await w.alice.post("/api/token/", json={"name": "k", "unlimited_quota": True}))
    return int(made["id"])


async def delete_key(w: World, key_id: int) -> None:
    data_of(await w.alice.delete(f"/api/token/{key_id}"))
    await purge(w.app, ApiKey, key_id)


async def make_user(w: World) -> int:
    name = f"u{secrets.token_hex(4)}"
    made = data_of(await w.admin.post("/api/user/", json={"username": name, "password": "password123"}))
    return int(made["id"])


async def delete_user(w: World, user_id: int) -> None:
    data_of(await w.admin.delete(f"/api/user/{user_id}"))
    await purge(w.app, User, user_id)


async def make_code(w: World) -> int:
    [key] = data_of(await w.admin.post("/api/redemption/", json={"name": "c", "quota": 10, "count": 1}))
    page = data_of(await w.admin.get("/api/redemption/search", params={"keyword": key}))
    [code] = page["items"]
    return int(code["id"])


async def delete_code(w: World, code_id: int) -> None:
    data_of(await w.admin.delete(f"/api/redemption/{code_id}"))
    await purge(w.app, Redemption, code_id)


async def make_order(w: World) -> int:
    return (await open_order(w.alice, w.app.state, 10)).id


async def delete_order(w: World, order_id: int) -> None:
    await purge(w.app, TopUp, order_id)  # orders are never deleted through the API


async def make_passkey(w: World) -> int:
    passkey = new_passkey(w.alice_id)
    row = await stored(w.app, await register(w.alice, passkey))
    assert row is not None
    w.passkeys[row.id] = passkey
    return row.id


async def delete_passkey(w: World, row_id: int) -> None:
    passkey = w.passkeys.pop(row_id)
    data_of(await verify(w.alice, passkey))
    data_of(await w.alice.post("/api/verify", json={"method": "passkey"}))
    data_of(await w.alice.delete("/api/user/passkey", params={"credential_id": passkey.id}))


async def make_log(w: World) -> int:
    """The admin's log deletion writes a log of its own (here it deletes nothing: nothing is that old)."""
    assert data_of(await w.admin.delete("/api/log/", params={"target_timestamp": 1})) == 0
    return await newest_id(w.app, Log)


async def delete_log(w: World, _log_id: int) -> None:
    """Delete every log made so far (the log of this deletion comes after)."""
    data_of(await w.admin.delete("/api/log/", params={"target_timestamp": w.app.clock.now_s() + 1}))


Make = Callable[[World], Awaitable[int]]
Remove = Callable[[World, int], Awaitable[None]]
RESOURCES: dict[str, tuple[type[Base], Make, Remove]] = {
    "channel": (Channel, make_channel, delete_channel),
    "api key": (ApiKey, make_key, delete_key),
    "user": (User, make_user, delete_user),
    "redemption code": (Redemption, make_code, delete_code),
    "top-up order": (TopUp, make_order, delete_order),
    "passkey": (PasskeyCredential, make_passkey, delete_passkey),
    "log": (Log, make_log, delete_log),
}


async def world(app: Running) -> World:
    await add_user(app.state, "root", role=100)
    alice_id = await add_user(app.state, "alice")
    await enable_passkeys(app)
    return World(app, await logged_in(app, "root"), await logged_in(app, "alice"), alice_id)


@pytest.mark.parametrize("resource", list(RESOURCES))
async def test_a_deleted_id_is_never_given_again(resource: str, app: Running) -> None:
    """Make two, delete the one with the highest id, make another: its id is larger."""
    model, make, remove = RESOURCES[resource]
    w = await world(app)
    async with FakeStripe(api_key=API_KEY, price_id=PRICE) as stripe:
        await configure(app.state, stripe)
        first = await make(w)
        second = await make(w)
        deleted = await newest_id(app, model)
        assert first < second <= deleted
        await remove(w, deleted)
        assert not await exists(app, model, deleted)
        again = await make(w)
    assert again > deleted, f"{resource}: id {again} given after {deleted} was deleted"


# ---- across a restart of the database server ----------------------------------------------------------

@pytest.mark.parametrize("kind", ["sqlite", "mariadb"])
async def test_a_deleted_id_is_not_given_again_after_the_database_restarts(kind: str, tmp_path: Path) -> None:
    """SQLite: the file reopened. MariaDB: a server of the test's own, killed with SIGKILL after the delete
    and started again (before MariaDB 10.2.4, InnoDB set the counter to max(id) + 1 at start-up)."""
    if kind == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'tollway.db'}"
        await _migrate(url)
        deleted = await _make_two_and_delete_the_newer(url, tmp_path)
        again = await _make_one(url, tmp_path)
    else:
        with own_mariadb(tmp_path / "mariadb") as server:
            await _admin(server.base, "CREATE DATABASE tollway CHARACTER SET utf8mb4", database="mysql")
            url = server.url("tollway")
            await _migrate(url)
            deleted = await _make_two_and_delete_the_newer(url, tmp_path)
            server.restart(kill=True)
            again = await _make_one(url, tmp_path)
    assert again > deleted, f"channel id {again} given after {deleted} was deleted"


async def _migrate(url: str) -> None:
    db = Database(url, pool_size=1)
    try:
        await upgrade(db.engine)
    finally:
        await db.dispose()


async def _make_two_and_delete_the_newer(url: str, data_dir: Path) -> int:
    async with serve(make_config(url, data_dir)) as app:
        await add_user(app.state, "root", role=100)
        root = await logged_in(app, "root")
        [first] = await create_channels(root)
        [second] = await create_channels(root)
        assert second > first
        data_of(await root.delete(f"/api/channel/{second}"))
        assert await newest_id(app, Channel) == first
    return second


async def _make_one(url: str, data_dir: Path) -> int:
    async with serve(make_config(url, data_dir)) as app:
        [made] = await create_channels(await logged_in(app, "root"))
    return made
