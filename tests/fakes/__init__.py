"""Fake upstream providers served over real HTTP on 127.0.0.1, for the gateway's end-to-end tests.

`FakeGemini`, `FakeOpenAI` and `FakeAnthropic` are started with `async with` (or the `gemini_fake` /
`openai_fake` / `anthropic_fake` fixtures of `tests.fakes.fixtures`) and give a `url` to point a channel at.
"""

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.base import FakeServer, Recorded, Reply
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI

__all__ = ["FakeAnthropic", "FakeGemini", "FakeOpenAI", "FakeServer", "Recorded", "Reply"]
