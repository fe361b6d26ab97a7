"""Pytest fixtures that run a fake upstream for one test and stop it afterwards.

Import them into a conftest (`from tests.fakes.fixtures import gemini_fake, openai_fake`) to use them by
name. Each test gets a fresh fake on its own free port, with default settings; change its attributes
(`valid_keys`, `audio_tokens`, `fail(...)`, …) in the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI


@pytest.fixture
async def gemini_fake() -> AsyncIterator[FakeGemini]:
    async with FakeGemini() as fake:
        yield fake


@pytest.fixture
async def openai_fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake
