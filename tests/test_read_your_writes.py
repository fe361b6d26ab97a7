"""Read-your-writes across nodes: once an admin (or a key's owner) got the answer to a change made on node
one, the very next request to node two — addressed directly, no retry, no wait — sees it. Each sequence
runs 50 times, so a broadcast that merely tends to arrive in time cannot pass by luck.

Two app instances on one SQL database (MariaDB, then PostgreSQL) and one Redis; model calls go to the
fake OpenAI upstream. What is checked, on node two right after each answer from node one:
- a channel created, disabled, re-enabled and deleted: routed / 503 without contacting the upstream /
  routed / 404 `model_not_found`;
- an API key disabled and re-enabled by its owner: 401 `token_disabled` / 200;
- the key's owner disabled and re-enabled by an admin: 403 `user_disabled` / 200, and the management
  API refuses their access token at once;
- a model price set and removed by root: 200 / 400 `model_price_error`, and `GET /api/option/` shows
  the value just written.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_key
from tests.harness import Api, Running, add_user, data_of, logged_in

ROUNDS = 50
OPENAI = 1
MODEL = "omni-moderation-latest"


def moderation_client(node: Running, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=node.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)


async def moderate(client: httpx.AsyncClient, model: str = MODEL) -> httpx.Response:
    return await client.post("/v1/moderations", json={"model": model, "input": "hello"})


def code_of(response: httpx.Response) -> str:
    body: dict[str, Any] = response.json()
    return str(body["error"]["code"])


async def funded_caller(node: Running, username: str = "alice") -> tuple[int, int, str]:
    uid = await add_user(node.state, username, quota=10**12)
    kid, key = await seed_key(node.state, uid, unlimited=True)
    return uid, kid, key


async def add_channel(admin: Api, base_url: str, models: str = MODEL) -> int:
    body = {"mode": "single", "channel": {"name": "mod", "type": OPENAI, "key": "sk-upstream",
                                          "models": models, "group": "default", "base_url": base_url}}
    ids = data_of(await admin.post("/api/channel/", json=body))
    assert isinstance(ids, list) and len(ids) == 1
    return int(ids[0])


async def test_channel_changes_route_on_the_other_node_from_the_next_call(
        nodes: tuple[Running, Running], openai_fake: FakeOpenAI) -> None:
    one, two = nodes
    await add_user(one.state, "chadmin", role=10)
    admin = await logged_in(one, "chadmin")
    _, _, key = await funded_caller(one)
    async with moderation_client(two, key) as client:
        response = await moderate(client)
        assert response.status_code == 404 and code_of(response) == "model_not_found"
        for _ in range(ROUNDS):
            cid = await add_channel(admin, openai_fake.url)
            response = await moderate(client)
            assert response.status_code == 200, response.text

            data_of(await admin.put("/api/channel/", json={"id": cid, "status": 2}))
            before = len(openai_fake.received)
            response = await moderate(client)
            assert response.status_code == 503, response.text
            assert len(openai_fake.received) == before  # the disabled channel was not contacted

            data_of(await admin.put("/api/channel/", json={"id": cid, "status": 1}))
            response = await moderate(client)
            assert response.status_code == 200, response.text

            data_of(await admin.delete(f"/api/channel/{cid}"))
            response = await moderate(client)
            assert response.status_code == 404 and code_of(response) == "model_not_found", response.text


async def test_a_key_disabled_by_its_owner_is_refused_on_the_other_node_at_once(
        nodes: tuple[Running, Running], openai_fake: FakeOpenAI) -> None:
    one, two = nodes
    await add_user(one.state, "chadmin", role=10)
    await add_channel(await logged_in(one, "chadmin"), openai_fake.url)
    await funded_caller(one, "bob")
    owner = await logged_in(one, "bob")
    token = data_of(await owner.post("/api/token/", json={"name": "k", "unlimited_quota": True}))
    async with moderation_client(two, f"sk-{token['key'].removeprefix('sk-')}") as client:
        assert (await moderate(client)).status_code == 200  # node two now holds the key in its memo
        for _ in range(ROUNDS):
            data_of(await owner.put("/api/token/?status_only=1", json={"id": token["id"], "status": 2}))
            response = await moderate(client)
            assert response.status_code == 401 and code_of(response) == "token_disabled", response.text
            data_of(await owner.put("/api/token/?status_only=1", json={"id": token["id"], "status": 1}))
            response = await moderate(client)
            assert response.status_code == 200, response.text


async def test_a_user_disabled_by_an_admin_is_refused_on_the_other_node_at_once(
        nodes: tuple[Running, Running], openai_fake: FakeOpenAI) -> None:
    one, two = nodes
    await add_user(one.state, "root", role=100)
    root = await logged_in(one, "root")
    await add_channel(root, openai_fake.url)
    uid, _, key = await funded_caller(one, "carol")
    carol = await logged_in(two, "carol")
    access = data_of(await carol.get("/api/user/token"))
    by_token = two.client()
    by_token.user_id, by_token.token = uid, access
    async with moderation_client(two, key) as client:
        assert (await moderate(client)).status_code == 200
        assert (await by_token.get("/api/user/self")).status_code == 200
        for _ in range(ROUNDS):
            data_of(await root.post("/api/user/manage", json={"id": uid, "action": "disable"}))
            response = await moderate(client)
            assert response.status_code == 403 and code_of(response) == "user_disabled", response.text
            assert (await by_token.get("/api/user/self")).status_code == 403
            data_of(await root.post("/api/user/manage", json={"id": uid, "action": "enable"}))
            response = await moderate(client)
            assert response.status_code == 200, response.text
            assert (await by_token.get("/api/user/self")).status_code == 200


async def test_an_option_change_applies_on_the_other_node_at_once(
        nodes: tuple[Running, Running], openai_fake: FakeOpenAI) -> None:
    one, two = nodes
    await add_user(one.state, "root", role=100)
    root_one = await logged_in(one, "root")
    root_two = await logged_in(two, "root")
    unpriced = "house-moderation-1"
    await add_channel(root_one, openai_fake.url, models=unpriced)
    _, _, key = await funded_caller(one, "dave")
    async with moderation_client(two, key) as client:
        response = await moderate(client, unpriced)
        assert response.status_code == 400 and code_of(response) == "model_price_error"
        for i in range(ROUNDS):
            price = f'{{"{unpriced}": 0.00{i % 9 + 1}}}'
            data_of(await root_one.put("/api/option/", json={"key": "ModelPrice", "value": price}))
            response = await moderate(client, unpriced)
            assert response.status_code == 200, response.text
            listed = {o["key"]: o["value"] for o in data_of(await root_two.get("/api/option/"))}
            assert listed["ModelPrice"].replace(" ", "") == price.replace(" ", "")

            data_of(await root_one.put("/api/option/", json={"key": "ModelPrice", "value": "{}"}))
            response = await moderate(client, unpriced)
            assert response.status_code == 400 and code_of(response) == "model_price_error", response.text
