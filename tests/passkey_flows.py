"""Helpers of the passkey tests: switch passkeys on for a fixed relying party, and run the ceremonies over
HTTP with a software passkey (tests/fakes/passkey.py)."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import select

from models.passkeys import PasskeyCredential
from tests.fakes.passkey import SoftPasskey
from tests.harness import Api, Running, data_of

RP_ID = "tollway.test"
ORIGIN = "https://tollway.test"


async def enable_passkeys(running: Running, **extra: Any) -> None:
    options = running.state.options
    await options.put("passkey.enabled", True)
    await options.put("passkey.rp_id", RP_ID)
    await options.put("passkey.origins", ORIGIN)
    for key, value in extra.items():
        await options.put(key, value)


def new_passkey(user_id: int) -> SoftPasskey:
    return SoftPasskey(RP_ID, ORIGIN, user_id)


async def begin(api: Api, kind: str) -> dict[str, Any]:
    options: dict[str, Any] = data_of(await api.post(f"/api/user/passkey/{kind}/begin"))["options"]
    return options


async def register(api: Api, passkey: SoftPasskey) -> str:
    options = await begin(api, "register")
    credential_id: str = data_of(await api.post("/api/user/passkey/register/finish",
                                                json=passkey.register(options)))["credential_id"]
    return credential_id


async def try_login(running: Running, passkey: SoftPasskey, **assert_kw: Any) -> tuple[Api, httpx.Response]:
    """A fresh anonymous client that logs in with `passkey` (the reply is returned, whatever it is)."""
    api = running.client()
    options = await begin(api, "login")
    response = await api.post("/api/user/passkey/login/finish", json=passkey.assert_(options, **assert_kw))
    if response.status_code == 200:
        api.user_id = response.json()["data"]["id"]
    return api, response


async def verify(api: Api, passkey: SoftPasskey) -> httpx.Response:
    options = await begin(api, "verify")
    return await api.post("/api/user/passkey/verify/finish", json=passkey.assert_(options))


def session_of(api: Api) -> str:
    raw = api.http.cookies.get("session")
    assert raw, "no session cookie"
    return str(raw)


async def stored(running: Running, credential_id: str) -> PasskeyCredential | None:
    async with running.state.db.transaction() as tx:
        row: PasskeyCredential | None = await tx.scalar(
            select(PasskeyCredential).where(PasskeyCredential.credential_id == credential_id))
        return row


def refused(response: httpx.Response, status: int, message: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["success"] is False
    if message is not None:
        assert body["message"] == message, body
    return body
