"""Run the real app in the test's event loop on a real socket, and talk to it over HTTP with httpx.

(sanic-testing's ASGI client re-runs the start-up listeners on every request and bypasses the HTTP
server's body limit, so the tests serve the app the way production does.)
"""

from __future__ import annotations

import secrets
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from sanic import Sanic

from models.tables import User
from models.users import UserRepository
from server.app import create_app
from server.clock import Clock
from server.components.user_rules import fresh_aff_code
from server.config import Config, RateLimit
from server.context import State
from server.destinations import ANY_ADDRESS
from server.faults import Faults
from server.upstream.client import UpstreamResponse
from server.upstream.providers.base import UpstreamCall
from server.web.connections import Connection
from server.web.sanic_internals import http_touched_up
from tests.services import IN_LOOP_REDIS_TIMEOUT

Sanic.test_mode = True

CHEAPEST_ARGON2 = (1, 8, 1)
"""argon2id at its lowest cost (t=1, 8 KiB, p=1) for the test apps (`Faults.password_cost`): sign-ins at the
production cost were a large share of the in-process tests' CPU (docs/PERFORMANCE.md#the-test-suite). What
is stored and how a login checks it stay the same; tests/test_crypto_cost.py keeps the production cost."""


def make_config(database_url: str, data_dir: Path, redis_url: str | None = None, prefix: str = "tollway:",
                **overrides: Any) -> Config:
    config = Config(
        database_url=database_url, secret_key="test-secret-key-0123456789abcdef", data_dir=data_dir,
        redis_url=redis_url, redis_prefix=prefix,
        global_rate_limit=RateLimit(0, 0), critical_rate_limit=RateLimit(0, 0),
        upstream_allow_private=ANY_ADDRESS,  # the fake upstreams listen on 127.0.0.1
        redis_timeout=IN_LOOP_REDIS_TIMEOUT,  # tests/services.py says why
        faults=Faults(password_cost=CHEAPEST_ARGON2),
    )
    return replace(config, **overrides)


@dataclass
class Running:
    app: Sanic[Any, Any]
    url: str
    clock: Clock
    clients: list[httpx.AsyncClient] = field(default_factory=list)

    @property
    def state(self) -> State:
        state: State = self.app.ctx.state
        return state

    def client(self, **kwargs: Any) -> Api:
        http = httpx.AsyncClient(base_url=self.url, timeout=20, **kwargs)
        self.clients.append(http)
        return Api(http)


class Api:
    """An HTTP client for one caller; `as_user` remembers the id sent in `New-Api-User`."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http
        self.user_id: int | None = None
        self.token: str | None = None

    def _headers(self, headers: dict[str, str] | None) -> dict[str, str]:
        out = {}
        if self.user_id is not None:
            out["New-Api-User"] = str(self.user_id)
        if self.token is not None:
            out["Authorization"] = f"Bearer {self.token}"
        out.update(headers or {})
        return out

    async def request(self, method: str, path: str, *, headers: dict[str, str] | None = None,
                      **kwargs: Any) -> httpx.Response:
        return await self.http.request(method, path, headers=self._headers(headers), **kwargs)

    async def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("GET", path, **kwargs)

    async def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("POST", path, **kwargs)

    async def put(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("PUT", path, **kwargs)

    async def delete(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("DELETE", path, **kwargs)

    async def login(self, username: str, password: str) -> httpx.Response:
        response = await self.post("/api/user/login", json={"username": username, "password": password})
        if response.status_code == 200 and "id" in (response.json().get("data") or {}):
            self.user_id = response.json()["data"]["id"]
        return response


@asynccontextmanager
async def serve(config: Config, *, clock: Clock | None = None) -> AsyncIterator[Running]:
    clock = clock or Clock()
    app = create_app(config, clock=clock, name=f"tollway_{secrets.token_hex(4)}")
    if http_touched_up():
        # Sanic's TouchUp rewrites `Http`'s methods for the app's signals, on the class: once done for the
        # first app of this process it holds for every later one (all built by `create_app`, with the same
        # signals). Doing it again for every test app recompiled the same source each time.
        app.config.TOUCHUP = False
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = await app.create_server(sock=sock, return_asyncio_server=True, access_log=False,
                                     protocol=Connection)  # the connection deadlines, as `tollway serve`
    assert server is not None
    await server.startup()
    await server.before_start()
    await server.after_start()
    running = Running(app=app, url=f"http://127.0.0.1:{port}", clock=clock)
    try:
        yield running
    finally:
        for http in running.clients:
            await http.aclose()
        await server.before_stop()
        await server.close()
        await server.after_stop()
        sock.close()
        Sanic.unregister_app(app)  # Sanic keeps every app by name: the run's apps would all stay alive


_HASHES: dict[str, str] = {}
"""password → its argon2id hash, made by the first `add_user` of the process that seeds it."""


async def add_user(state: State, username: str, password: str = "password123", *, role: int = 1,
                   status: int = 1, quota: int = 0, group: str = "default") -> int:
    """Seed a user directly (tests of other routes need principals, not the registration flow). The
    password's hash is made once per process and password (`_HASHES`): a real argon2id hash, which every
    app of the run verifies alike, without paying a deliberately slow hash for every user seeded."""
    hashed = _HASHES.get(password) or _HASHES.setdefault(password, await state.passwords.hash(password))
    async with state.db.transaction() as tx:
        users = UserRepository(tx)
        return await users.add(User(
            username=username, password=hashed, display_name=username, role=role, status=status,
            group=group, quota=quota, aff_code=await fresh_aff_code(users), created_at=state.clock.now_s(),
            email="", setting="", remark="", stripe_customer="",
        ))


async def logged_in(running: Running, username: str, password: str = "password123") -> Api:
    api = running.client()
    response = await api.login(username, password)
    assert response.status_code == 200, response.text
    return api


def data_of(response: httpx.Response, status: int = 200) -> Any:
    """Assert a success envelope with `status`; return its `data`."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is True, body
    return body.get("data")


def fails(response: httpx.Response, status: int, mentions: str | None = None, *, prefix: bool = False
          ) -> str:
    """Assert an error envelope with `status` and a message; if given, the message contains `mentions`
    (starts with it when `prefix`: the field a 400 names comes first)."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is False, body
    message = body["message"]
    assert isinstance(message, str) and message, body
    if mentions is not None:
        assert message.startswith(mentions) if prefix else mentions in message, message
    return message


def keep_upstreams_local(running: Running) -> None:
    """Every upstream call of this app goes to 127.0.0.1 (the fakes) or fails like an unreachable host,
    before any DNS lookup: for the fuzzers, whose generated channels point anywhere (an empty `base_url`
    is a real provider's address) and whose model calls and channel tests must never reach the internet.
    Model calls, administrative calls and the checkout all go through `Upstream.open`, so it is the one
    place to check."""
    upstream = running.state.upstream
    send = upstream.open

    async def local_only(call: UpstreamCall, *, seconds: float | None = None
                         ) -> UpstreamResponse:
        host = urlsplit(call.url).hostname
        if host != "127.0.0.1":
            raise httpx.ConnectError(f"{host} is not a test upstream")
        return await send(call, seconds=seconds)

    upstream.open = local_only  # type: ignore[method-assign]  # this app's one client, checked per call


ERROR_MODES = ("statuses", "new-api")
"""The two answers to a refusal: its HTTP status (the default), or new-api's 200 + `success: false` (the
option `NewApiCompatibleErrors`); tests of refusals run in both (`pytest.mark.parametrize("mode", ...)`)."""


async def set_error_mode(running: Running, mode: str) -> None:
    """Set `NewApiCompatibleErrors` for `mode` as `PUT /api/option/` does (validated, stored, broadcast)."""
    await running.state.options.put("NewApiCompatibleErrors", mode == "new-api")


def refused(response: httpx.Response, status: int, mode: str, mentions: str | None = None, *,
            prefix: bool = False, kept: bool = False) -> str:
    """`fails` in either error mode: under "new-api" the refusal answers 200, unless new-api answers it
    with its status too (`kept`, which the caller states: no valid credential, rate limits, ...)."""
    return fails(response, status if kept or mode == "statuses" else 200, mentions, prefix=prefix)
