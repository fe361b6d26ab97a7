"""`SessionStore.merge` and `take` on both stores (SQL on SQLite; Redis with MariaDB / PostgreSQL).

Proves: `merge` adds fields to an existing record and keeps its expiry, and refuses a missing record;
`take` returns a field once and removes it; of 20 concurrent `take`s of one field exactly one gets it;
`slide` adds fields to the live record and pushes its expiry, and never re-creates an ended one — so a
session revoked while a request is sliding it (held on its SQL row) stays revoked.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, select

from models.tables import SessionRow
from server.components.sessions import new_session_id
from server.crypto import sha256_hex
from tests.conftest import fresh_database
from tests.harness import Running, add_user, logged_in, make_config, serve


async def test_merge_and_take_change_one_record_atomically(app: Running) -> None:
    sessions = app.state.sessions
    raw = new_session_id()
    assert await sessions.merge(raw, {"x": 1}) is False
    assert await sessions.get(raw) is None

    await sessions.save(raw, {"id": 7, "role": 1}, ttl=300)
    assert await sessions.merge(raw, {"challenge": {"c": "abc"}, "mark": 5}) is True
    assert await sessions.get(raw) == {"id": 7, "role": 1, "challenge": {"c": "abc"}, "mark": 5}
    if app.state.config.redis_url is None:  # the merge kept the 300 s expiry (SQL judges it by the clock)
        app.clock.shift(301)
        assert await sessions.get(raw) is None
        app.clock.shift(-301)
    else:  # (Redis by its time to live)
        backend = app.state.backend
        assert 0 < await backend.client.ttl(backend.key(f"session:{sha256_hex(raw)}")) <= 300

    assert await sessions.take(raw, "challenge") == {"c": "abc"}
    assert await sessions.take(raw, "challenge") is None
    assert await sessions.get(raw) == {"id": 7, "role": 1, "mark": 5}

    await sessions.merge(raw, {"once": "v"})
    taken = await asyncio.gather(*(sessions.take(raw, "once") for _ in range(20)))
    assert taken.count("v") == 1 and taken.count(None) == 19
    assert await sessions.get(raw) == {"id": 7, "role": 1, "mark": 5}


async def test_slide_extends_a_live_record_and_never_recreates_an_ended_one(app: Running) -> None:
    sessions = app.state.sessions
    raw = new_session_id()
    assert await sessions.slide(raw, {"pushed_at": 1}) is None
    assert await sessions.get(raw) is None

    await sessions.save(raw, {"id": 7, "role": 1, "pushed_at": 0}, ttl=300)
    await sessions.merge(raw, {"mark": 5})  # written after the slider read the record: kept
    assert await sessions.slide(raw, {"pushed_at": 9}) == {"id": 7, "role": 1, "pushed_at": 9, "mark": 5}
    assert await sessions.get(raw) == {"id": 7, "role": 1, "pushed_at": 9, "mark": 5}
    if app.state.config.redis_url is None:  # expiry pushed to 30 days from now
        app.clock.shift(301)
        assert await sessions.get(raw) is not None
        app.clock.shift(-301)
    else:
        backend = app.state.backend
        assert await backend.client.ttl(backend.key(f"session:{sha256_hex(raw)}")) > 300

    await sessions.delete(raw)
    assert await sessions.slide(raw, {"pushed_at": 10}) is None
    assert await sessions.get(raw) is None


@pytest.fixture(params=["mariadb", "postgres"])
async def sql_sessions_app(request: pytest.FixtureRequest, databases: Any, tmp_path: Path
                           ) -> AsyncIterator[Running]:
    """Sessions in a server database (no Redis), where a row lock can hold a request mid-way."""
    url = await fresh_database(databases, request.param)
    async with serve(make_config(url, tmp_path)) as running:
        yield running


async def test_a_session_revoked_while_a_request_slides_it_stays_revoked(sql_sessions_app: Running) -> None:
    app = sql_sessions_app
    await add_user(app.state, "ann")
    api = await logged_in(app, "ann")
    raw = api.http.cookies.get("session")
    assert raw
    app.clock.shift(120)  # the next request slides the session
    sid = sha256_hex(raw)
    async with app.state.db.transaction() as tx:  # the revocation, holding the row while the request runs
        await tx.execute(select(SessionRow).where(SessionRow.id == sid).with_for_update())
        call = asyncio.create_task(api.get("/api/user/self"))
        await asyncio.sleep(1.0)  # the request has read the record and waits on the row to slide it
        await tx.execute(delete(SessionRow).where(SessionRow.id == sid))
    await call
    assert await app.state.sessions.get(raw) is None
    assert (await api.get("/api/user/self")).status_code == 401


async def test_rotate_moves_a_record_and_never_recreates_an_ended_one(app: Running) -> None:
    sessions = app.state.sessions
    old, new = new_session_id(), new_session_id()
    assert await sessions.rotate(old, new, {"role": 10}) is None  # no such record: nothing is created
    assert await sessions.get(new) is None

    await sessions.save(old, {"id": 7, "role": 1, "pushed_at": 0}, ttl=300)
    assert await sessions.rotate(old, new, {"role": 10, "pushed_at": 5}) == {"id": 7, "role": 10,
                                                                            "pushed_at": 5}
    assert await sessions.get(old) is None
    assert await sessions.get(new) == {"id": 7, "role": 10, "pushed_at": 5}
    await sessions.revoke_user(7)  # the user's index knows the new id
    assert await sessions.get(new) is None
    assert await sessions.rotate(new, new_session_id(), {}) is None


async def test_a_revocation_racing_rotations_leaves_no_session(app: Running) -> None:
    """Whichever runs first, `revoke_user` ends the record a concurrent `rotate` moves: the rotation either
    finds it gone or moves it where the revocation then finds it. (SQLite, and Redis.)"""
    await revocation_racing_rotations(app)


async def test_a_revocation_racing_rotations_leaves_no_session_in_a_server_database(
        sql_sessions_app: Running) -> None:
    """The same with the sessions in MariaDB / PostgreSQL: the rotation renames the locked row in place."""
    await revocation_racing_rotations(sql_sessions_app)


async def revocation_racing_rotations(app: Running) -> None:
    sessions = app.state.sessions
    for round_ in range(30):
        uid = await add_user(app.state, f"rotated{round_}")
        first = new_session_id()
        await sessions.save(first, {"id": uid, "role": 1})
        chain = [first] + [new_session_id() for _ in range(3)]

        async def rotations(chain: list[str]) -> None:
            for old, new in itertools.pairwise(chain):
                if await sessions.rotate(old, new, {"role": 10}) is None:
                    return
                await asyncio.sleep(0)

        await asyncio.gather(rotations(chain), sessions.revoke_user(uid))
        alive = [raw for raw in chain if await sessions.get(raw) is not None]
        assert alive == [], f"round {round_}: a session outlived the revocation"
