"""Fake upstream providers served over real HTTP on 127.0.0.1, for the gateway's end-to-end tests.

`FakeGemini` and `FakeOpenAI` are started with `async with` (or the `gemini_fake` / `openai_fake` fixtures
of `tests.fakes.fixtures`) and give a `url` to point a channel at.
"""

from tests.fakes.base import FakeServer, Recorded, Reply
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI

__all__ = ["FakeGemini", "FakeOpenAI", "FakeServer", "Recorded", "Reply"]
