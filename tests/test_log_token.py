"""`GET /api/log/token` follows docs/api/logs.md#logs on every stack (SQLite, MariaDB + Redis, PostgreSQL +
Redis), over HTTP against the real app.

Proved here:
- the key itself authenticates (`Bearer sk-…` or the bare key, no session); the reply is an unpaged array
  of that key's rows only, newest first, at most 1000, sanitized as the owner's own logs (position ids,
  channel 0, no channel name, no admin details in `other`);
- an expired or exhausted key may still read; a missing, unknown or deleted key is a 401, a key whose
  owner is disabled a 403;
- CORS is open: every answer (errors too) carries `Access-Control-Allow-Origin: *` and `OPTIONS` is
  answered for the browser's preflight.
"""

from __future__ import annotations

import json

import httpx
from sqlalchemy import insert, update

from core.enums import KeyStatus, LogType
from models.keys import ApiKey
from models.logs import Log
from tests.gateway import seed_key
from tests.harness import Running, add_user, data_of, fails

ROWS = 1003


def log_rows(user_id: int, token_id: int, count: int, *, start: int = 1000) -> list[dict[str, object]]:
    other = json.dumps({"model_ratio": 1, "admin_info": {"use_channel": [7]}})
    return [{"type": LogType.CONSUME, "user_id": user_id, "token_id": token_id, "created_at": start + n,
             "content": f"call {n}", "username": "u", "token_name": "k", "model_name": "m", "quota": n,
             "prompt_tokens": 1, "completion_tokens": 1, "use_time": 0, "is_stream": False, "channel": 7,
             "group": "default", "ip": "", "request_id": f"r{n}", "other": other} for n in range(count)]


async def test_a_key_reads_its_newest_logs(app: Running) -> None:
    uid = await add_user(app.state, "owner")
    key_id, key = await seed_key(app.state, uid)
    other_id, _ = await seed_key(app.state, uid, name="other")
    async with app.state.db.transaction() as tx:
        await tx.execute(insert(Log), log_rows(uid, key_id, ROWS))
        await tx.execute(insert(Log), log_rows(uid, other_id, 5, start=5000))
    client = app.client()
    response = await client.get("/api/log/token", headers={"Authorization": f"Bearer {key}"})
    assert response.headers["access-control-allow-origin"] == "*"
    rows = data_of(response)
    assert isinstance(rows, list) and len(rows) == 1000
    assert [r["content"] for r in rows[:2]] == [f"call {ROWS - 1}", f"call {ROWS - 2}"]
    assert [r["id"] for r in rows] == list(range(1, 1001))
    assert {r["token_id"] for r in rows} == {key_id} and {r["channel"] for r in rows} == {0}
    assert all("channel_name" not in r and "admin_info" not in json.loads(r["other"]) for r in rows)
    bare = data_of(await client.get("/api/log/token", headers={"Authorization": key.removeprefix("sk-")}))
    assert bare == rows


async def test_expired_and_exhausted_keys_read_deleted_and_unknown_do_not(app: Running) -> None:
    uid = await add_user(app.state, "owner2")
    _, expired = await seed_key(app.state, uid, status=KeyStatus.EXPIRED, expired_time=1)
    _, exhausted = await seed_key(app.state, uid, status=KeyStatus.EXHAUSTED)
    deleted_id, deleted = await seed_key(app.state, uid)
    async with app.state.db.transaction() as tx:
        await tx.execute(update(ApiKey).where(ApiKey.id == deleted_id).values(deleted_at=1))
    client = app.client()
    for key in (expired, exhausted):
        assert data_of(await client.get("/api/log/token", headers={"Authorization": f"Bearer {key}"})) == []
    for headers in ({"Authorization": f"Bearer {deleted}"}, {"Authorization": "Bearer sk-nope"}, {}):
        response = await client.get("/api/log/token", headers=headers)
        fails(response, 401)
        assert response.headers["access-control-allow-origin"] == "*"
    disabled = await add_user(app.state, "gone", status=2)
    _, key = await seed_key(app.state, disabled)
    fails(await client.get("/api/log/token", headers={"Authorization": f"Bearer {key}"}), 403)


async def test_preflight_is_answered(app: Running) -> None:
    async with httpx.AsyncClient(base_url=app.url) as client:
        response = await client.options("/api/log/token", headers={
            "Origin": "https://elsewhere.example", "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "authorization"})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "*"
    assert "GET" in response.headers["access-control-allow-methods"]
    assert "authorization" in response.headers["access-control-allow-headers"].lower()
