"""The HTTP conventions every `/api` route shares (docs/API.md#conventions): the envelope on success and on
every error (400 naming the field, 404, 405, 413, 429, 503), `X-Request-Id`, pagination, the per-IP
rate limits (in process and shared through Redis), `TRUSTED_PROXIES`, and Redis going away while the
app serves.

Helpers defined here: `envelope_error` (asserts the error envelope), `FakeRequest`/`FakeConnInfo`
(stand-ins for a Sanic request in the client-IP unit tests), `free_port` and `PrivateRedis` (a throwaway
`redis-server` subprocess that a test may kill).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import re
import shutil
import signal
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from sanic import exceptions as sanic_exc
from sqlalchemy.exc import OperationalError

from backend.base import BackendUnavailable
from server.config import RateLimit
from server.web.client_ip import client_ip
from server.web.errors import to_tollway_error
from server.web.pagination import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Page
from server.web.request_id import request_id_from
from tests.conftest import Stack
from tests.harness import Running, add_user, logged_in, make_config, serve
from tests.services import redis_ping

HEX32 = re.compile(r"[0-9a-f]{32}")
STACK_REDIS = pytest.mark.parametrize("stack", ["mariadb+redis"], indirect=True)


def envelope_error(response: httpx.Response, status: int) -> dict[str, Any]:
    """The response is `status` with the error envelope; returns the body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    assert body["success"] is False
    assert isinstance(body["message"], str) and body["message"]
    assert "Traceback" not in body["message"]
    assert set(body) <= {"success", "message", "data", "code"}
    return body


# ---- envelope ----------------------------------------------------------------------------------------

async def test_success_is_the_envelope(embedded_app: Running) -> None:
    response = await embedded_app.client().get("/api/status")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["success"] is True and body["message"] == ""
    assert isinstance(body["data"], dict)


async def test_not_logged_in_is_a_401_envelope(embedded_app: Running) -> None:
    envelope_error(await embedded_app.client().get("/api/user/self"), 401)


@pytest.mark.parametrize("path", ["/api/no/such/route", "/api/status/extra", "/nothing-here"])
async def test_unknown_route_is_a_404_envelope(embedded_app: Running, path: str) -> None:
    envelope_error(await embedded_app.client().get(path), 404)


@pytest.mark.parametrize(("method", "path"), [("DELETE", "/api/status"), ("POST", "/api/user/self"),
                                              ("GET", "/api/user/login")])
async def test_wrong_method_is_a_405_envelope(embedded_app: Running, method: str, path: str) -> None:
    envelope_error(await embedded_app.client().request(method, path), 405)


async def test_405_names_the_allowed_methods(embedded_app: Running) -> None:
    response = await embedded_app.client().request("DELETE", "/api/status")
    envelope_error(response, 405)
    assert "GET" in response.headers["allow"]


async def test_oversized_headers_are_a_413_envelope_that_says_so(embedded_app: Running) -> None:
    response = await embedded_app.client().get("/api/status", headers={"X-Big": "a" * 20000})
    body = envelope_error(response, 413)
    assert "header" in body["message"]


@pytest.mark.parametrize(("exc", "status"), [
    (sanic_exc.NotFound("x"), 404),
    (sanic_exc.MethodNotAllowed("x", "DELETE", ["GET", "HEAD"]), 405),
    (sanic_exc.PayloadTooLarge("Request body exceeds the size limit"), 413),
    (sanic_exc.BadRequest("x"), 400),
    (sanic_exc.ExpectationFailed("Unknown Expect: x"), 417),
    (sanic_exc.Forbidden("x"), 403),
    (BackendUnavailable("redis unavailable: ConnectionError"), 503),
    (RedisConnectionError("refused"), 503),
    (ConnectionRefusedError(), 503),
    (TimeoutError(), 503),
    (OperationalError("SELECT 1", {}, Exception("gone away")), 503),
    (ValueError("secret detail"), 500),
    (KeyError("password"), 500),
])
def test_every_exception_maps_to_a_status(exc: Exception, status: int) -> None:
    err = to_tollway_error(exc)
    assert err.status == status
    if status == 500:
        assert err.message == "internal error"  # nothing of the original leaks
    if status == 405:
        assert {m.strip() for m in err.headers()["Allow"].split(",")} == {"GET", "HEAD"}


# ---- request bodies ----------------------------------------------------------------------------------

@pytest.mark.parametrize("raw", [b"{not json", b"", b"\xff\xfe{}", b"[1, 2]", b'"text"', b"42", b"null"])
async def test_a_body_that_is_not_a_json_object_is_a_400(embedded_app: Running, raw: bytes) -> None:
    response = await embedded_app.client().post(
        "/api/user/login", content=raw, headers={"Content-Type": "application/json"})
    body = envelope_error(response, 400)
    assert "JSON" in body["message"]


async def test_a_deeply_nested_body_is_a_400_not_a_500(embedded_app: Running) -> None:
    response = await embedded_app.client().post(
        "/api/user/login", content=b"[" * 100_000, headers={"Content-Type": "application/json"})
    envelope_error(response, 400)


@pytest.mark.parametrize(("payload", "field_name"), [
    ({"username": 5, "password": "password123"}, "username"),
    ({"username": "alice", "password": 12345678}, "password"),
    ({"username": ["alice"], "password": "password123"}, "username"),
    ({"username": "alice", "password": {"x": 1}}, "password"),
    ({"username": True, "password": "password123"}, "username"),
    ({"password": "password123"}, "username"),
])
async def test_a_field_of_the_wrong_type_is_a_400_naming_it(embedded_app: Running, payload: dict[str, Any],
                                                            field_name: str) -> None:
    body = envelope_error(await embedded_app.client().post("/api/user/login", json=payload), 400)
    assert body["message"].startswith(field_name)


async def test_unknown_fields_are_ignored(embedded_app: Running) -> None:
    await add_user(embedded_app.state, "alice")
    api = embedded_app.client()
    response = await api.post("/api/user/login", json={
        "username": "alice", "password": "password123", "remember_me": True, "extra": {"a": [1]},
    })
    assert response.status_code == 200, response.text
    assert response.json()["data"]["username"] == "alice"


async def raw_exchange(url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes over one connection and read the whole response (the server closes it)."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request)
        await writer.drain()
        async with asyncio.timeout(20):
            raw = await reader.read()
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
    return int(status_line.split()[1]), headers, body


@pytest.fixture
async def small_body_app(embedded_stack: Stack, tmp_path: Path) -> AsyncIterator[Running]:
    config = make_config(embedded_stack.database_url, tmp_path, max_body_size=2048)
    async with serve(config) as running:
        yield running


async def test_a_body_above_the_limit_is_a_413_envelope(small_body_app: Running) -> None:
    # Refused on its Content-Length, before the body is read (so the body is not sent: a client still
    # uploading when the server answers may see the connection reset instead of the answer).
    request = (b"POST /api/user/login HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
               b"Content-Length: 4096\r\nX-Request-Id: big-body-1\r\n\r\n")
    status, headers, body = await raw_exchange(small_body_app.url, request)
    assert status == 413
    assert headers["content-type"].startswith("application/json")
    assert headers["x-request-id"] == "big-body-1"
    parsed = json.loads(body)
    assert parsed["success"] is False and "too large" in parsed["message"]


async def test_a_chunked_body_above_the_limit_is_a_413_envelope(small_body_app: Running) -> None:
    # A chunk announcing 4096 bytes is refused as soon as its size line arrives (the rest is never
    # sent, so the refusal cannot race the upload).
    request = (b"POST /api/user/login HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
               b"Transfer-Encoding: chunked\r\nX-Request-Id: chunked-1\r\n\r\n1000\r\n" + b"a" * 100)
    status, headers, body = await raw_exchange(small_body_app.url, request)
    assert status == 413
    assert headers["content-type"].startswith("application/json")
    assert headers["x-request-id"] == "chunked-1"
    parsed = json.loads(body)
    assert parsed["success"] is False and parsed["message"]


async def test_a_body_within_the_limit_is_read(small_body_app: Running) -> None:
    padding = "p" * 1500
    response = await small_body_app.client().post(
        "/api/user/login", json={"username": "nobody", "password": "password123", "pad": padding})
    envelope_error(response, 401)  # read and checked, not refused for its size


# ---- X-Request-Id ------------------------------------------------------------------------------------

@pytest.mark.parametrize("rid", ["abc", "A.b_c:d-9", "x" * 128, "0123456789abcdef0123456789abcdef"])
async def test_a_valid_request_id_is_echoed(embedded_app: Running, rid: str) -> None:
    response = await embedded_app.client().get("/api/status", headers={"X-Request-Id": rid})
    assert response.status_code == 200
    assert response.headers["x-request-id"] == rid


@pytest.mark.parametrize("rid", ["", "has space", "x" * 129, "semi;colon", "slash/", "ünïcode", "a\tb"])
async def test_an_invalid_request_id_is_replaced(embedded_app: Running, rid: str) -> None:
    response = await embedded_app.client().get("/api/status", headers={"X-Request-Id": rid.encode()})
    assert response.status_code == 200
    assert HEX32.fullmatch(response.headers["x-request-id"])


async def test_a_request_id_is_made_when_absent_and_differs_per_request(embedded_app: Running) -> None:
    api = embedded_app.client()
    ids = {(await api.get("/api/status")).headers["x-request-id"] for _ in range(3)}
    assert len(ids) == 3 and all(HEX32.fullmatch(i) for i in ids)


@pytest.mark.parametrize(("method", "path", "status"), [
    ("GET", "/api/user/self", 401),
    ("GET", "/api/no/such/route", 404),
    ("DELETE", "/api/status", 405),
    ("POST", "/api/user/login", 400),
])
async def test_the_request_id_is_on_errors_too(embedded_app: Running, method: str, path: str,
                                               status: int) -> None:
    api = embedded_app.client()
    echoed = await api.request(method, path, headers={"X-Request-Id": "err-trace-1"})
    envelope_error(echoed, status)
    assert echoed.headers["x-request-id"] == "err-trace-1"
    made = await api.request(method, path, headers={"X-Request-Id": "not valid!"})
    envelope_error(made, status)
    assert HEX32.fullmatch(made.headers["x-request-id"])


def test_request_id_rule() -> None:
    assert request_id_from("trace-1") == "trace-1"
    assert request_id_from("a" * 128) == "a" * 128
    for bad in (None, "", "a" * 129, "x y", "a\n", "é"):
        assert HEX32.fullmatch(request_id_from(bad))
    assert request_id_from(None) != request_id_from(None)


# ---- pagination --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "page", "size"), [
    ({}, 1, DEFAULT_PAGE_SIZE),
    ({"p": "3"}, 3, 10),
    ({"p": " 2 "}, 2, 10),
    ({"p": "0"}, 1, 10),
    ({"p": "-4"}, 1, 10),
    ({"p": "abc"}, 1, 10),
    ({"p": ""}, 1, 10),
    ({"p": "1.5"}, 1, 10),
    ({"page_size": "25"}, 1, 25),
    ({"ps": "25"}, 1, 25),
    ({"size": "25"}, 1, 25),
    ({"page_size": "1000"}, 1, MAX_PAGE_SIZE),
    ({"page_size": "100"}, 1, 100),
    ({"page_size": "101"}, 1, 100),
    ({"page_size": "0"}, 1, 10),
    ({"page_size": "-1"}, 1, 10),
    ({"page_size": "x"}, 1, 10),
    ({"page_size": "20", "ps": "30", "size": "40"}, 1, 20),
    ({"ps": "30", "size": "40"}, 1, 30),
    ({"page_size": "junk", "ps": "30"}, 1, 30),
    ({"p": ["4", "5"], "page_size": ["7"]}, 4, 7),  # Sanic's `request.args` holds lists
    ({"p": []}, 1, 10),
])
def test_page_from_query_args(args: dict[str, Any], page: int, size: int) -> None:
    parsed = Page.from_args(args)
    assert (parsed.page, parsed.size) == (page, size)
    assert parsed.offset == (page - 1) * size


def test_page_payload() -> None:
    page = Page.from_args({"p": "2", "page_size": "3"})
    assert page.offset == 3
    assert page.payload(["d", "e", "f"], 8) == {
        "items": ["d", "e", "f"], "total": 8, "page": 2, "page_size": 3}


@pytest.mark.parametrize("digits", [19, 40, 5000])
def test_a_huge_page_number_keeps_the_offset_within_sql_bigint(digits: int) -> None:
    page = Page.from_args({"p": "9" * digits, "page_size": "100"})
    assert page.page > 1
    assert page.offset < 2**63
    negative = Page.from_args({"p": "-" + "9" * digits, "page_size": "9" * digits})
    assert (negative.page, negative.size) == (1, MAX_PAGE_SIZE)


async def test_a_huge_page_number_is_an_empty_page_not_an_error(embedded_app: Running) -> None:
    await add_user(embedded_app.state, "admin1", role=10)
    api = await logged_in(embedded_app, "admin1")
    response = await api.get("/api/user/", params={"p": "9" * 30, "page_size": "100"})
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["items"] == [] and data["total"] == 1 and data["page_size"] == 100


# ---- rate limits -------------------------------------------------------------------------------------

async def exhaust(api: Any, n: int, path: str = "/api/status") -> None:
    for i in range(n):
        response = await api.get(path)
        assert response.status_code == 200, (i, response.text)


def assert_rate_limited(response: httpx.Response, most: int) -> None:
    envelope_error(response, 429)
    retry_after = int(response.headers["retry-after"])
    assert 1 <= retry_after <= most


@pytest.fixture
async def limited_app(stack: Stack, tmp_path: Path) -> AsyncIterator[Running]:
    """The app on every stack with 5 `/api` requests per 60 s per IP."""
    config = make_config(stack.database_url, tmp_path, stack.redis_url, stack.prefix,
                         global_rate_limit=RateLimit(5, 60))
    async with serve(config) as running:
        yield running


async def test_the_sixth_api_request_is_a_429_with_retry_after(limited_app: Running) -> None:
    api = limited_app.client()
    await exhaust(api, 5)
    response = await api.get("/api/status", headers={"X-Request-Id": "limited-1"})
    assert_rate_limited(response, 12)
    assert response.headers["x-request-id"] == "limited-1"
    # every /api route shares the budget
    assert_rate_limited(await api.get("/api/setup"), 12)
    assert_rate_limited(await api.post("/api/user/login", json={"username": "a", "password": "b"}), 12)


@STACK_REDIS
async def test_workers_on_one_redis_prefix_share_the_budget(stack: Stack, tmp_path: Path) -> None:
    assert stack.redis_url is not None
    config = make_config(stack.database_url, tmp_path, stack.redis_url, stack.prefix,
                         global_rate_limit=RateLimit(5, 60))
    async with serve(config) as one, serve(config) as two:
        await exhaust(one.client(), 3)
        await exhaust(two.client(), 2)
        assert_rate_limited(await one.client().get("/api/status"), 12)
        assert_rate_limited(await two.client().get("/api/status"), 12)
    other = replace(config, redis_prefix=stack.prefix + "elsewhere:")
    async with serve(other) as three:  # another prefix is another deployment
        await exhaust(three.client(), 5)


async def test_the_critical_limit_applies_to_critical_routes_only(embedded_stack: Stack,
                                                                  tmp_path: Path) -> None:
    config = make_config(embedded_stack.database_url, tmp_path, critical_rate_limit=RateLimit(2, 600))
    async with serve(config) as running:
        api = running.client()
        for _ in range(2):
            envelope_error(await api.post("/api/user/login", json={"username": "x", "password": "y"}), 401)
        assert_rate_limited(await api.post("/api/user/login", json={"username": "x", "password": "y"}), 300)
        # the budget is per IP across every critical route
        assert_rate_limited(await api.post("/api/user/register", json={}), 300)
        assert_rate_limited(await api.post("/api/setup", json={}), 300)
        # routes that are not critical are not limited by it
        await exhaust(api, 10, "/api/status")
        await exhaust(api, 3, "/api/setup")


async def test_a_request_refused_by_one_limit_is_charged_to_neither(embedded_stack: Stack,
                                                                     tmp_path: Path) -> None:
    config = make_config(embedded_stack.database_url, tmp_path, global_rate_limit=RateLimit(5, 60),
                         critical_rate_limit=RateLimit(2, 600))
    async with serve(config) as running:
        api = running.client()
        for _ in range(2):
            envelope_error(await api.post("/api/user/login", json={"username": "x", "password": "y"}), 401)
        for _ in range(3):  # refused by the critical limit, so not counted against the global one
            assert_rate_limited(await api.post("/api/user/login", json={"username": "x", "password": "y"}),
                                300)
        await exhaust(api, 3)  # 2 logins + 3 = the global budget of 5
        assert_rate_limited(await api.get("/api/status"), 12)


async def test_disabled_limits_never_refuse(embedded_app: Running) -> None:
    api = embedded_app.client()
    await exhaust(api, 30)
    for n in range(25):  # distinct accounts: the per-account login lockout is another mechanism
        response = await api.post("/api/user/login", json={"username": f"x{n}", "password": "y"})
        assert response.status_code == 401


async def test_forwarded_for_is_ignored_from_an_untrusted_peer(embedded_stack: Stack, tmp_path: Path) -> None:
    config = make_config(embedded_stack.database_url, tmp_path, global_rate_limit=RateLimit(2, 60))
    async with serve(config) as running:
        api = running.client()
        for n in range(2):
            response = await api.get("/api/status", headers={"X-Forwarded-For": f"10.0.0.{n}"})
            assert response.status_code == 200
        assert_rate_limited(await api.get("/api/status", headers={"X-Forwarded-For": "10.0.0.9"}), 30)


async def test_forwarded_for_is_believed_from_a_trusted_proxy(embedded_stack: Stack, tmp_path: Path) -> None:
    config = make_config(embedded_stack.database_url, tmp_path, global_rate_limit=RateLimit(2, 60),
                         trusted_proxies=(ipaddress.ip_network("127.0.0.0/8"),))
    async with serve(config) as running:
        api = running.client()
        first = {"X-Forwarded-For": "203.0.113.1"}
        for _ in range(2):
            assert (await api.get("/api/status", headers=first)).status_code == 200
        assert_rate_limited(await api.get("/api/status", headers=first), 30)
        # another client behind the same proxy has its own budget
        second = {"X-Forwarded-For": "spoofed, 203.0.113.2"}
        assert (await api.get("/api/status", headers=second)).status_code == 200


# ---- client IP (unit) --------------------------------------------------------------------------------

@dataclass
class FakeConnInfo:
    client_ip: str


@dataclass
class FakeRequest:
    """What `client_ip` reads from a Sanic request."""

    peer: str
    forwarded: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.forwarded is not None:
            self.headers["x-forwarded-for"] = self.forwarded

    @property
    def conn_info(self) -> FakeConnInfo:
        return FakeConnInfo(self.peer)


PROXIES = (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("fd00::/8"))


@pytest.mark.parametrize(("peer", "forwarded", "proxies", "expected"), [
    # no trusted proxies: the header is never read
    ("198.51.100.7", "1.2.3.4", (), "198.51.100.7"),
    # an untrusted peer cannot choose its address
    ("198.51.100.7", "1.2.3.4", PROXIES, "198.51.100.7"),
    # a trusted proxy: the hop it saw
    ("10.0.0.1", "1.2.3.4", PROXIES, "1.2.3.4"),
    # the client prepends a lie; the rightmost untrusted hop is the real one
    ("10.0.0.1", "6.6.6.6, 1.2.3.4", PROXIES, "1.2.3.4"),
    # a chain of trusted proxies is skipped
    ("10.0.0.1", "1.2.3.4, 10.1.1.1, 10.2.2.2", PROXIES, "1.2.3.4"),
    # blanks and empty hops
    ("10.0.0.1", " 1.2.3.4 ,, ", PROXIES, "1.2.3.4"),
    # a trusted proxy that sent no header
    ("10.0.0.1", None, PROXIES, "10.0.0.1"),
    ("10.0.0.1", "", PROXIES, "10.0.0.1"),
    # every hop trusted: the first one
    ("10.0.0.1", "10.9.9.9, 10.8.8.8", PROXIES, "10.9.9.9"),
    # IPv6
    ("fd00::1", "2001:db8::5", PROXIES, "2001:db8::5"),
    ("2001:db8::9", "2001:db8::5", PROXIES, "2001:db8::9"),
    ("fd00::1", "2001:DB8:0::05", PROXIES, "2001:db8::5"),  # one canonical key per address
    # garbage where the proxy's hop should be: fall back to the peer, never use the garbage as an address
    ("10.0.0.1", "1.2.3.4, not-an-ip", PROXIES, "10.0.0.1"),
    ("10.0.0.1", "unknown", PROXIES, "10.0.0.1"),
    ("10.0.0.1", "1.2.3.4, 1.2.3.4:5678", PROXIES, "10.0.0.1"),
])
def test_client_ip(peer: str, forwarded: str | None, proxies: tuple[Any, ...], expected: str) -> None:
    request: Any = FakeRequest(peer, forwarded)
    assert client_ip(request, proxies) == expected


# ---- Redis down --------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PrivateRedis:
    """A throwaway `redis-server` on a free port, without persistence."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary is not None, "redis-server is not installed"
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        async with asyncio.timeout(10):
            while True:
                with contextlib.suppress(Exception):
                    await redis_ping(self.url)
                    return
                await asyncio.sleep(0.05)

    def pause(self) -> None:
        """Freeze the server: connections stay open but nothing answers."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
        self.proc = None


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    server = PrivateRedis()
    try:
        yield server
    finally:
        server.kill()


@STACK_REDIS
async def test_redis_down_is_a_503_not_a_hang(stack: Stack, tmp_path: Path,
                                              private_redis: PrivateRedis) -> None:
    await private_redis.start()
    config = make_config(stack.database_url, tmp_path, private_redis.url, "tw:",
                         global_rate_limit=RateLimit(1000, 60))
    async with serve(config) as running:
        await add_user(running.state, "alice")
        api = await logged_in(running, "alice")
        assert (await api.get("/api/user/self")).status_code == 200
        assert (await api.get("/api/status")).status_code == 200

        private_redis.kill()
        async with asyncio.timeout(30):  # a guard against hanging, not a speed assertion
            response = await api.get("/api/status", headers={"X-Request-Id": "redis-down"})
            envelope_error(response, 503)
            assert response.headers["x-request-id"] == "redis-down"
            envelope_error(await api.get("/api/user/self"), 503)
            envelope_error(await running.client().post(
                "/api/user/login", json={"username": "alice", "password": "password123"}), 503)

        await private_redis.start()  # same port: the app recovers without a restart
        async with asyncio.timeout(30):
            while (await api.get("/api/status")).status_code == 503:
                await asyncio.sleep(0.1)
        assert (await api.get("/api/status")).status_code == 200


@STACK_REDIS
async def test_an_unresponsive_redis_is_a_503_not_a_hang(stack: Stack, tmp_path: Path,
                                                         private_redis: PrivateRedis) -> None:
    await private_redis.start()
    config = make_config(stack.database_url, tmp_path, private_redis.url, "tw:",
                         global_rate_limit=RateLimit(1000, 60), redis_timeout=2.0)  # the default
    async with serve(config) as running:
        await add_user(running.state, "alice")
        api = await logged_in(running, "alice")
        assert (await api.get("/api/user/self")).status_code == 200

        private_redis.pause()
        try:
            async with asyncio.timeout(30):  # a guard against hanging, not a speed assertion
                envelope_error(await api.get("/api/status"), 503)
                envelope_error(await api.get("/api/user/self"), 503)
        finally:
            private_redis.resume()
        async with asyncio.timeout(30):
            while (await api.get("/api/user/self")).status_code == 503:
                await asyncio.sleep(0.1)
        assert (await api.get("/api/user/self")).status_code == 200
