"""Makes the fake-upstream fixtures available to the fakes' own tests (tests/conftest.py may import them
too)."""

from tests.fakes.fixtures import gemini_fake, openai_fake

__all__ = ["gemini_fake", "openai_fake"]
