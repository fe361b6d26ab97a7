"""Every registered route × anonymous / user / admin / root answers as its declared access level says.

The matrix is built from the route metadata, so a route added later is covered by registering it; a route
without a declared level fails `test_every_route_declares_an_access_level` and refuses to start.

It runs in both error modes (`tests.harness.ERROR_MODES`): with `NewApiCompatibleErrors` on, a guard's
refusal of a logged-in caller is 200 + `success: false` + "permission denied" (new-api's classic
middleware/auth.go authHelper answers an insufficient role so), no login stays 401 (authHelper answers 401
too), and no route answers any other 4xx but the 403 asking for a secure verification (new-api's
middleware/secure_verification.go keeps it) and the 404 of an address nothing serves (the console's file
route asked for a file it does not have answers as an unknown route): no route escapes the switch.
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
from tests.harness import ERROR_MODES, Api, Running, add_user, make_config, set_error_mode

ROLES = ("anonymous", "user", "admin", "root")
EXPECTED_DENIAL = {
    Access.PUBLIC: set(),
    Access.USER: {"anonymous"},
    Access.ADMIN: {"anonymous", "user"},
    Access.ROOT: {"anonymous", "user", "admin"},
}


def body_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON object of a reply; {} for another body (the API document's HTML page)."""
    if not response.headers.get("content-type", "").startswith("application/json"):
        return {}
    body = response.json()
    return body if isinstance(body, dict) else {}


def access_denied(response: httpx.Response, mode: str = "statuses") -> bool:
    """A refusal by the guard (not a business rule answering 403 for another reason)."""
    if response.status_code == 401:
        return True
    refusal = 403 if mode == "statuses" else 200
    return response.status_code == refusal and body_of(response).get("message") == "permission denied"


def kept_by_new_api(response: httpx.Response) -> bool:
    """A 4xx new-api answers with its status too: no login (401), a missing secure verification (403 with
    a VERIFICATION_* code), an address nothing serves (404 `no such route`, new-api's NoRoute: here the
    console's file route given a name that is no file of the console)."""
    if response.status_code == 401:
        return True
    if response.status_code == 404 and body_of(response).get("message") == "no such route":
        return True
    return response.status_code == 403 and str(body_of(response).get("code", "")).startswith("VERIFICATION_")


def routes_of(running: Running) -> list[tuple[str, str, Access, bool]]:
    """(method, path, access, whether the route keeps its real statuses under new-api errors)."""
    out = []
    for route in running.app.router.routes:
        access = route.ctx.access
        if access is Access.API_KEY:
            continue  # authenticated by an API key: covered by the gateway's own tests
        for method in sorted(route.methods):
            out.append((method, "/" + route.path, access, bool(getattr(route.ctx, "real_statuses", False))))
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


@pytest.mark.parametrize("mode", ERROR_MODES)
async def test_every_route_answers_per_its_access_level(embedded_app: Running, mode: str) -> None:
    await add_user(embedded_app.state, "root", role=100)
    await set_error_mode(embedded_app, mode)
    routes = routes_of(embedded_app)
    assert len(routes) >= 17
    failures: list[str] = []
    for n, (method, path, access, real_statuses) in enumerate(routes):
        target = await add_user(embedded_app.state, f"target{n}")
        for role in ROLES:
            api = await principal(embedded_app, role, n)
            kwargs: dict[str, Any] = {"json": {}} if method in ("POST", "PUT") else {}
            response = await api.request(method, fill(path, target), **kwargs)
            assert response.status_code != 500, f"{method} {path} as {role}: {response.text}"
            denied = access_denied(response, mode)
            should_deny = role in EXPECTED_DENIAL[access]
            if denied != should_deny:
                failures.append(f"{method} {path} [{access.name}] as {role}: {response.status_code} "
                                f"{response.text[:120]}")
            if should_deny:
                assert response.status_code == (401 if role == "anonymous" else 403 if mode == "statuses"
                                                else 200)
            # a route declared with real_statuses (the payment webhook) answers them in both modes
            if mode == "new-api" and 400 <= response.status_code < 500 and not kept_by_new_api(response) \
                    and not real_statuses:
                failures.append(f"{method} {path} as {role}: {response.status_code} under new-api errors")
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
