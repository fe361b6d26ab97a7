"""Two real `tollway serve` processes on one MariaDB and one Redis: concurrent `delete_key` calls on one
multi-key channel, spread over both, never corrupt its key list (docs/api/channels.md#multi-key-channels).

Each call locks the channel's row for its read-change-write, so N deletes of key 0 remove exactly the
first N keys, and the statuses of the keys that remain move with them. Without the lock two calls read
the same list and the second write loses the first one's delete (fewer keys gone, statuses shifted).
Everything is checked over HTTP: the keys are numbered at both ends, so the masked previews of
`get_key_status` show which keys are left and in which order.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.test_e2e_serve import ROOT_PASSWORD, free_port, mariadb_redis_env, serving, setup_root

pytestmark = pytest.mark.slow

KEYS = [f"{n:04d}-key-material-{n:04d}" for n in range(40)]
DISABLED = (5, 17, 30)  # disabled by the admin before the deletes
DELETES = 30


async def _login(base_url: str) -> httpx.AsyncClient:
    client = httpx.AsyncClient(base_url=base_url, timeout=60)
    reply = await client.post("/api/user/login", json={"username": "root", "password": ROOT_PASSWORD})
    assert reply.status_code == 200, reply.text
    client.headers["New-Api-User"] = str(reply.json()["data"]["id"])
    return client


async def _manage(client: httpx.AsyncClient, channel_id: int, action: str, **fields: Any) -> Any:
    reply = await client.post("/api/channel/multi_key/manage",
                              json={"channel_id": channel_id, "action": action, **fields})
    assert reply.status_code == 200, reply.text
    return reply.json()["data"]


async def _scenario(url_one: str, url_two: str) -> None:
    one, two = await _login(url_one), await _login(url_two)
    try:
        created = await one.post("/api/channel/", json={"mode": "multi_to_single", "channel": {
            "name": "many", "type": 24, "key": "\n".join(KEYS), "models": "gemini-2.5-flash"}})
        assert created.status_code == 200, created.text
        [cid] = created.json()["data"]
        for index in DISABLED:
            await _manage(two, cid, "disable_key", key_index=index)

        clients = (one, two)
        results = await asyncio.gather(*(_manage(clients[n % 2], cid, "delete_key", key_index=0)
                                         for n in range(DELETES)))
        assert results == [None] * DELETES

        for client in clients:
            page = await _manage(client, cid, "get_key_status", page_size=100)
            left = [(k["key_preview"][:4], k["key_preview"][-4:], k["status"]) for k in page["keys"]]
            assert left == [(f"{n:04d}", f"{n:04d}", 2 if n in DISABLED else 1) for n in range(DELETES, 40)]
            assert page["total"] == 40 - DELETES and page["manual_disabled_count"] == 1
            view = (await client.get(f"/api/channel/{cid}")).json()["data"]
            assert view["channel_info"]["multi_key_size"] == 40 - DELETES
            assert view["channel_info"]["multi_key_status_list"] == {"0": 2}
    finally:
        await one.aclose()
        await two.aclose()


def test_concurrent_key_deletes_on_two_processes_keep_the_key_list_whole(tmp_path: Path) -> None:
    with mariadb_redis_env(tmp_path / "one", "keys") as (env_one, _, _):
        env_two = {**env_one, "DATA_DIR": str(tmp_path / "two"), "PORT": str(free_port())}  # a second node
        with serving(tmp_path, env_one) as (_, url_one):
            setup_root(url_one, "mysql")
            with serving(tmp_path, env_two) as (_, url_two):
                asyncio.run(_scenario(url_one, url_two))
