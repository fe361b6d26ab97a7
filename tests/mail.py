"""What the e-mail tests share: the fake SMTP server as a fixture, the app configured to send through it
(and trusting 127.0.0.1 as a proxy, so each request can come from its own client IP), and small helpers.

Import the fixtures by name into a test module: `from tests.mail import mail_app, smtp  # noqa: F401`.
"""

from __future__ import annotations

import ipaddress
import itertools
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.fakes.smtp import FakeSmtp
from tests.harness import Api, Running, make_config, serve

if TYPE_CHECKING:  # (tests/conftest.py imports the fixtures of this module)
    from tests.conftest import Stack

SERVER_ADDRESS = "http://tollway.test"  # (https would make the session cookie Secure: unsent over http)
SENDER = "noreply@tollway.test"
PASSWORD = "password123"
_ips = itertools.count(1)


@pytest.fixture
def smtp() -> Iterator[FakeSmtp]:
    fake = FakeSmtp().start()
    try:
        yield fake
    finally:
        fake.stop()


async def configure(running: Running, fake: FakeSmtp | None, **options: Any) -> None:
    """Point the app's mail at `fake` (when given) and set `options`, the way `PUT /api/option/` does."""
    values: dict[str, Any] = {"ServerAddress": SERVER_ADDRESS}
    if fake is not None:
        values |= {"SMTPServer": fake.host, "SMTPPort": fake.port, "SMTPFrom": SENDER}
    for key, value in (values | options).items():
        await running.state.options.put(key, value)


@asynccontextmanager
async def mail_server(stack: Stack, tmp_path: Path, fake: FakeSmtp) -> AsyncIterator[Running]:
    """The app on `stack`, sending through `fake`; 127.0.0.1 is a trusted proxy."""
    config = make_config(stack.database_url, tmp_path, stack.redis_url, stack.prefix,
                         trusted_proxies=(ipaddress.ip_network("127.0.0.1/32"),))
    async with serve(config) as running:
        await configure(running, fake)
        yield running


@pytest.fixture
async def mail_app(stack: Stack, tmp_path: Path, smtp: FakeSmtp) -> AsyncIterator[Running]:
    """The app on every stack, sending through the fake SMTP server; 127.0.0.1 is a trusted proxy."""
    async with mail_server(stack, tmp_path, smtp) as running:
        yield running


def new_ip() -> str:
    """A client IP no other request of the run used (the per-IP e-mail limit stays out of the way)."""
    n = next(_ips)
    return f"10.{n // 65536 % 256}.{n // 256 % 256}.{n % 256}"


def from_ip(ip: str | None = None) -> dict[str, str]:
    return {"X-Forwarded-For": ip or new_ip()}


async def request_code(api: Api, email: str, ip: str | None = None) -> httpx.Response:
    return await api.get("/api/verification", params={"email": email}, headers=from_ip(ip))


async def request_reset(api: Api, email: str, ip: str | None = None) -> httpx.Response:
    return await api.get("/api/reset_password", params={"email": email}, headers=from_ip(ip))


def logged_text(records: list[logging.LogRecord]) -> str:
    """Everything the app and its libraries logged (the fake server's own log, `mail.*`, left out: it is
    the other side of the wire)."""
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    return "\n".join(formatter.format(r) for r in records if not r.name.startswith("mail."))
