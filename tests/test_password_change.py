"""A password change ends every credential issued under the old password: the sessions (tested in
test_user_self.py and test_users_admin.py) and the access token — whether the user changes it or an
admin sets it — on every stack."""

from __future__ import annotations

import httpx

from tests.harness import Running, add_user, logged_in

PASSWORD = "password123"


async def _token(app: Running, username: str) -> tuple[int, str]:
    api = await logged_in(app, username)
    response = await api.get("/api/user/token")
    assert response.status_code == 200, response.text
    assert api.user_id is not None
    return api.user_id, response.json()["data"]


async def _self_with_token(app: Running, user_id: int, token: str) -> int:
    async with httpx.AsyncClient(base_url=app.url, timeout=20) as client:
        response = await client.get("/api/user/self", headers={"Authorization": f"Bearer {token}",
                                                                "New-Api-User": str(user_id)})
    return response.status_code


async def test_changing_ones_password_revokes_the_access_token(app: Running) -> None:
    await add_user(app.state, "alice", PASSWORD)
    uid, token = await _token(app, "alice")
    assert await _self_with_token(app, uid, token) == 200
    api = await logged_in(app, "alice")
    changed = await api.put("/api/user/self", json={"password": "a-new-password-1",
                                                    "original_password": PASSWORD})
    assert changed.status_code == 200, changed.text
    assert await _self_with_token(app, uid, token) == 401
    assert (await api.get("/api/user/self")).status_code == 200  # the session that changed it stays


async def test_an_admin_setting_a_password_revokes_the_access_token(app: Running) -> None:
    await add_user(app.state, "admin", PASSWORD, role=10)
    await add_user(app.state, "bob", PASSWORD)
    uid, token = await _token(app, "bob")
    assert await _self_with_token(app, uid, token) == 200
    admin = await logged_in(app, "admin")
    changed = await admin.put("/api/user/", json={"id": uid, "password": "a-new-password-1"})
    assert changed.status_code == 200, changed.text
    assert await _self_with_token(app, uid, token) == 401


async def test_other_edits_keep_the_access_token(app: Running) -> None:
    await add_user(app.state, "admin", PASSWORD, role=10)
    await add_user(app.state, "carol", PASSWORD)
    uid, token = await _token(app, "carol")
    admin = await logged_in(app, "admin")
    changed = await admin.put("/api/user/", json={"id": uid, "display_name": "Carol"})
    assert changed.status_code == 200, changed.text
    assert await _self_with_token(app, uid, token) == 200
