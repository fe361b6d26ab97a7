"""Pytest fixtures that run a fake upstream for one test and stop it afterwards.

Import them into a conftest (`from tests.fakes.fixtures import anthropic_fake, gemini_fake, openai_fake`)
to use them by name, and `client_for(fake)` for an httpx client to call a fake directly. Each test gets a
fresh fake on its own free port, with default settings; change its attributes (`valid_keys`,
`audio_tokens`, `fail(...)`, …) in the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.base import FakeServer
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI


@pytest.fixture
async def gemini_fake() -> AsyncIterator[FakeGemini]:
    async with FakeGemini() as fake:
        yield fake


@pytest.fixture
async def anthropic_fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
async def openai_fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake


def client_for(fake: FakeServer | None = None, **kwargs: Any) -> httpx.AsyncClient:
    """An httpx client for talking to a fake directly (base_url = its url when given).

    The fakes speak plain HTTP, so no CA bundle is loaded (`verify=False`): that costs ~30 ms per client.
    """
    if fake is not None:
        kwargs.setdefault("base_url", fake.url)
    return httpx.AsyncClient(verify=False, **kwargs)  # noqa: S501 (plain-HTTP fakes, nothing to verify)
