"""The account-security steps across the workers of one real `tollway serve --workers 2` on MariaDB + Redis:
whatever a begin leaves for its finish, a pending 2FA login, the 2FA lock and a secure verification live
in shared storage, so any worker may take the next request.

Two keep-alive connections are pinned to the two workers (each reply's accepting worker is read from /proc,
tests/workers.py) and one browser's session cookie travels over both, so every step below lands on the other
worker than the one before, deterministically:
- a passkey registration, login and verification begun on one worker finish on the other;
- a password login of a 2FA user (the pending session) is finished on the other worker, with a TOTP code
  and with backup codes;
- with 2FA on, `register/begin` is refused until `POST /api/verify` — made on the other worker;
- a passkey verification confirmed on one worker lets the other delete a passkey;
- failed 2FA checks made on both workers count toward one lock, and both then answer 429.
Also many sequential ceremonies over a client that opens a new connection per request all succeed.

Real time here (the processes have their own clocks): the TOTP codes come from pyotp for the current moment.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pyotp
import pytest

from tests.fakes.passkey import SoftPasskey
from tests.passkey_flows import ORIGIN, RP_ID
from tests.test_e2e_serve import ROOT_PASSWORD, mariadb_redis_env, serving, setup_root
from tests.workers import server_workers, wait_for, worker_holding

pytestmark = pytest.mark.slow

READY_DEADLINE = 90.0  # seconds; bounds a hang only
REQUIRED = {"success": False, "message": "secure verification required", "code": "VERIFICATION_REQUIRED"}


# How long the client keeps an idle connection: past the longest wait for a fresh TOTP step (30 s), below
# the server's keep-alive (75 s, server/app.py). httpx's default (5 s) dropped both pinned connections
# during that wait, and the new ones were accepted by whichever worker came first.
KEEPALIVE = httpx.Limits(keepalive_expiry=60.0)


class Pinned:
    """A keep-alive connection to one server worker; every reply is checked to come from that worker."""

    def __init__(self, http: httpx.Client, main_pid: int, port: int, worker: int) -> None:
        self.http, self.main_pid, self.port, self.worker = http, main_pid, port, worker

    @staticmethod
    def worker_of(response: httpx.Response, main_pid: int, port: int) -> int | None:
        stream = response.extensions["network_stream"]
        return worker_holding(main_pid, port, stream.get_extra_info("client_addr")[1])

    def send(self, method: str, path: str, headers: dict[str, str], **kwargs: Any) -> httpx.Response:
        self.http.cookies.clear()  # the browser below carries the cookie, not this connection
        response = self.http.request(method, path, headers=headers, **kwargs)
        worker = self.worker_of(response, self.main_pid, self.port)
        assert worker == self.worker, f"{method} {path}: answered by {worker}, pinned to {self.worker}"
        return response


def pin_two_workers(base_url: str, main_pid: int, port: int) -> tuple[Pinned, Pinned]:
    """Open connections until two of them are held by different workers (the others are closed)."""
    found: dict[int, httpx.Client] = {}
    for _ in range(60):
        http = httpx.Client(base_url=base_url, timeout=30, limits=KEEPALIVE)
        worker = Pinned.worker_of(http.get("/api/status"), main_pid, port)
        if worker is None or worker in found:
            http.close()
        else:
            found[worker] = http
        if len(found) == 2:
            (w1, h1), (w2, h2) = found.items()
            return Pinned(h1, main_pid, port, w1), Pinned(h2, main_pid, port, w2)
    for http in found.values():
        http.close()
    pytest.fail("60 connections were all accepted by one worker")


class Browser:
    """One user agent: its session cookie and `New-Api-User`, sent over whichever connection is given."""

    def __init__(self) -> None:
        self.session = ""
        self.user_id: int | None = None

    def call(self, via: Pinned, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Cookie": f"session={self.session}"} if self.session else {}
        if self.user_id is not None:
            headers["New-Api-User"] = str(self.user_id)
        response = via.send(method, path, headers, **kwargs)
        if "session" in response.cookies:
            self.session = response.cookies["session"]
        data = response.json().get("data") if response.status_code == 200 else None
        if isinstance(data, dict) and isinstance(data.get("id"), int) and path.startswith("/api/user/"):
            self.user_id = data["id"]
        return response


def data(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["success"] is True, body
    return body["data"]


def fresh_totp(totp: pyotp.TOTP, used_step: int) -> tuple[str, int]:
    """A code of a step later than `used_step` (waits for the next step when needed, at most 30 s)."""
    while (step := int(time.time()) // 30) <= used_step:
        time.sleep(step * 30 + 30.2 - time.time())
    return totp.at(step * 30), step


def passkey_login(a: Pinned, b: Pinned, passkey: SoftPasskey) -> Browser:
    """Begin on `a`, finish on `b`."""
    browser = Browser()
    options = data(browser.call(a, "POST", "/api/user/passkey/login/begin"))["options"]
    login = data(browser.call(b, "POST", "/api/user/passkey/login/finish", json=passkey.assert_(options)))
    assert "require_2fa" not in login and login["username"] == "root"
    return browser


def passkey_verification(browser: Browser, a: Pinned, b: Pinned, passkey: SoftPasskey) -> None:
    """verify/begin on `a`, verify/finish on `b`, `POST /api/verify` on `a`."""
    options = data(browser.call(a, "POST", "/api/user/passkey/verify/begin"))["options"]
    finished = browser.call(b, "POST", "/api/user/passkey/verify/finish", json=passkey.assert_(options))
    assert data(finished) == {"verified": True}
    assert data(browser.call(a, "POST", "/api/verify", json={"method": "passkey"}))["verified"] is True


def password_then_code(a: Pinned, b: Pinned, code: str) -> Browser:
    """The password step on `a` (a pending session), step 2 on `b`."""
    browser = Browser()
    first = browser.call(a, "POST", "/api/user/login", json={"username": "root", "password": ROOT_PASSWORD})
    assert data(first) == {"require_2fa": True}
    assert data(browser.call(b, "POST", "/api/user/login/2fa", json={"code": code}))["username"] == "root"
    assert data(browser.call(a, "GET", "/api/user/self"))["role"] == 100
    return browser


def test_ceremonies_pending_logins_lock_and_verification_across_two_workers(tmp_path: Path) -> None:
    with (mariadb_redis_env(tmp_path, "e2e") as (env, _, _),
          serving(tmp_path, env, "--workers", "2") as (proc, base_url)):
        main_pid = proc.popen.pid
        wait_for(lambda: len(server_workers(main_pid)) == 2
                 and all(f"Worker ready [{pid}]" in proc.stdout
                         for pid in server_workers(main_pid).values()),
                 READY_DEADLINE, "two ready workers")
        setup_root(base_url, "mysql")
        a, b = pin_two_workers(base_url, main_pid, int(env["PORT"]))
        try:
            passkey = _the_steps(a, b)
            _many_sequential_ceremonies(base_url, passkey)
        finally:
            a.http.close()
            b.http.close()


def _the_steps(a: Pinned, b: Pinned) -> SoftPasskey:
    """Every step lands on the other worker than the one before; returns root's passkey."""
    root = Browser()
    assert data(root.call(a, "POST", "/api/user/login", json={"username": "root", "password": ROOT_PASSWORD}))
    uid = root.user_id
    assert uid is not None
    for key, value in (("passkey.enabled", True), ("passkey.rp_id", RP_ID), ("passkey.origins", ORIGIN)):
        data(root.call(a, "PUT", "/api/option/", json={"key": key, "value": value}))

    # without 2FA a passkey is added with no verification: begin on a, finish on b
    early = SoftPasskey(RP_ID, ORIGIN, uid)
    options = data(root.call(b, "POST", "/api/user/passkey/register/begin"))["options"]
    data(root.call(a, "POST", "/api/user/passkey/register/finish", json=early.register(options)))

    # 2FA: set up on a, enabled on b
    setup = data(root.call(a, "POST", "/api/user/2fa/setup"))
    totp = pyotp.TOTP(setup["secret"])
    code, used = fresh_totp(totp, -1)
    data(root.call(b, "POST", "/api/user/2fa/enable", json={"code": code}))
    backup = list(setup["backup_codes"])

    # the pending login of a 2FA user is finished on the other worker, both ways
    password_then_code(a, b, backup.pop())
    web = password_then_code(b, a, backup.pop())

    # with 2FA on, register/begin needs a 2FA verification; made on one worker, it holds on the other
    assert web.call(a, "POST", "/api/user/passkey/register/begin").json() == REQUIRED
    assert data(web.call(b, "POST", "/api/verify", json={"method": "2fa", "code": backup.pop()}))["verified"]
    assert data(web.call(a, "GET", "/api/verify/status"))["method"] == "2fa"
    passkey = SoftPasskey(RP_ID, ORIGIN, uid)
    for begin_on, finish_on, made in ((a, b, passkey), (b, a, SoftPasskey(RP_ID, ORIGIN, uid))):
        options = data(web.call(begin_on, "POST", "/api/user/passkey/register/begin"))["options"]
        assert data(web.call(finish_on, "POST", "/api/user/passkey/register/finish",
                             json=made.register(options))) == {"credential_id": made.id}
    assert data(web.call(b, "GET", "/api/user/passkey"))["count"] == 3

    # passkey logins and verifications begun on one worker finish on the other
    phone = passkey_login(a, b, passkey)
    passkey_login(b, a, passkey)
    assert phone.call(b, "DELETE", "/api/user/passkey", params={"credential_id": early.id}).json() == REQUIRED
    passkey_verification(phone, b, a, passkey)
    assert data(phone.call(b, "DELETE", "/api/user/passkey", params={"credential_id": early.id})) == {
        "deleted": 1}
    passkey_verification(phone, a, b, passkey)

    # a TOTP code for the pending login begun on the other worker (a step after the enabling one)
    code, used = fresh_totp(totp, used)
    password_then_code(b, a, code)

    # the lock: failures on both workers count together; then both refuse, a valid code unexamined
    pending = Browser()
    assert data(pending.call(a, "POST", "/api/user/login",
                             json={"username": "root", "password": ROOT_PASSWORD})) == {"require_2fa": True}
    for via, who, path, body, status in (
        (a, pending, "/api/user/login/2fa", {"code": "000000"}, 401),
        (b, pending, "/api/user/login/2fa", {"code": "WRONG-ONE"}, 401),
        (a, web, "/api/verify", {"method": "2fa", "code": "000000"}, 400),
        (b, web, "/api/user/2fa/disable", {"code": "WRONG-TWO"}, 400),
        (a, pending, "/api/user/login/2fa", {"code": "111111"}, 401),  # the 5th
    ):
        response = who.call(via, "POST", path, json=body)
        assert response.status_code == status, (path, response.text)
    for via, who, path, body in ((b, pending, "/api/user/login/2fa", {"code": backup[0]}),
                                 (a, pending, "/api/user/login/2fa", {"code": backup[0]}),
                                 (b, web, "/api/verify", {"method": "2fa", "code": backup[0]})):
        response = who.call(via, "POST", path, json=body)
        assert response.status_code == 429, (path, response.text)
        assert 0 < int(response.headers["retry-after"]) <= 300
    assert data(web.call(b, "GET", "/api/user/2fa/status")) == {
        "enabled": True, "locked": True, "backup_codes_remaining": len(backup)}
    return passkey


def _many_sequential_ceremonies(base_url: str, passkey: SoftPasskey) -> None:
    """A new connection per request (no keep-alive): the workers take turns as they happen to accept."""
    with httpx.Client(base_url=base_url, timeout=30,
                      limits=httpx.Limits(max_keepalive_connections=0)) as http:
        for _ in range(12):
            http.cookies.clear()
            options = data(http.post("/api/user/passkey/login/begin"))["options"]
            login = data(http.post("/api/user/passkey/login/finish", json=passkey.assert_(options)))
            headers = {"New-Api-User": str(login["id"])}
            options = data(http.post("/api/user/passkey/verify/begin", headers=headers))["options"]
            assert data(http.post("/api/user/passkey/verify/finish", headers=headers,
                                  json=passkey.assert_(options))) == {"verified": True}
            assert data(http.post("/api/verify", headers=headers, json={"method": "passkey"}))["verified"]
            assert data(http.get("/api/verify/status", headers=headers))["method"] == "passkey"
