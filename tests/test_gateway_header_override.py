"""A channel's `header_override` never frames an upstream request (`core/headers.py`).

Proved here, over HTTP against the real app and the fake providers, which record each request's raw head:

- saving a `header_override` that names a header framing the request (`Content-Length`,
  `Transfer-Encoding`, `Connection`, `Keep-Alive`, `Upgrade`, `TE`, `Trailer`, `Host`, `Expect`,
  `HTTP2-Settings`, any `Proxy-*`, in any case) or a name that is no HTTP token (`Content-Length ` with a
  blank) is a 400 naming the header — on create, on `PUT /api/channel/` and on the tag edit — and nothing
  is stored;
- a channel stored before that rule, with such headers in its row: its model calls (OpenAI and Gemini, on
  both upstream transports) reach the upstream framed by the client alone — the whole body under its true
  length, one `Host` (the upstream's), nothing for a proxy — and the same pooled connection carries the
  next call; the override's other headers still go;
- the same for the calls made for an admin: the channel test, the balance and the upstream model list.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from core.enums import ChannelType
from models.channels import Channel
from tests.conftest import Stack
from tests.fakes.base import FakeServer, Recorded
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user, make_config, serve
from tests.test_channels import admin_of, create, fails, row_of

TTS = "gemini-2.5-flash-preview-tts"
MOD = "omni-moderation-latest"
TRANSPORTS = ["aiohttp", "httpx"]

FRAMING = {
    "Content-Length": "5", "Transfer-Encoding": "chunked", "Connection": "close", "Keep-Alive": "timeout=1",
    "Upgrade": "websocket", "TE": "trailers", "Trailer": "X-Sum", "Host": "collector.example.net",
    "Expect": "100-continue", "HTTP2-Settings": "AAMAAABkAAQAAP__", "Proxy-Authorization": "Basic eDp5",
    "Proxy-Connection": "close",
}
NOT_TOKENS = {"Content-Length ": "5", "X Team": "a", "X-Team:": "a", "Hôst": "a", "": "a"}
STORED = {**FRAMING, "content-LENGTH": "7", "proxy-anything": "p", **NOT_TOKENS, "X-Team": "a"}
"""A `header_override` as a channel stored before the rule may hold it."""
ORDINARY = {"X-Team": "a", "OpenAI-Organization": "org-1", "X-Forwarded-Host": "h", "User-Agent": "u/1"}


# ---- on save -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [*FRAMING, "content-length", "HOST", "proxy-anything", *NOT_TOKENS])
async def test_a_framing_or_malformed_header_is_refused_on_save_naming_it(embedded_app: Running,
                                                                         name: str) -> None:
    admin = await admin_of(embedded_app)
    override = {"X-Team": "a", name: "5"}
    reply = await admin.post("/api/channel/", json={"mode": "single", "channel": {
        "name": "framed", "type": ChannelType.GEMINI, "key": "AIza-key", "models": TTS,
        "header_override": override}})
    message = fails(reply, 400, f"header_override: {name!r}", prefix=True)
    assert "frames the request" in message or "is not a header name" in message
    [cid] = await create(admin, key="AIza-key", models=TTS, tag="t1", header_override=ORDINARY)
    fails(await admin.put("/api/channel/", json={"id": cid, "header_override": override}), 400,
          f"header_override: {name!r}", prefix=True)
    fails(await admin.put("/api/channel/tag", json={"tag": "t1", "header_override": override}), 400,
          f"header_override: {name!r}", prefix=True)
    row = await row_of(embedded_app, cid)
    assert row is not None and json.loads(row.header_override) == ORDINARY  # the ordinary ones are kept
    async with embedded_app.state.db.transaction() as tx:
        names = (await tx.scalars(select(Channel.name))).all()
    assert names == ["gem"]  # the refused create stored nothing


# ---- at send time, from a channel stored before the rule -------------------------------------------------

def assert_framed_by_the_client(request: Recorded, fake: FakeServer) -> None:
    """`request` carries the client's framing only, and the override's ordinary header."""
    lines = [line.lower() for line in request.head.decode("latin-1").split("\r\n")[1:] if line]
    names = [line.partition(":")[0] for line in lines]
    assert names.count("content-length") <= 1
    assert request.headers.get("content-length", "0") == str(len(request.body))
    assert names.count("host") == 1 and request.headers["host"] == f"127.0.0.1:{fake.port}"
    for name in ("transfer-encoding", "te", "trailer", "upgrade", "keep-alive", "expect", "http2-settings"):
        assert name not in names, request.head
    assert "close" not in request.headers.get("connection", "").lower()
    assert not [n for n in names if n.startswith("proxy-") or n != n.strip() or " " in n], request.head
    assert request.headers["x-team"] == "a"


@pytest.fixture(params=TRANSPORTS)
async def transport_app(request: pytest.FixtureRequest, embedded_stack: Stack, tmp_path: Path
                        ) -> AsyncIterator[Running]:
    config = make_config(embedded_stack.database_url, tmp_path, upstream_transport=request.param)
    async with serve(config) as running:
        yield running


CALLS: dict[str, tuple[int, str, str, dict[str, Any]]] = {
    # provider: (channel type, model, path, body)
    "openai": (ChannelType.OPENAI, MOD, "/v1/moderations",
               {"model": MOD, "input": "a sentence long enough to make this body seventy-five bytes"}),
    "gemini": (ChannelType.GEMINI, TTS, f"/v1beta/models/{TTS}:generateContent",
               {"contents": [{"parts": [{"text": "Say hi, in a body of some length"}]}],
                "generationConfig": {"responseModalities": ["AUDIO"]}}),
}


@pytest.mark.parametrize("provider", list(CALLS))
async def test_model_calls_are_framed_by_the_client_alone(transport_app: Running, gemini_fake: FakeGemini,
                                                          openai_fake: FakeOpenAI, provider: str) -> None:
    channel_type, model, path, body = CALLS[provider]
    fake: FakeServer = openai_fake if provider == "openai" else gemini_fake
    await seed_channel(transport_app.state, type=channel_type, base_url=fake.url, models=model,
                       header_override=json.dumps(STORED))
    uid = await add_user(transport_app.state, "caller", quota=10_000_000)
    _, key = await seed_key(transport_app.state, uid, unlimited=True)
    async with httpx.AsyncClient(base_url=transport_app.url, timeout=30,
                                 headers={"x-goog-api-key": key, "Authorization": f"Bearer {key}"}) as client:
        for _ in range(3):
            reply = await client.post(path, json=body)
            assert reply.status_code == 200, reply.text
    assert len(fake.received) == 3  # nothing left on the connection was read as a request
    for request in fake.received:
        assert request.json is not None and request.json["contents" if provider == "gemini" else "input"] == \
            body["contents" if provider == "gemini" else "input"]
        assert len(request.body) > 5
        assert_framed_by_the_client(request, fake)
    assert {request.connection for request in fake.received} == {1}  # one pooled connection, reused


async def test_calls_made_for_an_admin_are_framed_by_the_client_alone(embedded_app: Running,
                                                                      openai_fake: FakeOpenAI) -> None:
    cid = await seed_channel(embedded_app.state, type=ChannelType.OPENAI, base_url=openai_fake.url,
                             models=MOD, key="sk-framing-test-key-0001", header_override=json.dumps(STORED))
    admin = await admin_of(embedded_app)
    for route, upstream_path in ((f"/api/channel/test/{cid}", "/v1/moderations"),
                                 (f"/api/channel/update_balance/{cid}", "/v1/dashboard/billing/usage"),
                                 (f"/api/channel/fetch_models/{cid}", "/v1/models")):
        openai_fake.received.clear()
        reply = await admin.get(route)
        assert reply.status_code == 200 and reply.json()["success"] is True, (route, reply.text)
        assert openai_fake.requests_to(upstream_path), route
        for request in openai_fake.received:
            assert_framed_by_the_client(request, openai_fake)
