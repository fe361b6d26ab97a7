"""Replies that carry a secret say `Cache-Control: no-store` (and `Pragma: no-cache`), declared once per
route (server/web/no_store.py):

- over the whole route table, a route is flagged `secret` exactly when its declared reply holds a
  `Secret` (a marked field of a reply model, or the reply itself), and the routes known to show one are
  among them — so a new route answering a marked model cannot forget the flag;
- against the served app: each flagged route answers `no-store`, errors included; the secret-carrying
  replies (access token, key creation and reveal, 2FA set-up, QR code and backup codes, redemption codes
  created and listed) do on success; a reply that sets the session cookie does; an ordinary reply does not;
- the API document says it (`x-no-store`, the header, `x-secret` on the fields).
"""

from __future__ import annotations

import re
from typing import Any

import httpx
from pydantic import BaseModel
from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.app import create_app
from server.web.access import Access, route
from server.web.envelope import ok
from server.web.no_store import Secret, carries_secret
from server.web.openapi import document
from server.web.pagination import Paged
from server.web.schema import Reply
from tests.harness import Api, Running, add_user, data_of, logged_in, make_config
from tests.test_two_factor import code_now, enable, first_step, mid_step

PASSWORD = "password123"
# every route whose reply shows a secret today (the walk over the declared replies must find each)
SHOWS_A_SECRET = {
    ("GET", "/api/user/token"),
    ("POST", "/api/token/"), ("GET", "/api/token/"), ("GET", "/api/token/search"),
    ("GET", "/api/token/<token_id>"), ("PUT", "/api/token/"), ("POST", "/api/token/<token_id>/key"),
    ("POST", "/api/channel/<channel_id>/key"),
    ("POST", "/api/user/2fa/setup"), ("GET", "/api/user/2fa/qr"), ("POST", "/api/user/2fa/backup_codes"),
    ("POST", "/api/redemption/"), ("GET", "/api/redemption/"), ("GET", "/api/redemption/search"),
    ("GET", "/api/redemption/<redemption_id>"), ("PUT", "/api/redemption/"),
}


def mismatched(app: Any) -> list[str]:
    """Routes whose `secret` flag disagrees with their declared reply."""
    out = []
    for r in app.router.routes:
        ctx = r.ctx
        if not getattr(ctx, "declared", False):
            continue
        if bool(ctx.secret) != carries_secret(ctx.reply):
            state = ("flagged, but its reply holds no Secret" if ctx.secret
                     else "reply holds a Secret, not flagged")
            out.append(f"{sorted(r.methods)} {ctx.path_template}: {state}")
    return sorted(out)


def flagged(app: Any) -> set[tuple[str, str]]:
    return {(m, r.ctx.path_template) for r in app.router.routes if getattr(r.ctx, "secret", False)
            for m in r.methods}


def no_store(response: httpx.Response) -> bool:
    headers = response.headers
    return headers.get("cache-control") == "no-store" and headers.get("pragma") == "no-cache"


# ---- the route table -----------------------------------------------------------------------------------

def test_a_route_is_flagged_secret_exactly_when_its_reply_carries_a_secret(tmp_path: Any) -> None:
    app = create_app(make_config("sqlite+aiosqlite:///:memory:", tmp_path), name="no_store_table")
    assert mismatched(app) == []
    assert flagged(app) >= SHOWS_A_SECRET


class _Shown(Reply):
    id: int
    token: Secret


def test_a_new_route_showing_a_secret_without_the_flag_is_reported(tmp_path: Any) -> None:
    app = create_app(make_config("sqlite+aiosqlite:///:memory:", tmp_path), name="no_store_forgot")
    bp = Blueprint("forgetful")

    @route(bp, "GET", "/api/forgetful", access=Access.USER, reply=list[_Shown])
    async def forgetful(request: Request) -> HTTPResponse:
        """A route that forgot the flag."""
        return ok([])

    @route(bp, "GET", "/api/overcautious", access=Access.USER, reply=int, secret=True)
    async def overcautious(request: Request) -> HTTPResponse:
        """A route flagged with nothing secret to show."""
        return ok(0)

    app.blueprint(bp)
    assert mismatched(app) == ["['GET'] /api/forgetful: reply holds a Secret, not flagged",
                               "['GET'] /api/overcautious: flagged, but its reply holds no Secret"]


class _Inner(BaseModel):
    code: Secret


class _Outer(BaseModel):
    name: str
    inner: _Inner | None = None


class _Plain(BaseModel):
    name: str
    key: str


def test_the_walk_finds_a_secret_wherever_the_reply_holds_it() -> None:
    for declared in (Secret, list[Secret], _Inner, _Outer, list[_Outer], dict[str, _Inner], Paged[_Inner],
                     _Inner | int, _Shown, Paged[_Shown]):
        assert carries_secret(declared), declared
    for declared in (str, int, None, list[str], _Plain, Paged[_Plain], dict[str, list[_Plain]]):
        assert not carries_secret(declared), declared


def test_the_document_says_which_replies_are_not_stored(tmp_path: Any) -> None:
    app = create_app(make_config("sqlite+aiosqlite:///:memory:", tmp_path), name="no_store_doc")
    doc = document(app)
    marked = set()
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            if op.get("x-no-store"):
                marked.add((method.upper(), path))
                header = op["responses"]["200"]["headers"]["Cache-Control"]["schema"]
                assert header["const"] == "no-store" and "no-store" in op["description"]
    assert ("GET", "/api/user/token") in marked and ("POST", "/api/token/{token_id}/key") in marked
    assert ("GET", "/api/user/self") not in marked
    schemas = doc["components"]["schemas"]
    assert schemas["TokenView"]["properties"]["key"]["x-secret"] is True
    assert schemas["TwoFactorSetup"]["properties"]["backup_codes"]["items"]["x-secret"] is True
    assert "x-secret" not in schemas["TokenView"]["properties"]["name"]


# ---- the served app ------------------------------------------------------------------------------------

async def test_every_flagged_route_answers_no_store_even_when_it_refuses(embedded_app: Running) -> None:
    await add_user(embedded_app.state, "root", role=100)
    root = await logged_in(embedded_app, "root")
    routes = flagged(embedded_app.app)
    assert routes >= SHOWS_A_SECRET
    missing = []
    for method, path in sorted(routes):
        kwargs: dict[str, Any] = {"json": {}} if method in ("POST", "PUT") else {}
        response = await root.request(method, re.sub(r"<[^>]+>", "999", path), **kwargs)
        if not no_store(response):
            missing.append(f"{method} {path}: {response.status_code} {dict(response.headers)}")
    assert not missing, "\n".join(missing)


async def test_the_replies_that_show_a_secret_are_not_stored(embedded_app: Running) -> None:
    state = embedded_app.state
    await add_user(state, "root", role=100, quota=10**9)
    await add_user(state, "alice", PASSWORD)
    root = await logged_in(embedded_app, "root")
    alice = await logged_in(embedded_app, "alice")

    token = await alice.get("/api/user/token")
    assert no_store(token) and data_of(token)
    created = await alice.post("/api/token/", json={"name": "k"})
    assert no_store(created) and data_of(created)["key"].startswith("sk-")
    key_id = data_of(created)["id"]
    for response in (await alice.get("/api/token/"), await alice.get(f"/api/token/{key_id}"),
                     await alice.post(f"/api/token/{key_id}/key")):
        assert no_store(response) and response.status_code == 200, response.text

    setup = await alice.post("/api/user/2fa/setup")
    assert no_store(setup) and data_of(setup)["secret"]
    qr = await alice.get("/api/user/2fa/qr")
    assert no_store(qr) and qr.headers["content-type"].startswith("image/svg+xml")
    assert qr.headers["x-content-type-options"] == "nosniff"

    codes = await root.post("/api/redemption/", json={"name": "gift", "quota": 100, "count": 2})
    assert no_store(codes) and len(data_of(codes)) == 2
    listed = await root.get("/api/redemption/")
    assert no_store(listed) and data_of(listed)["items"][0]["key"] in data_of(codes)

    ordinary = await alice.get("/api/user/self")
    assert ordinary.status_code == 200 and "cache-control" not in ordinary.headers


async def test_new_backup_codes_are_not_stored(embedded_app: Running) -> None:
    await add_user(embedded_app.state, "alice", PASSWORD)
    alice = await logged_in(embedded_app, "alice")
    secret, _ = await enable(embedded_app, alice)
    mid_step(embedded_app)
    fresh = await alice.post("/api/user/2fa/backup_codes", json={"code": code_now(embedded_app, secret)})
    assert no_store(fresh) and len(data_of(fresh)["backup_codes"]) == 10


async def test_every_reply_that_sets_the_session_cookie_is_not_stored(embedded_app: Running) -> None:
    await add_user(embedded_app.state, "alice", PASSWORD)
    login = await embedded_app.client().post("/api/user/login", json={"username": "alice",
                                                                        "password": PASSWORD})
    assert login.status_code == 200 and "session=" in login.headers["set-cookie"] and no_store(login)
    alice = Api(embedded_app.clients[-1])
    alice.user_id = data_of(login)["id"]
    secret, _ = await enable(embedded_app, alice)
    pending = await first_step(embedded_app, "alice")  # the password step sets a pending session
    mid_step(embedded_app)
    second = await pending.post("/api/user/login/2fa", json={"code": code_now(embedded_app, secret)})
    assert data_of(second)["username"] == "alice" and no_store(second)
