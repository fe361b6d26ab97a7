"""Who may read `/metrics`, and what the operators' routes are spared.

    allow list          `METRICS_ALLOW` on top of `METRICS_TOKEN`: the right token from an address outside
                        the list is the same 404 as no token (the route does not reveal it exists); from
                        inside it, the scrape
    behind a proxy      the address is the client IP the app decides everywhere: `X-Forwarded-For` counts
                        only when the peer is a trusted proxy, never as a raw header
    outside the limit   `/healthz`, `/readyz` and `/metrics` are outside `/api`'s per-IP rate limit: they
                        answer while `/api` refuses the same client with 429, and never spend its budget
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import httpx

from server.config import RateLimit
from server.web.client_ip import in_networks
from tests.conftest import Stack
from tests.harness import make_config, serve

TOKEN = "metrics-" + "b2" * 16
SCRAPE = {"Authorization": f"Bearer {TOKEN}"}


def nets(*texts: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(text) for text in texts)


def test_an_address_is_allowed_only_inside_the_list() -> None:
    allow = nets("10.0.0.0/8", "2001:db8::/32")
    assert in_networks("10.1.2.3", allow)
    assert in_networks("2001:db8::5", allow)
    assert in_networks("::ffff:10.0.0.5", allow)  # an IPv4 client on an IPv6 socket
    assert not in_networks("192.0.2.1", allow)
    assert not in_networks("", allow)
    assert not in_networks("not-an-ip", allow)
    assert not in_networks("10.1.2.3", ())  # (with METRICS_ALLOW unset the service checks no address)


async def test_the_allow_list_refuses_the_right_token_from_elsewhere_as_a_404(sqlite_url: str,
                                                                              tmp_path: Path) -> None:
    outside = make_config(sqlite_url, tmp_path, metrics_token=TOKEN, metrics_allow=nets("10.0.0.0/8"))
    async with serve(outside) as running, httpx.AsyncClient(base_url=running.url, timeout=30) as client:
        refused = await client.get("/metrics", headers=SCRAPE)
        unknown = await client.get("/no-such-route")
        assert refused.status_code == 404
        assert refused.json() == unknown.json()
        # without trusted proxies the header is not believed: the peer (127.0.0.1) is the client
        spoofed = await client.get("/metrics", headers={**SCRAPE, "X-Forwarded-For": "10.1.2.3"})
        assert spoofed.status_code == 404
    inside = make_config(sqlite_url, tmp_path, metrics_token=TOKEN, metrics_allow=nets("127.0.0.1/32"))
    async with serve(inside) as running, httpx.AsyncClient(base_url=running.url, timeout=30) as client:
        scrape = await client.get("/metrics", headers=SCRAPE)
        assert scrape.status_code == 200
        assert "tollway_build_info" in scrape.text
        assert (await client.get("/metrics")).status_code == 404  # the token is still required
        wrong = await client.get("/metrics", headers={"Authorization": "Bearer " + "x" * 40})
        assert wrong.status_code == 404


async def test_behind_a_trusted_proxy_the_forwarded_client_is_checked(sqlite_url: str,
                                                                      tmp_path: Path) -> None:
    config = make_config(sqlite_url, tmp_path, metrics_token=TOKEN, metrics_allow=nets("10.0.0.0/8"),
                         trusted_proxies=nets("127.0.0.1/32"))
    async with serve(config) as running, httpx.AsyncClient(base_url=running.url, timeout=30) as client:
        forwarded = await client.get("/metrics", headers={**SCRAPE, "X-Forwarded-For": "10.1.2.3"})
        assert forwarded.status_code == 200
        assert "tollway_build_info" in forwarded.text
        # the proxy itself (no header) and a client outside the list, both through the trusted proxy
        assert (await client.get("/metrics", headers=SCRAPE)).status_code == 404
        other = await client.get("/metrics", headers={**SCRAPE, "X-Forwarded-For": "192.0.2.7"})
        assert other.status_code == 404
        # a client that prepends an allowed address: the hop before the trusted proxy is what counts
        prepended = await client.get("/metrics", headers={**SCRAPE, "X-Forwarded-For": "10.9.9.9, 192.0.2.7"})
        assert prepended.status_code == 404


OPERATORS = ("/healthz", "/readyz", "/metrics")


async def test_the_operators_routes_are_outside_the_api_rate_limit(stack: Stack, tmp_path: Path) -> None:
    config = make_config(stack.database_url, tmp_path, stack.redis_url, stack.prefix, metrics_token=TOKEN,
                         global_rate_limit=RateLimit(2, 3600))
    async with serve(config) as running, httpx.AsyncClient(base_url=running.url, timeout=30) as client:
        for _ in range(3):  # more than the budget: none of it is spent on these
            for path in OPERATORS:
                answered = await client.get(path, headers=SCRAPE)
                assert answered.status_code == 200, (path, answered.text)
        assert [(await client.get("/api/status")).status_code for _ in range(3)] == [200, 200, 429]
        for path in OPERATORS:  # the client is now refused on /api, not here
            answered = await client.get(path, headers=SCRAPE)
            assert answered.status_code == 200, (path, answered.text)
