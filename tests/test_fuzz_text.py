"""Property: arbitrary text in any string field of any route never gets a 5xx, and a 4xx changes nothing.

How the routes and fields are found (honestly):
- Routes come from the app's own route table (`app.router.routes`), so a route added later is fuzzed
  without being named here. Path parameters are filled with a live id of the right kind (or the fuzzed
  text itself, when the path is what is fuzzed).
- Fields: there is no schema to enumerate what a handler reads. For the routes listed in `SAMPLES` (kept
  here, beside the test) a valid body is known, and each of its string leaves is a candidate; for any
  other route — a new one — a generic body of common field names (`GENERIC_FIELDS`) is sent instead, which
  reaches the handler but may miss a field only that handler reads. Query parameters are fuzzed by name
  from `QUERY_FIELDS` (plus the sample's). When you add a route, add its sample body here.
- Text: anything hypothesis draws, including lone surrogates, NUL, bidi and zero-width characters, and
  1 MB strings; bodies are sent as JSON with `\\uXXXX` escapes (so lone surrogates travel as JSON allows);
  in a path or query the text is percent-encoded UTF-8 (surrogates as their 3 bytes) and cut to 4000
  characters (a URL cannot carry 1 MB).

Each example: root is logged in (again, if an earlier example logged it out or renamed it), the quota
sync is drained (and the recorded credits it made durable forgotten, as the background replay would) and
the settlement tasks have finished, the tables are dumped, the request is sent, the sync drained again,
and then: status < 500, and on a 4xx the dump is unchanged. Runs on the embedded stack
(SQLite) and once on MariaDB + Redis, where column widths are enforced.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select, text

from core.enums import LogType
from models.redemptions import Redemption, RedemptionRepository
from models.schema import metadata
from models.tables import User
from models.topups import TopUp, TopUpRepository
from models.users import UserRepository
from tests.conftest import _Databases, _stack
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user, keep_upstreams_local, make_config, serve

PASSWORD = "password123"
URL_TEXT_MAX = 4000
VOLATILE = {("tokens", "accessed_time")}  # flushed by a background task once a minute
# short-lived keys (models/kv.py): a refusal may change them on purpose (a failed login is counted), as it
# changes the same keys in Redis, which the dump does not read on the Redis stack either
SHORT_LIVED = {"kv"}

SAMPLES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/api/setup"): {"username": "root2", "password": PASSWORD, "confirmPassword": PASSWORD},
    ("POST", "/api/user/login"): {"username": "victim", "password": "wrong-password"},
    ("POST", "/api/user/register"): {"username": "newbie", "password": PASSWORD, "email": "a@b.example",
                                     "aff_code": "abc"},
    ("POST", "/api/user/login/2fa"): {"code": "123456"},
    ("POST", "/api/user/2fa/enable"): {"code": "123456"},
    ("POST", "/api/user/2fa/disable"): {"code": "ABCD-1234"},
    ("POST", "/api/user/2fa/backup_codes"): {"code": "123456"},
    ("POST", "/api/verify"): {"method": "2fa", "code": "123456"},
    ("PUT", "/api/user/self"): {"username": "root", "display_name": "Root", "password": PASSWORD,
                                "original_password": "not-the-password", "language": "en"},
    ("POST", "/api/user/"): {"username": "made", "password": PASSWORD, "display_name": "Made"},
    ("PUT", "/api/user/"): {"id": "{user}", "username": "victim", "display_name": "V", "group": "default",
                            "remark": "r"},
    ("POST", "/api/user/manage"): {"id": "{user}", "action": "add_quota", "mode": "add", "value": 1},
    ("PUT", "/api/option/"): {"key": "SystemName", "value": "Tollway"},
    ("POST", "/api/channel/"): {"mode": "single", "channel": {
        "type": 1, "name": "c", "key": "k", "models": "m1,m2", "group": "default", "base_url": "",
        "model_mapping": "", "tag": "t", "remark": "r", "test_model": "", "other": "", "setting": "",
        "param_override": "", "header_override": "", "status_code_mapping": ""}},
    ("PUT", "/api/channel/"): {"id": "{channel}", "name": "c", "models": "m1", "group": "default",
                               "tag": "t", "remark": "r", "model_mapping": "", "key": ""},
    ("POST", "/api/channel/batch"): {"ids": [999999]},
    ("POST", "/api/channel/batch/tag"): {"ids": ["{channel}"], "tag": "t"},
    ("POST", "/api/channel/tag/disabled"): {"tag": "t"},
    ("POST", "/api/channel/tag/enabled"): {"tag": "t"},
    ("PUT", "/api/channel/tag"): {"tag": "t", "new_tag": "t2", "models": "m1", "groups": "default",
                                  "model_mapping": "", "param_override": "", "header_override": ""},
    ("POST", "/api/channel/multi_key/manage"): {"channel_id": "{channel}", "action": "get_key_status"},
    ("POST", "/api/channel/fetch_models"): {"type": 24, "base_url": "{gemini}", "key": "AIza-unsaved"},
    ("POST", "/api/token/"): {"name": "k", "group": "", "model_limits": "", "allow_ips": ""},
    ("PUT", "/api/token/"): {"id": "{token}", "name": "k", "group": "", "model_limits": "", "allow_ips": ""},
    ("POST", "/api/token/batch"): {"ids": ["{token}"]},
    ("POST", "/api/redemption/"): {"name": "n", "quota": 1, "count": 1},
    ("PUT", "/api/redemption/"): {"id": "{redemption}", "name": "n"},
    ("POST", "/api/user/topup"): {"key": "{code}"},
    ("POST", "/api/user/topup/complete"): {"trade_no": "{trade_no}"},
    ("POST", "/api/user/aff_transfer"): {"quota": 500000},
    ("POST", "/api/user/reset"): {"email": "victim@example.com", "token": "t", "password": PASSWORD},
    ("POST", "/api/user/passkey/register/finish"): {
        "id": "AAAA", "rawId": "AAAA", "type": "public-key", "authenticatorAttachment": "platform",
        "response": {"clientDataJSON": "e30", "attestationObject": "oA", "transports": ["usb"]}},
    ("POST", "/api/user/passkey/login/finish"): {
        "id": "AAAA", "rawId": "AAAA", "type": "public-key",
        "response": {"clientDataJSON": "e30", "authenticatorData": "AA", "signature": "AA",
                     "userHandle": "MQ"}},
    ("POST", "/api/user/passkey/verify/finish"): {
        "id": "AAAA", "rawId": "AAAA", "type": "public-key",
        "response": {"clientDataJSON": "e30", "authenticatorData": "AA", "signature": "AA"}},
    ("POST", "/v1/moderations"): {"model": "omni-moderation-latest", "input": "hello"},
    ("POST", "/v1beta/models/<target:path>"): {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    ("POST", "/v1/models/<target:path>"): {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
}
GENERIC_FIELDS = ("name", "username", "display_name", "email", "key", "value", "group", "model", "models",
                  "remark", "tag", "action", "mode", "code", "token", "input", "text", "description")
QUERY_FIELDS = ("keyword", "group", "model", "model_name", "token_name", "username", "token", "request_id",
                "type", "status", "p", "page_size", "start_timestamp", "alt", "key", "tag", "suffix", "email",
                "code", "credential_id")
PATH_VALUES = {"user_id": "{user}", "channel_id": "{channel}", "token_id": "{token}",
               "redemption_id": "{redemption}", "target": "gemini-2.5-flash:generateContent"}

NASTY = ["\ud800", "\udfff", "a\ud83d", "\x00", "a\x00b", "\u200b", "\u200d", "\u202e", "\u2066", "\ufeff",
         "\u00ad", "\u0430", "ｆｕｌｌ", "\ufdfa" * 20, " ", "", "\r\n", "%", "_", "\\", "'\"", "a" * 300,
         "x" * 1_000_000]
TEXT = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=()), max_size=30),
    st.sampled_from(NASTY),
    st.lists(st.one_of(st.sampled_from(NASTY[:-1]), st.text(max_size=4)), min_size=1, max_size=6
             ).map("".join),
)


def routes(app: Any) -> list[tuple[str, str, tuple[str, ...]]]:
    """(method, path as declared, path parameter names) of every route the app serves."""
    out = set()
    for route in app.router.routes:
        names = tuple(p.name for p in route.params.values())
        for method in route.methods:
            if method not in ("HEAD", "OPTIONS"):
                out.add((method, "/" + route.raw_path, names))  # (Sanic keeps no trailing "/" here)
    return sorted(out)


def string_leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, str):
        return [path]
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in string_leaves(v, (*path, k))]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in string_leaves(v, (*path, i))]
    return []


def put_at(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = put_at(copy[path[0]], path[1:], new)  # type: ignore[index]
    return copy


def fill(value: Any, ids: dict[str, Any]) -> Any:
    if isinstance(value, str) and value.startswith("{") and value.endswith("}") and value[1:-1] in ids:
        return ids[value[1:-1]]
    if isinstance(value, dict):
        return {k: fill(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, ids) for v in value]
    return value


def url_text(value: str) -> str:
    return quote(value.encode("utf-8", "surrogatepass"), safe="")


async def dump(running: Running) -> dict[str, list[tuple[Any, ...]]]:
    state = running.state
    await state.quota_sync.drain()
    await state.credits.replay()  # forgets the credits now in SQL (which the background replay would)
    out: dict[str, list[tuple[Any, ...]]] = {}
    async with state.db.transaction() as tx:
        for table in metadata.sorted_tables:
            if table.name in SHORT_LIVED:
                continue
            cols = [c for c in table.columns if (table.name, c.name) not in VOLATILE]
            query = select(*cols)
            if table.name == "logs":  # a refused model call is recorded as an error log, by design
                query = query.where(table.c.type != LogType.ERROR)
            rows = (await tx.execute(query)).all()
            out[table.name] = sorted((tuple(r) for r in rows), key=repr)
    return out


async def settled(running: Running) -> None:
    """The settlements and a background test of every channel have finished (they write)."""
    for _ in range(500):  # bounds a hang only
        if not any(n.startswith(("settle-", "channel-test")) for n in running.state.tasks.names):
            return
        await asyncio.sleep(0.01)


class Fuzzer:
    def __init__(self, running: Running, ids: dict[str, Any], key: str) -> None:
        self.running = running
        self.ids = ids
        self.key = key
        self.http = httpx.AsyncClient(base_url=running.url, timeout=120)
        self.targets: list[tuple[str, str, tuple[str, ...]]] = routes(running.app)

    async def ensure_root(self) -> None:
        probe = await self.http.get("/api/user/self", headers={"New-Api-User": str(self.ids["root"])})
        if probe.status_code == 200:
            return
        async with self.running.state.db.transaction() as tx:
            name = await tx.scalar(select(User.username).where(User.id == self.ids["root"]))
        self.http.cookies.clear()
        login = await self.http.post("/api/user/login", json={"username": name, "password": PASSWORD})
        assert login.status_code == 200, login.text

    async def send(self, method: str, path: str, names: tuple[str, ...], where: str, pick: int,
                   value: str) -> httpx.Response:
        sample = SAMPLES.get((method, path)) or SAMPLES.get((method, path + "/"))
        body: Any = fill(sample, self.ids) if sample is not None else (
            {name: "x" for name in GENERIC_FIELDS} if method in ("POST", "PUT") else None)
        query: dict[str, str] = {}
        params = {n: str(fill(PATH_VALUES.get(n, "1"), self.ids)) for n in names}
        in_url = value[:URL_TEXT_MAX]  # a URL cannot carry 1 MB (httpx refuses it before sending)
        if where == "path" and names:
            params[names[pick % len(names)]] = in_url
        elif where == "body" and body is not None:
            leaves = string_leaves(body)
            if leaves:
                body = put_at(body, leaves[pick % len(leaves)], value)
        else:
            query[QUERY_FIELDS[pick % len(QUERY_FIELDS)]] = in_url
        url = path
        for name, raw in params.items():
            url = re.sub(f"<{name}(:[^>]*)?>", lambda _m, raw=raw: url_text(raw), url)
        if query:
            url += "?" + "&".join(f"{k}={url_text(v)}" for k, v in query.items())
        headers = {"New-Api-User": str(self.ids["root"])}
        if path.startswith("/v1") or path in ("/api/usage/token/", "/api/log/token"):
            headers.update({"Authorization": f"Bearer {self.key}", "x-goog-api-key": self.key})
        content = json.dumps(body).encode() if body is not None else None  # ASCII: \\ud800 stays an escape
        if content is not None:
            headers["Content-Type"] = "application/json"
        return await self.http.request(method, url, content=content, headers=headers)


async def prepare(running: Running, gemini: FakeGemini, openai: FakeOpenAI) -> Fuzzer:
    state = running.state
    root = await add_user(state, "root", role=100, quota=10**9)
    victim = await add_user(state, "victim", quota=10**6)
    token_id, key = await seed_key(state, root, unlimited=True)
    channel = await seed_channel(state, type=24, base_url=gemini.url, models="gemini-2.5-flash")
    await seed_channel(state, type=1, base_url=openai.url, models="omni-moderation-latest")
    await state.options.put("ModelRatio", '{"gemini-2.5-flash": 0.15, "omni-moderation-latest": 0.1}')
    async with state.db.transaction() as tx:  # the setup is done: /api/setup must answer 409
        await tx.execute(text("INSERT INTO setups (id, version, initialized_at) VALUES (1, 't', 0)"))
    keep_upstreams_local(running)  # the channels a fuzzed request creates point at real providers
    async with state.db.transaction() as tx:  # a redemption code and a top-up order to act on
        await UserRepository(tx).update_fields(root, aff_quota=10**6)
        code = Redemption(user_id=root, key=secrets.token_hex(16), status=1, name="seeded", quota=5,
                          created_time=0, redeemed_time=0, expired_time=0, used_user_id=0)
        await RedemptionRepository(tx).add_many([code])
        await TopUpRepository(tx).add(TopUp(user_id=victim, amount=1, money=8.0, trade_no="ref_seeded",
                                            payment_method="", payment_provider="", create_time=0,
                                            complete_time=0, status="pending"))
    ids = {"root": root, "user": victim, "token": token_id, "channel": channel, "redemption": code.id,
           "code": code.key, "trade_no": "ref_seeded"}
    fuzzer = Fuzzer(running, ids, key)
    await fuzzer.ensure_root()
    return fuzzer


EXAMPLE = st.tuples(st.integers(0, 10_000), st.sampled_from(["body", "query", "path"]),
                    st.integers(0, 100), TEXT)


async def check(fuzzer: Fuzzer, example: tuple[int, str, int, str]) -> None:
    index, where, pick, value = example
    method, path, names = fuzzer.targets[index % len(fuzzer.targets)]
    await fuzzer.ensure_root()
    await settled(fuzzer.running)
    before = await dump(fuzzer.running)
    response = await fuzzer.send(method, path, names, where, pick, value)
    await settled(fuzzer.running)
    after = await dump(fuzzer.running)
    label = f"{method} {path} {where}[{pick}] = {value[:60]!r}"
    # a text that empties a base URL sends a route that calls a provider to the provider's real address,
    # which the test transport refuses: that is the route's documented 502, not a failure
    blocked = response.status_code == 502 and "is not a test upstream" in response.text
    assert response.status_code < 500 or blocked, f"{label}: {response.status_code} {response.text[:300]}"
    if 400 <= response.status_code < 500:
        changed = {t: (before[t], after[t]) for t in before if before[t] != after[t]}
        assert not changed, f"{label}: {response.status_code} changed {sorted(changed)}"


@pytest.fixture
async def fuzz_app(embedded_app: Running, gemini_fake: FakeGemini, openai_fake: FakeOpenAI
                   ) -> AsyncIterator[Fuzzer]:
    fuzzer = await prepare(embedded_app, gemini_fake, openai_fake)
    yield fuzzer
    await fuzzer.http.aclose()


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(example=EXAMPLE)
async def test_any_text_in_any_field_of_any_route(fuzz_app: Fuzzer, example: tuple[int, str, int, str]
                                                  ) -> None:
    await check(fuzz_app, example)


@pytest.fixture
async def fuzz_app_mariadb(databases: _Databases, tmp_path: Path, gemini_fake: FakeGemini,
                           openai_fake: FakeOpenAI) -> AsyncIterator[Fuzzer]:
    async for s in _stack("mariadb+redis", databases):
        async with serve(make_config(s.database_url, tmp_path, s.redis_url, s.prefix)) as running:
            fuzzer = await prepare(running, gemini_fake, openai_fake)
            yield fuzzer
            await fuzzer.http.aclose()


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(example=EXAMPLE)
async def test_any_text_on_mariadb_and_redis(fuzz_app_mariadb: Fuzzer, example: tuple[int, str, int, str]
                                             ) -> None:
    await check(fuzz_app_mariadb, example)


async def test_samples_name_real_routes(fuzz_app: Fuzzer) -> None:
    """A sample body kept here for a route that no longer exists would silently fuzz nothing."""
    declared = {(method, path.rstrip("/")) for method, path, _ in fuzz_app.targets}  # (Sanic drops the "/")
    named = {(method, path.rstrip("/")) for method, path in SAMPLES}
    assert named <= declared, named - declared
    assert len(fuzz_app.targets) >= 40
