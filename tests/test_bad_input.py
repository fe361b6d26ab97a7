"""Bad input from anonymous and authenticated callers: never a 500, never unbounded storage.

Proves:
- a string that is not storable text (a lone surrogate escape, NUL) in a management body is a 400 naming
  the field, on every route family that takes text (login, registration, self update, user admin,
  options, channels, API keys), on every stack; on the gateway it is a 400 in the route's error shape
  (OpenAI on `/v1/moderations`, Google on Gemini routes), naming the field;
- a `session` cookie or an `Authorization` access token that is not UTF-8 is no session / an invalid
  token (401 or 200 on public routes), never a 500 — login and logout included;
- a 5 MB login name is refused before anything is stored, and a failed login for a long unknown name
  leaves only a fixed-size counter key; the in-process backend forgets expired keys nobody reads again;
- 100 concurrent wrong passwords for one account from one IP: at most LOGIN_FAIL_LIMIT reach the
  password check (the others are 429), on SQLite and on MariaDB + Redis;
- look-alike usernames: NFKC forms are one account, zero-width / bidi characters and a word mixing
  Latin with Cyrillic are refused naming `username`, CJK names are accepted; migration 0004 re-keys
  existing rows (and keeps the unique index when two old names now collide).

The tests of `/api` refusals run in both error modes (`tests.harness.ERROR_MODES`): with
`NewApiCompatibleErrors` on, each is 200 + `success: false` with the same message, except where new-api
answers with a status too, asserted as such: no valid credential stays 401 (new-api's middleware/auth.go
authHelper), a rate limit stays 429 (middleware/rate-limit.go); a wrong password is 200 (new-api's
controller/user.go Login). The gateway's errors are the same in both modes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from sqlalchemy import insert, select, text

from backend.memory import SWEEP_EVERY, MemoryBackend
from models.db import Database
from models.kv import KvRow
from models.migrate import upgrade
from models.tables import User
from server.auth.service import LOGIN_FAIL_LIMIT
from tests.conftest import Stack, _Databases, _stack
from tests.gateway import seed_channel, seed_key
from tests.harness import (
    ERROR_MODES,
    Running,
    add_user,
    fails,
    logged_in,
    make_config,
    refused,
    serve,
    set_error_mode,
)
from tests.services import REDIS_URL
from tests.test_migrations import fresh_empty_database  # noqa: F401  (fixture, by name)

SURROGATE = b'"ab\\ud800cd"'
NUL = b'"ab\\u0000cd"'


async def _post_raw(api: Any, method: str, path: str, body: bytes) -> httpx.Response:
    return await api.request(method, path, content=body, headers={"Content-Type": "application/json"})


# ---- finding 2: text that cannot be stored ----------------------------------------------------------

ROUTES = [  # (method, path, a valid body with {} where the bad string goes, field named)
    ("POST", "/api/user/login", b'{"username": %s, "password": "password123"}', "username"),
    ("POST", "/api/user/register", b'{"username": %s, "password": "password123"}', "username"),
    ("POST", "/api/user/register", b'{"username": "newbie", "password": %s}', "password"),
    ("PUT", "/api/user/self", b'{"display_name": %s}', "display_name"),
    ("POST", "/api/user/", b'{"username": %s, "password": "password123"}', "username"),
    ("PUT", "/api/option/", b'{"key": "SystemName", "value": %s}', "value"),
    ("POST", "/api/channel/", b'{"type": 1, "name": %s, "key": "k", "models": "m", "group": "default"}',
     "name"),
    ("POST", "/api/token/", b'{"name": %s}', "name"),
    ("POST", "/api/token/", b'{"name": "ok", "allow_ips": ["1.2.3.4", %s]}', "allow_ips[1]"),
]


@pytest.mark.parametrize("mode", ERROR_MODES)
@pytest.mark.parametrize("bad", [SURROGATE, NUL], ids=["surrogate", "nul"])
async def test_unstorable_text_is_a_400_naming_the_field(app: Running, bad: bytes, mode: str) -> None:
    await add_user(app.state, "root", role=100)
    await set_error_mode(app, mode)
    root = await logged_in(app, "root")
    for method, path, template, field in ROUTES:
        response = await _post_raw(root, method, path, template % bad)
        refused(response, 400, mode, f"{field}:", prefix=True)
    # a member name is checked too, without echoing it
    response = await _post_raw(root, "PUT", "/api/user/self", b'{"\\ud800": 1}')
    refused(response, 400, mode, "request body:", prefix=True)


@pytest.mark.parametrize("mode", ERROR_MODES)
async def test_non_utf8_session_cookie_and_token_are_no_credentials(app: Running, mode: str) -> None:
    await add_user(app.state, "root", role=100)
    await set_error_mode(app, mode)
    for cookie in (b"session=\xff\xfe", b"session=" + b"\xc3" * 40, b"session=" + b"a" * 5000):
        client = app.client()
        headers: Any = {"Cookie": cookie}
        assert (await client.get("/api/user/logout", headers=headers)).status_code == 200
        refused(await client.get("/api/user/self", headers={**headers, "New-Api-User": "1"}), 401, mode,
                kept=True)
        login = await client.post("/api/user/login", headers=headers,
                                  json={"username": "root", "password": "password123"})
        assert login.status_code == 200, login.text
    client = app.client()
    response = await client.get("/api/user/self", headers={"Authorization": b"Bearer \xff\xfe",
                                                           "New-Api-User": "1"})
    refused(response, 401, mode, kept=True)


@pytest.fixture
async def gateway(embedded_app: Running) -> AsyncIterator[tuple[Running, str]]:
    state = embedded_app.state
    uid = await add_user(state, "alice", quota=10_000_000)
    _, key = await seed_key(state, uid, unlimited=True)
    await seed_channel(state, type=24, base_url="http://127.0.0.1:9", models="gemini-2.5-flash")
    await seed_channel(state, type=1, base_url="http://127.0.0.1:9", models="omni-moderation-latest")
    yield embedded_app, key


@pytest.mark.parametrize("mode", ERROR_MODES)
async def test_gateway_refuses_unstorable_text_in_its_error_shape(gateway: tuple[Running, str], mode: str
                                                                  ) -> None:
    """The same 400s in both error modes: `NewApiCompatibleErrors` changes `/api` only."""
    app, key = gateway
    await set_error_mode(app, mode)
    async with httpx.AsyncClient(base_url=app.url) as client:
        openai = await client.post("/v1/moderations", content=b'{"model": "\\ud800", "input": "x"}',
                                   headers={"Authorization": f"Bearer {key}"})
        nul_model = await client.post("/v1/moderations", content=b'{"model": "a\\u0000", "input": "x"}',
                                      headers={"Authorization": f"Bearer {key}"})
        google = await client.post("/v1beta/models/gemini-2.5-flash:generateContent",
                                   content=b'{"contents": [{"parts": [{"text": "\\udfff"}]}]}',
                                   headers={"x-goog-api-key": key})
        path_nul = await client.post("/v1beta/models/gem%00:generateContent",
                                     content=b'{"contents": [{"parts": [{"text": "hi"}]}]}',
                                     headers={"x-goog-api-key": key})
    for response in (openai, nul_model):
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["param"] == "model" and error["type"] == "invalid_request_error"
        assert error["message"].startswith("model:")
    for response, field in ((google, "contents[0].parts[0].text:"), (path_nul, "model:")):
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["status"] == "INVALID_ARGUMENT" and error["message"].startswith(field)


# ---- finding 3: bounded storage for anonymous callers --------------------------------------------------

@pytest.mark.parametrize("mode", ERROR_MODES)
async def test_login_fields_are_capped_and_counters_are_fixed_size(app: Running, stack: Stack, mode: str
                                                                    ) -> None:
    await set_error_mode(app, mode)
    client = app.client()
    huge = await client.post("/api/user/login", json={"username": "x" * (5 * 1024 * 1024), "password": "p"})
    refused(huge, 400, mode, "username:", prefix=True)
    long_pw = await client.post("/api/user/login", json={"username": "nobody", "password": "p" * 100_000})
    refused(long_pw, 400, mode, "password:", prefix=True)
    name = "u" * 50  # the longest name a login may carry (an e-mail address)
    wrong = await client.post("/api/user/login", json={"username": name, "password": "password123"})
    refused(wrong, 401, mode)  # a wrong login is no missing login: new-api's Login answers it 200
    if stack.redis_url is None:  # the counters live in SQL (models/kv.py)
        async with app.state.db.transaction() as tx:
            stored = list((await tx.scalars(select(KvRow.key))).all())
        assert stored and all(name not in k for k in stored), stored
        assert len([k for k in stored if "login_fail" in k]) == 1 and max(map(len, stored)) <= 80
        return
    redis = Redis.from_url(REDIS_URL)
    try:
        keys = [k async for k in redis.scan_iter(match=f"{stack.prefix}*")]
        assert keys
        assert all(name not in k.decode() for k in keys), keys
        fail_keys = [k for k in keys if b"login_fail" in k]
        assert len(fail_keys) == 1 and len(fail_keys[0]) <= len(stack.prefix) + 80
    finally:
        await redis.aclose()


async def test_memory_backend_forgets_expired_keys_nobody_reads() -> None:
    now = [1000.0]
    backend = MemoryBackend(clock=lambda: now[0])
    for i in range(5000):
        await backend.incr(f"login_fail:{i}", 900)
        await backend.set_text(f"rec:key:{i}", "null", 30)
    now[0] += 901
    for i in range(SWEEP_EVERY):
        await backend.incr(f"fresh:{i}", 900)
    assert backend.key_count() <= 2 * SWEEP_EVERY


# ---- finding 5: the lockout is atomic -------------------------------------------------------------------

@pytest.fixture(params=["sqlite", "mariadb+redis"])
async def lockout_app(request: pytest.FixtureRequest, databases: _Databases, tmp_path: Path
                      ) -> AsyncIterator[Running]:
    async for s in _stack(request.param, databases):
        async with serve(make_config(s.database_url, tmp_path, s.redis_url, s.prefix)) as running:
            yield running


@pytest.mark.parametrize("mode", ERROR_MODES)
async def test_concurrent_wrong_passwords_reach_the_check_at_most_the_limit(lockout_app: Running, mode: str
                                                                           ) -> None:
    await add_user(lockout_app.state, "victim")
    await set_error_mode(lockout_app, mode)
    wrong = 401 if mode == "statuses" else 200  # the lockout's 429 stays 429 in both modes
    passwords = lockout_app.state.passwords
    checks = 0
    original = passwords.verify

    async def counting(hashed: str | None, password: str) -> bool:  # counts, then runs the real check
        nonlocal checks
        checks += 1
        return await original(hashed, password)

    passwords.verify = counting  # type: ignore[method-assign]
    async with httpx.AsyncClient(base_url=lockout_app.url, timeout=60,
                                 limits=httpx.Limits(max_connections=100)) as client:
        responses = await asyncio.gather(*(
            client.post("/api/user/login", json={"username": "victim", "password": f"wrong-{i:03d}"})
            for i in range(100)))
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {wrong, 429}, statuses
    assert all(r.json()["success"] is False for r in responses)
    assert statuses.count(wrong) <= LOGIN_FAIL_LIMIT, statuses.count(wrong)
    assert checks <= LOGIN_FAIL_LIMIT, checks
    # and the correct password is locked out too from this IP until the window ends
    ok = await lockout_app.client().post("/api/user/login", json={"username": "victim",
                                                                  "password": "password123"})
    fails(ok, 429)


# ---- finding 7: look-alike usernames ----------------------------------------------------------------------

@pytest.mark.parametrize("mode", ERROR_MODES)
async def test_look_alike_usernames(app: Running, mode: str) -> None:
    await set_error_mode(app, mode)
    client = app.client()

    async def register(name: str) -> httpx.Response:
        return await client.post("/api/user/register", json={"username": name, "password": "password123"})

    assert (await register("alice")).status_code == 200
    refused(await register("ａｌｉｃｅ"), 409, mode)  # fullwidth: the same account
    refused(await register("ALICE"), 409, mode)
    for name in ("ali\u200bce", "\u202ealice", "ali\u2066ce", "al\u00adice", "ali\ufeffce"):
        refused(await register(name), 400, mode, "username:", prefix=True)
    refused(await register("\u0430lice"), 400, mode, "username: must not mix scripts", prefix=True)  # а
    refused(await register("p\u0430ypal"), 400, mode, "username:", prefix=True)
    assert (await register("ＢＯＢ")).status_code == 200
    assert (await register("山田たろう")).status_code == 200
    assert (await register("иван petrov")).status_code == 200  # two words, one script each
    async with app.state.db.transaction() as tx:
        names = set((await tx.scalars(select(User.username))).all())
    assert {"alice", "BOB", "山田たろう", "иван petrov"} <= names
    login = await app.client().post("/api/user/login", json={"username": "ｂｏｂ", "password": "password123"})
    assert login.status_code == 200


async def test_migration_0004_rekeys_usernames(fresh_empty_database: str) -> None:  # noqa: F811
    db_url = fresh_empty_database
    db = Database(db_url, pool_size=1)
    try:
        await upgrade(db.engine, "0003")
        async with db.transaction() as tx:
            await tx.execute(text("DELETE FROM users"))
            rows = [(1, "alice", "alice"), (2, "ａｌｉｃｅ", "ａｌｉｃｅ"), (3, "ＢＯＢ", "ｂｏｂ"),
                    (4, "Carol", "carol")]
            # core INSERT: the ORM hook that fills the keys does not run, so the old keys stay
            await tx.execute(insert(User.__table__), [dict(
                id=uid, username=name, username_key=key, password="x", display_name=name, email="", role=1,
                status=1, group="default", quota=0, used_quota=0, request_count=0, aff_count=0, aff_quota=0,
                aff_history_quota=0, inviter_id=0, setting="", remark="", stripe_customer="", created_at=0,
                last_login_at=0) for uid, name, key in rows])
        await upgrade(db.engine)
        async with db.transaction() as tx:
            keys = dict((await tx.execute(text("SELECT id, username_key FROM users"))).all())
        assert keys == {1: "alice", 2: "ａｌｉｃｅ", 3: "bob", 4: "carol"}
    finally:
        await db.dispose()
