"""Where a channel's key is sent, and who may change it (docs/SECURITY.md).

Proved here, over HTTP against the real app:
- an admin who changes where a keyed channel's key goes (`base_url`, `type`, `header_override`, the
  `proxy` of `setting`) without entering the key again gets a 403 naming the field, and nothing changes
  in SQL or in routing; with the key (which replaces the stored one) it is a 200, and root needs no key;
  other fields, and destination values sent back unchanged, need nothing (all stacks);
- without `UPSTREAM_ALLOW_PRIVATE`, a `base_url` pointing at loopback, private, link-local (metadata),
  carrier-grade NAT, unspecified, multicast or IPv4-mapped addresses, or at a name resolving to one, is a
  400 naming `base_url` on create and on update;
- at call time, a channel row written straight to SQL with such a destination (a literal address, or a
  name resolving to loopback) is never contacted — on both transports — and the call fails with the
  gateway's 503 in the Google shape, charging nothing; allowing the fake's network lets the same call
  through;
- `UPSTREAM_ALLOW_PRIVATE` reads false, true or a list of networks.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.config import ConfigError, from_env
from server.destinations import ANY_ADDRESS
from tests.conftest import Stack
from tests.fakes.gemini import FakeGemini
from tests.gateway import seed_channel, seed_key
from tests.harness import Api, Running, add_user, data_of, fails, logged_in, make_config, serve
from tests.test_channels import GEMINI, OPENAI, admin_of, channel_body, create, keys_in_db, row_of

TTS = "gemini-2.5-flash-preview-tts"
SPEECH_BODY = {"contents": [{"parts": [{"text": "Say hi"}]}],
               "generationConfig": {"responseModalities": ["AUDIO"]}}
PUBLIC_URL = "https://gl.example.com"
ELSEWHERE = "https://collector.example.net"


async def root_of(app: Running) -> Api:
    await add_user(app.state, "chroot", role=100)
    return await logged_in(app, "chroot")


async def put(api: Api, cid: int, **fields: Any) -> httpx.Response:
    return await api.put("/api/channel/", json={"id": cid, **fields})


# ---- who may change the destination ----------------------------------------------------------------

REDIRECTS: list[tuple[dict[str, Any], str]] = [
    ({"base_url": ELSEWHERE}, "base_url"),
    ({"base_url": ""}, "base_url"),  # back to the type's default host: still another destination
    ({"type": OPENAI}, "type"),
    ({"header_override": {"X-Forwarded-Host": "collector.example.net"}}, "header_override"),
    ({"setting": {"proxy": "http://proxy.example.net:3128"}}, "setting"),
    ({"name": "renamed", "base_url": ELSEWHERE, "key": ""}, "base_url"),  # "" keeps the key: not entered
]


async def test_an_admin_cannot_send_a_keyed_channel_elsewhere_without_its_key(app: Running) -> None:
    admin = await admin_of(app)
    [cid] = await create(admin, base_url=PUBLIC_URL, header_override={"X-Org": "acme"},
                         setting='{"proxy":""}')
    before = await row_of(app, cid)
    assert before is not None
    for fields, field in REDIRECTS:
        message = fails(await put(admin, cid, **fields), 403, f"{field}:")
        assert "root" in message and "key" in message
    after = await row_of(app, cid)
    assert after is not None
    for column in ("name", "type", "base_url", "header_override", "setting", "key_encrypted", "key_digest"):
        assert getattr(after, column) == getattr(before, column), column
    routed = app.state.channels.get(cid)
    assert routed is not None and routed.base_url == PUBLIC_URL and routed.type == GEMINI

    [multi] = await create(admin, "multi_to_single", key="k1\nk2", base_url=PUBLIC_URL)
    appended = await put(admin, multi, base_url=ELSEWHERE, key="k3", key_mode="append")
    fails(appended, 403, "base_url:")  # the stored keys would follow the new key to the new place
    row = await row_of(app, multi)
    assert row is not None and row.base_url == PUBLIC_URL and keys_in_db(app, row) == ["k1", "k2"]


async def test_with_the_key_an_admin_may_and_root_may_without_it(app: Running) -> None:
    admin = await admin_of(app)
    [cid] = await create(admin, base_url=PUBLIC_URL)
    view = data_of(await put(admin, cid, base_url=ELSEWHERE, key="AIza-their-own"))
    assert view["base_url"] == ELSEWHERE and view["key"] == ""
    row = await row_of(app, cid)
    assert row is not None and keys_in_db(app, row) == ["AIza-their-own"]
    assert app.state.channels.get(cid).base_url == ELSEWHERE  # type: ignore[union-attr]

    [multi] = await create(admin, "multi_to_single", key="k1\nk2", base_url=PUBLIC_URL)
    data_of(await put(admin, multi, base_url=ELSEWHERE, key="n1\nn2"))  # replace: all keys entered
    row = await row_of(app, multi)
    assert row is not None and row.base_url == ELSEWHERE and keys_in_db(app, row) == ["n1", "n2"]

    root = await root_of(app)
    [other] = await create(admin, base_url=PUBLIC_URL)
    view = data_of(await put(root, other, base_url=ELSEWHERE, type=OPENAI,
                             header_override={"X-Org": "other"}))
    assert view["base_url"] == ELSEWHERE and view["type"] == OPENAI
    row = await row_of(app, other)
    assert row is not None and keys_in_db(app, row) == ["AIza-key-one"]  # root kept the stored key


async def test_other_fields_and_unchanged_destinations_need_no_key(app: Running) -> None:
    admin = await admin_of(app)
    [cid] = await create(admin, base_url=PUBLIC_URL, header_override='{"X-Org":"acme"}')
    view = data_of(await put(admin, cid, name="renamed", weight=5, models="m-a,m-b", priority=3,
                             model_mapping={"m-a": "m-up"}, status=2))
    assert view["name"] == "renamed" and view["weight"] == 5 and view["models"] == "m-a,m-b"
    # new-api's edit form sends every field back: the same destination, written differently, is no change
    view = data_of(await put(admin, cid, **channel_body(name="again", key="", base_url=PUBLIC_URL + "/"),
                             header_override='{ "X-Org": "acme" }', setting=""))
    assert view["name"] == "again"
    row = await row_of(app, cid)
    assert row is not None and keys_in_db(app, row) == ["AIza-key-one"]


# ---- what a base_url may look like ------------------------------------------------------------------

ODD_URLS = [
    "http://user:secret@example.com", "http://user@example.com", "https://example.com/v1?key=x",
    "https://example.com/#frag", "https://example.com:0", "file:///etc/passwd", "gopher://example.com",
    "http://2130706433", "http://0x7f.1", "http://127.1", "http://017700000001", "http://127.0.0.01",
    "http://[fe80::1%25eth0]", "http://[127.0.0.1]", "http://ex%61mple.com", "http://exämple.com",
    "http://example.com\\@evil.example", "http:///example.com", "http://exa$mple.com",
]


async def test_odd_base_urls_are_refused_whatever_the_configuration(embedded_app: Running) -> None:
    admin = await admin_of(embedded_app)  # the harness allows private destinations: these are refused anyway
    for url in ODD_URLS:
        body = {"mode": "single", "channel": channel_body(base_url=url)}
        fails(await admin.post("/api/channel/", json=body), 400, "base_url:", prefix=True)
    for url in ("https://example.com/v1beta/", "http://ollama_server:11434", "http://10.1.2.3:8000",
                "https://xn--exmple-cua.com", "http://[2001:db8::1]:8080/api", "https://example.com."):
        await create(admin, base_url=url)


# ---- private destinations ---------------------------------------------------------------------------

@pytest.fixture
async def strict_app(embedded_stack: Stack, tmp_path: Path) -> AsyncIterator[Running]:
    """The app as deployed by default: private destinations refused."""
    config = make_config(embedded_stack.database_url, tmp_path, upstream_allow_private=())
    async with serve(config) as running:
        yield running


PRIVATE_URLS = [
    "http://127.0.0.1:6379", "http://127.8.9.10", "http://localhost:8080/v1", "http://api.localhost",
    "http://10.0.0.5", "http://172.16.1.1", "http://192.168.0.1:11434", "http://169.254.169.254/latest",
    "http://100.64.0.1", "http://0.0.0.0:80", "http://224.0.0.1", "http://[::1]:8080", "http://[::]",
    "http://[::ffff:127.0.0.1]", "http://[::ffff:a9fe:a9fe]", "http://[fd00::1]", "http://[fe80::1]",
]


def _name_resolving_to_a_private_address() -> str:
    """This machine's host name, which resolves locally (hosts file) to a loopback or private address."""
    name = socket.gethostname()
    try:
        infos = socket.getaddrinfo(name, 443, type=socket.SOCK_STREAM)
    except OSError:
        pytest.skip(f"the host name {name!r} does not resolve here")
    if any(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_global for info in infos):
        pytest.skip(f"the host name {name!r} resolves to a public address here")
    return name


async def test_private_destinations_are_refused_on_save(strict_app: Running) -> None:
    admin = await admin_of(strict_app)
    for url in [*PRIVATE_URLS, f"http://{_name_resolving_to_a_private_address()}:8000"]:
        body = {"mode": "single", "channel": channel_body(base_url=url)}
        message = fails(await admin.post("/api/channel/", json=body), 400, "base_url:", prefix=True)
        assert "UPSTREAM_ALLOW_PRIVATE" in message
    [cid] = await create(admin, base_url=PUBLIC_URL)
    root = await root_of(strict_app)
    for url in ("http://127.0.0.1:6379", "http://169.254.169.254", "http://localhost"):
        fails(await put(root, cid, base_url=url), 400, "base_url:", prefix=True)  # root too
    row = await row_of(strict_app, cid)
    assert row is not None and row.base_url == PUBLIC_URL


async def test_a_private_destination_allowed_by_the_configuration_is_accepted(
        embedded_stack: Stack, tmp_path: Path) -> None:
    config = make_config(embedded_stack.database_url, tmp_path,
                         upstream_allow_private=(ipaddress.ip_network("10.1.2.0/24"),))
    async with serve(config) as app:
        admin = await admin_of(app)
        [cid] = await create(admin, base_url="http://10.1.2.3:11434")  # a self-hosted model
        assert (await row_of(app, cid)).base_url == "http://10.1.2.3:11434"  # type: ignore[union-attr]
        fails(await admin.post("/api/channel/", json={"mode": "single", "channel": channel_body(
            base_url="http://10.1.3.1")}), 400, "base_url:", prefix=True)  # outside the allowed network


async def _speak(app: Running) -> tuple[int, httpx.Response]:
    uid = await add_user(app.state, "caller", quota=10_000_000)
    _, key = await seed_key(app.state, uid, unlimited=True)
    async with httpx.AsyncClient(base_url=app.url, headers={"x-goog-api-key": key}, timeout=30) as client:
        return uid, await client.post(f"/v1beta/models/{TTS}:generateContent", json=SPEECH_BODY)


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_a_private_destination_in_sql_is_never_contacted(
        embedded_stack: Stack, tmp_path: Path, gemini_fake: FakeGemini, transport: str, host: str) -> None:
    """A row written before the rule (or straight to SQL), or a name that resolves to loopback only now:
    the transport refuses the connection, the call fails cleanly and costs nothing."""
    config = make_config(embedded_stack.database_url, tmp_path, upstream_allow_private=(),
                         upstream_transport=transport)
    async with serve(config) as app:
        base_url = gemini_fake.url.replace("127.0.0.1", host)
        await seed_channel(app.state, type=GEMINI, base_url=base_url, models=TTS)
        uid, response = await _speak(app)
        assert response.status_code == 503, response.text[:500]
        error = response.json()["error"]
        assert error["status"] == "UNAVAILABLE" and error["details"][0]["reason"] == "upstream_failed"
        assert gemini_fake.received == []
        assert await app.state.quota.balance("user", uid) == 10_000_000


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_the_allowed_network_is_contacted(embedded_stack: Stack, tmp_path: Path,
                                                gemini_fake: FakeGemini, transport: str) -> None:
    config = make_config(embedded_stack.database_url, tmp_path, upstream_transport=transport,
                         upstream_allow_private=(ipaddress.ip_network("127.0.0.1/32"),))
    async with serve(config) as app:
        await seed_channel(app.state, type=GEMINI, base_url=gemini_fake.url.replace("127.0.0.1", "localhost"),
                           models=TTS)
        _, response = await _speak(app)
        assert response.status_code == 200, response.text[:500]
        assert len(gemini_fake.received) == 1


# ---- configuration ----------------------------------------------------------------------------------

def test_upstream_allow_private_reads_false_true_or_networks(tmp_path: Path) -> None:
    def read(value: str | None) -> tuple[Any, ...]:
        env = {"DATA_DIR": str(tmp_path)}
        if value is not None:
            env["UPSTREAM_ALLOW_PRIVATE"] = value
        return from_env(env).upstream_allow_private

    assert read(None) == () and read("false") == () and read("0") == ()
    assert read("true") == ANY_ADDRESS and read("YES") == ANY_ADDRESS
    assert read("10.0.0.0/8, 127.0.0.1 ;fd00::/8") == tuple(
        ipaddress.ip_network(n) for n in ("10.0.0.0/8", "127.0.0.1/32", "fd00::/8"))
    with pytest.raises(ConfigError, match=r"^UPSTREAM_ALLOW_PRIVATE:"):
        read("sometimes")

