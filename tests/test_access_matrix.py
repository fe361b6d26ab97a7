"""Every registered route × anonymous / user / admin / root answers as its declared access level says.

The matrix is built from the route metadata, so a route added later is covered by registering it; a route
without a declared level fails `test_every_route_declares_an_access_level` and refuses to start.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from sanic import Blueprint
from sanic.response import text

from server.app import create_app, undeclared_routes
from server.web.access import Access
from tests.harness import Api, Running, add_user, make_config

ROLES = ("anonymous", "user", "admin", "root")
EXPECTED_DENIAL = {
    Access.PUBLIC: set(),
    Access.USER: {"anonymous"},
    Access.ADMIN: {"anonymous", "user"},
    Access.ROOT: {"anonymous", "user", "admin"},
}


def access_denied(response: httpx.Response) -> bool:
    """A refusal by the guard (not a business rule answering 403 for another reason)."""
    if response.status_code == 401:
        return True
    return response.status_code == 403 and response.json().get("message") == "permission denied"


def routes_of(running: Running) -> list[tuple[str, str, Access]]:
    out = []
    for route in running.app.router.routes:
        access = route.ctx.access
        if access is Access.API_KEY:
            continue  # authenticated by an API key: covered by the gateway's own tests
        for method in sorted(route.methods):
            out.append((method, "/" + route.path, access))
    return sorted(out)


def fill(path: str, target_id: int) -> str:
    return re.sub(r"<[^>]+>", str(target_id), path)


async def principal(running: Running, role: str, n: int) -> Api:
    api = running.client()
    if role == "anonymous":
        return api
    name = "root" if role == "root" else f"{role}{n}"
    if role != "root":
        await add_user(running.state, name, role=10 if role == "admin" else 1)
    response = await api.login(name, "password123")
    assert response.status_code == 200, response.text
    return api


async def test_every_route_answers_per_its_access_level(embedded_app: Running) -> None:
    await add_user(embedded_app.state, "root", role=100)
    routes = routes_of(embedded_app)
    assert len(routes) >= 17
    failures: list[str] = []
    for n, (method, path, access) in enumerate(routes):
        target = await add_user(embedded_app.state, f"target{n}")
        for role in ROLES:
            api = await principal(embedded_app, role, n)
            kwargs: dict[str, Any] = {"json": {}} if method in ("POST", "PUT") else {}
            response = await api.request(method, fill(path, target), **kwargs)
            assert response.status_code != 500, f"{method} {path} as {role}: {response.text}"
            denied = access_denied(response)
            should_deny = role in EXPECTED_DENIAL[access]
            if denied != should_deny:
                failures.append(f"{method} {path} [{access.name}] as {role}: {response.status_code} "
                                f"{response.text[:120]}")
            if should_deny:
                assert response.status_code == (401 if role == "anonymous" else 403)
    assert not failures, "\n".join(failures)


def test_every_route_declares_an_access_level(tmp_path: Any) -> None:
    app = create_app(make_config("sqlite+aiosqlite:///:memory:", tmp_path), name="matrix_declared")
    assert undeclared_routes(app) == []


async def test_a_route_without_access_level_is_refused_at_start(tmp_path: Any, sqlite_url: str) -> None:
    config = make_config(sqlite_url, tmp_path)
    bp = Blueprint("undeclared")

    @bp.get("/api/undeclared")
    async def handler(request: Any) -> Any:
        return text("should never be served")

    app = create_app(config, name="matrix_undeclared")
    app.blueprint(bp)
    assert undeclared_routes(app) == ["['GET'] /api/undeclared"]
    with pytest.raises(RuntimeError, match="routes without an access level"):
        server = await app.create_server(host="127.0.0.1", port=0, return_asyncio_server=True)
        assert server is not None
        await server.startup()
        await server.before_start()
