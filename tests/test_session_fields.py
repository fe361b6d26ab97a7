"""`SessionStore.merge` and `take` on both stores (SQL on SQLite; Redis with MariaDB / PostgreSQL).

Proves: `merge` adds fields to an existing record and keeps its expiry, and refuses a missing record;
`take` returns a field once and removes it; of 20 concurrent `take`s of one field exactly one gets it.
"""

from __future__ import annotations

import asyncio

from server.auth.sessions import new_session_id
from server.crypto import sha256_hex
from tests.harness import Running


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
