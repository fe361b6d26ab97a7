"""Initial setup (docs/api/accounts.md#setup) over HTTP on every stack.

Proves that `GET /api/setup` and `/api/status` report the state before and after setup; that
`POST /api/setup` validates every field (400 naming it) and creates exactly one root — role 100, status 1,
`Root User`, group `default`, quota 100000000, a fresh aff code, a hashed password — together with the
`SelfUseModeEnabled` / `DemoSiteEnabled` options, without logging the caller in; that a second setup, or a
root that already exists, answers 409; and that two concurrent setups create one root, the other 409.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from models.system import OptionRepository
from models.tables import Setup, User
from server.context import State
from tests.conftest import Stack
from tests.harness import Running, add_user

SETUP: dict[str, Any] = {"username": "root", "password": "rootpassword", "confirmPassword": "rootpassword"}
DATABASE_TYPE = {"sqlite": "sqlite", "mariadb+redis": "mysql", "postgres+redis": "postgres"}
ALREADY = {"success": False, "message": "the system is already set up"}


async def all_users(state: State) -> list[User]:
    async with state.db.transaction() as tx:
        return list((await tx.scalars(select(User).order_by(User.id))).all())


async def stored_options(state: State) -> dict[str, str]:
    async with state.db.transaction() as tx:
        return await OptionRepository(tx).all()


async def setup_rows(state: State) -> int:
    async with state.db.transaction() as tx:
        return int(await tx.scalar(select(func.count()).select_from(Setup)) or 0)


async def setup_info(app: Running) -> dict[str, Any]:
    response = await app.client().get("/api/setup")
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


async def status_setup_flag(app: Running) -> bool:
    response = await app.client().get("/api/status")
    assert response.status_code == 200, response.text
    flag: bool = response.json()["data"]["setup"]
    return flag


def session_cookies(response: httpx.Response) -> list[str]:
    return [h for h in response.headers.get_list("set-cookie") if h.startswith("session=")]


async def test_get_setup_before_setup_reports_the_database(app: Running, stack: Stack) -> None:
    assert await setup_info(app) == {
        "status": False, "root_init": False, "database_type": DATABASE_TYPE[stack.name],
    }
    assert await status_setup_flag(app) is False


async def test_setup_creates_root_and_does_not_log_in(app: Running) -> None:
    api = app.client()
    response = await api.post("/api/setup", json={**SETUP, "username": "  root  "})
    assert response.status_code == 200, response.text
    assert response.json() == {"success": True, "message": "setup complete", "data": None}
    assert session_cookies(response) == []  # setup does not log the caller in

    users = await all_users(app.state)
    assert len(users) == 1
    root = users[0]
    assert (root.username, root.role, root.status, root.display_name, root.group, root.quota) == (
        "root", 100, 1, "Root User", "default", 100_000_000)
    assert root.aff_code is not None and re.fullmatch(r"[A-Za-z0-9]{8}", root.aff_code)
    assert root.password != SETUP["password"] and root.password.startswith("$argon2id$")
    assert root.deleted_at is None
    assert await setup_rows(app.state) == 1

    assert await setup_info(app) == {"status": True, "root_init": False, "database_type": ""}
    assert await status_setup_flag(app) is True

    # The same client is still anonymous; the new root can log in with the chosen password.
    anonymous = await api.get("/api/user/self", headers={"New-Api-User": str(root.id)})
    assert anonymous.status_code == 401
    login = await app.client().login("root", SETUP["password"])
    assert login.status_code == 200, login.text
    assert login.json()["data"]["role"] == 100


async def test_setup_stores_the_mode_options(app: Running) -> None:
    response = await app.client().post("/api/setup", json={**SETUP, "SelfUseModeEnabled": True,
                                                           "DemoSiteEnabled": False})
    assert response.status_code == 200, response.text
    options = await stored_options(app.state)
    assert options["SelfUseModeEnabled"] == "true"
    assert options["DemoSiteEnabled"] == "false"
    status = (await app.client().get("/api/status")).json()["data"]
    assert status["self_use_mode_enabled"] is True and status["demo_site_enabled"] is False


async def test_setup_mode_options_default_to_false(app: Running) -> None:
    response = await app.client().post("/api/setup", json=SETUP)
    assert response.status_code == 200, response.text
    options = await stored_options(app.state)
    assert (options["SelfUseModeEnabled"], options["DemoSiteEnabled"]) == ("false", "false")


async def test_second_setup_conflicts(app: Running) -> None:
    first = await app.client().post("/api/setup", json=SETUP)
    assert first.status_code == 200, first.text
    again = await app.client().post("/api/setup", json={**SETUP, "username": "intruder",
                                                        "SelfUseModeEnabled": True})
    assert again.status_code == 409
    assert again.json() == ALREADY
    assert [u.username for u in await all_users(app.state)] == ["root"]
    assert (await stored_options(app.state))["SelfUseModeEnabled"] == "false"


async def test_an_existing_root_means_the_system_is_set_up(app: Running) -> None:
    await add_user(app.state, "oldroot", role=100)
    assert (await setup_info(app))["status"] is True
    assert await status_setup_flag(app) is True
    response = await app.client().post("/api/setup", json=SETUP)
    assert response.status_code == 409
    assert response.json() == ALREADY
    assert [u.username for u in await all_users(app.state)] == ["oldroot"]


@pytest.mark.parametrize("callers", [2, 8])
async def test_concurrent_setups_create_exactly_one_root(app: Running, callers: int) -> None:
    """At least two concurrent callers; eight because two rarely overlap inside the transaction (with
    eight, dropping the `setups` row collision lets a second root through on MariaDB and PostgreSQL)."""
    responses = await asyncio.gather(*(
        app.client().post("/api/setup", json={**SETUP, "username": f"root_{i}"}) for i in range(callers)
    ))
    statuses = [r.status_code for r in responses]
    assert sorted(statuses) == [200] + [409] * (callers - 1), [r.text for r in responses]
    assert all(r.json() == ALREADY for r in responses if r.status_code == 409)
    roots = [u for u in await all_users(app.state) if u.role == 100]
    assert len(roots) == 1
    assert roots[0].username == f"root_{statuses.index(200)}"
    assert await setup_rows(app.state) == 1


INVALID_BODIES: list[tuple[str, dict[str, Any], str]] = [
    ("empty object", {}, "username"),
    ("missing username", {k: v for k, v in SETUP.items() if k != "username"}, "username"),
    ("null username", {**SETUP, "username": None}, "username"),
    ("blank username", {**SETUP, "username": "   "}, "username"),
    ("username too long", {**SETUP, "username": "r" * 21}, "username"),
    ("username with a control character", {**SETUP, "username": "ro\x07ot"}, "username"),
    ("username not a string", {**SETUP, "username": 5}, "username"),
    ("missing password", {"username": "root", "confirmPassword": "rootpassword"}, "password"),
    ("password too short", {**SETUP, "password": "short12", "confirmPassword": "short12"}, "password"),
    ("password too long", {**SETUP, "password": "p" * 65, "confirmPassword": "p" * 65}, "password"),
    ("password not a string", {**SETUP, "password": 12345678, "confirmPassword": "12345678"}, "password"),
    ("mismatched confirmation", {**SETUP, "confirmPassword": "rootpassworD"}, "confirmPassword"),
    ("missing confirmation", {"username": "root", "password": "rootpassword"}, "confirmPassword"),
    ("confirmation not a string", {**SETUP, "confirmPassword": ["rootpassword"]}, "confirmPassword"),
    ("self-use mode not a boolean", {**SETUP, "SelfUseModeEnabled": "true"}, "SelfUseModeEnabled"),
    ("demo mode not a boolean", {**SETUP, "DemoSiteEnabled": 1}, "DemoSiteEnabled"),
]


@pytest.mark.parametrize(("body", "field"), [(b, f) for _, b, f in INVALID_BODIES],
                         ids=[name for name, _, _ in INVALID_BODIES])
async def test_setup_rejects_an_invalid_field(embedded_app: Running, body: dict[str, Any],
                                              field: str) -> None:
    response = await embedded_app.client().post("/api/setup", json=body)
    assert response.status_code == 400, response.text
    payload = response.json()
    assert payload["success"] is False
    assert payload["message"].startswith(f"{field}: "), payload["message"]
    assert await all_users(embedded_app.state) == []
    assert (await setup_info(embedded_app))["status"] is False


@pytest.mark.parametrize(("content", "message"), [
    (b"username=root&password=rootpassword", "request body is not valid JSON"),
    (b"", "request body must be a JSON object"),
    (b'["root", "rootpassword"]', "request body must be a JSON object"),
    (b"\xff\xfe", "request body is not valid JSON"),
], ids=["form-encoded", "empty", "array", "not utf-8"])
async def test_setup_rejects_a_body_that_is_not_a_json_object(embedded_app: Running, content: bytes,
                                                              message: str) -> None:
    response = await embedded_app.client().post("/api/setup", content=content,
                                                headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.json() == {"success": False, "message": message}
    assert await all_users(embedded_app.state) == []


async def test_setup_accepts_the_boundary_lengths(embedded_app: Running) -> None:
    body = {"username": "r" * 20, "password": "p" * 64, "confirmPassword": "p" * 64}
    response = await embedded_app.client().post("/api/setup", json=body)
    assert response.status_code == 200, response.text
    assert [u.username for u in await all_users(embedded_app.state)] == ["r" * 20]
    login = await embedded_app.client().login("r" * 20, "p" * 64)
    assert login.status_code == 200, login.text
