"""FakeOpenAI answers in OpenAI's wire format: moderations, models, errors, keys.

The shapes are also checked with the openai SDK's own types and client, pointed at the fake.
"""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from openai.types import ModerationCreateResponse

from tests.fakes import FakeOpenAI
from tests.fakes.fixtures import client_for
from tests.fakes.openai import CATEGORIES

TEXT_ONLY = {"harassment", "harassment/threatening", "hate", "hate/threatening", "illicit", "illicit/violent",
             "sexual/minors"}
IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}


async def moderate(fake: FakeOpenAI, body: dict[str, Any]) -> httpx.Response:
    async with client_for(fake) as client:
        return await client.post("/v1/moderations", json=body)


def check_result(result: dict[str, Any], *, image: bool) -> None:
    for key in ("categories", "category_scores", "category_applied_input_types"):
        assert list(result[key]) == list(CATEGORIES)
    for name, types in result["category_applied_input_types"].items():
        assert types == (["text"] if name in TEXT_ONLY or not image else ["text", "image"])


async def test_moderate_a_string(openai_fake: FakeOpenAI) -> None:
    response = await moderate(openai_fake, {"input": "I will kill you"})
    assert response.status_code == 200 and response.headers["x-request-id"].startswith("req_")
    body = response.json()
    assert body["id"].startswith("modr-") and body["model"] == "omni-moderation-latest"
    [result] = body["results"]
    check_result(result, image=False)
    assert result["flagged"] is True and result["categories"]["violence"] is True
    assert result["category_scores"]["violence"] == 0.9
    assert sum(result["categories"].values()) == 1
    ModerationCreateResponse.model_validate(body)


async def test_moderate_a_list_of_strings_keeps_the_order(openai_fake: FakeOpenAI) -> None:
    body = (await moderate(openai_fake, {"input": ["hello", "KILLING time", "skill"],
                                         "model": "text-moderation-latest"})).json()
    assert body["model"] == "text-moderation-latest"
    assert [r["flagged"] for r in body["results"]] == [False, True, False]
    assert all(s < 0.01 for s in body["results"][0]["category_scores"].values())
    ModerationCreateResponse.model_validate(body)


async def test_moderate_multimodal_parts_gives_one_result(openai_fake: FakeOpenAI) -> None:
    body = (await moderate(openai_fake, {"input": [{"type": "text", "text": "a cat"}, IMAGE]})).json()
    [result] = body["results"]
    check_result(result, image=True)
    assert result["flagged"] is False
    ModerationCreateResponse.model_validate(body)
    text_only = (await moderate(openai_fake, {"input": [{"type": "text", "text": "kill"}]})).json()
    check_result(text_only["results"][0], image=False)
    assert text_only["results"][0]["flagged"] is True


@pytest.mark.parametrize("body", [
    {}, {"input": []}, {"input": 3}, {"input": ["a", {"type": "text", "text": "b"}]},
    {"input": [{"type": "audio"}]}, {"input": "x", "model": 5},
    {"input": [IMAGE], "model": "text-moderation-latest"},
])
async def test_bad_moderation_input(openai_fake: FakeOpenAI, body: dict[str, Any]) -> None:
    response = await moderate(openai_fake, body)
    assert response.status_code == 400
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}
    assert response.json()["error"]["type"] == "invalid_request_error"


async def test_models(openai_fake: FakeOpenAI) -> None:
    openai_fake.models = ["omni-moderation-latest"]
    async with client_for(openai_fake) as client:
        listing = (await client.get("/v1/models")).json()
        one = await client.get("/v1/models/omni-moderation-latest")
        missing = await client.get("/v1/models/gpt-0")
    assert listing == {"object": "list", "data": [
        {"id": "omni-moderation-latest", "object": "model", "created": 1700000000, "owned_by": "openai"}]}
    assert one.json()["id"] == "omni-moderation-latest"
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"


async def test_unknown_path_is_an_openai_404(openai_fake: FakeOpenAI) -> None:
    async with client_for(openai_fake) as client:
        response = await client.post("/v1/nothing", json={})
    assert response.status_code == 404
    assert response.json() == {"error": {"message": "Invalid URL (POST /v1/nothing)",
                                         "type": "invalid_request_error", "param": None, "code": None}}


@pytest.mark.parametrize(("mode", "type_", "code"), [
    ("400", "invalid_request_error", None), ("401", "invalid_request_error", "invalid_api_key"),
    ("403", "request_forbidden", "unsupported_country_region_territory"),
    ("429", "requests", "rate_limit_exceeded"), ("500", "server_error", None)])
async def test_error_bodies(openai_fake: FakeOpenAI, mode: str, type_: str, code: str | None) -> None:
    openai_fake.fail(mode, times=1)
    response = await moderate(openai_fake, {"input": "hi"})
    error = response.json()["error"]
    assert response.status_code == int(mode)
    assert (error["type"], error["code"], error["param"]) == (type_, code, None) and error["message"]


async def test_valid_keys(openai_fake: FakeOpenAI) -> None:
    openai_fake.valid_keys = {"sk-good"}
    async with client_for(openai_fake) as client:
        good = await client.get("/v1/models", headers={"Authorization": "Bearer sk-good"})
        bad = await client.get("/v1/models", headers={"Authorization": "Bearer sk-wrong-key-123456"})
        none = await client.get("/v1/models")
    assert good.status_code == 200
    assert bad.status_code == 401 and bad.json()["error"]["code"] == "invalid_api_key"
    assert "sk-wrong-key-123456" not in bad.json()["error"]["message"]
    assert none.status_code == 401 and none.json()["error"]["code"] is None
    assert openai_fake.received[0].headers["authorization"] == "Bearer sk-good"


async def test_the_openai_sdk_talks_to_it(openai_fake: FakeOpenAI) -> None:
    openai_fake.valid_keys = {"sk-good"}
    client = openai.AsyncOpenAI(api_key="sk-good", base_url=f"{openai_fake.url}/v1", max_retries=0)
    result = await client.moderations.create(input=["kill", "fine"], model="omni-moderation-latest")
    assert [r.flagged for r in result.results] == [True, False]
    assert [m.id async for m in client.models.list()] == openai_fake.models
    openai_fake.fail("429", times=1)
    with pytest.raises(openai.RateLimitError):
        await client.moderations.create(input="x")
    bad = openai.AsyncOpenAI(api_key="sk-bad", base_url=f"{openai_fake.url}/v1", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        await bad.moderations.create(input="x")
    await client.close()
    await bad.close()


async def test_every_balance_endpoint_tells_the_balance_in_its_providers_format(openai_fake: FakeOpenAI
                                                                                  ) -> None:
    openai_fake.balance, openai_fake.used = 42.5, 7.5
    async with client_for(openai_fake) as client:
        async def get(path: str) -> Any:
            response = await client.get(path)
            assert response.status_code == 200, response.text
            return response.json()

        subscription = await get("/v1/dashboard/billing/subscription")
        usage = await get("/v1/dashboard/billing/usage?start_date=2025-01-01&end_date=2025-01-31")
        assert subscription["hard_limit_usd"] - usage["total_usage"] / 100 == 42.5
        credits = (await get("/v1/credits"))["data"]
        assert credits["total_credits"] - credits["total_usage"] == 42.5
        moonshot = await get("/v1/users/me/balance")
        assert moonshot["status"] is True and moonshot["code"] == 0
        assert moonshot["data"]["available_balance"] == 42.5
        silicon = await get("/v1/user/info")
        assert silicon["code"] == 20000 and silicon["data"]["totalBalance"] == "42.5000"
        deepseek = await get("/user/balance")
        assert deepseek["balance_infos"][0] == {"currency": "CNY", "total_balance": "42.50",
                                                "granted_balance": "0.00", "topped_up_balance": "42.50"}
