"""Which format serves a Gemini path call (`/v1beta/models/{model}:{method}`, also under `/v1`).

One route takes every method of a model's path, and the method picks the format: the embedding methods
are `gemini_embed`'s, any other is `gemini_generate`'s, whose `operation` refuses a method it does not
serve (`countTokens`, …) with a 404 inside the pipeline, like every refusal. The consume log's `route`
then names the format that served the call.
"""

from __future__ import annotations

from server.upstream.formats.base import Format
from server.upstream.formats.gemini_embed import EMBED_FORMAT, EMBED_METHODS
from server.upstream.formats.gemini_generate import GENERATE_FORMAT
from server.upstream.providers.gemini import method_of


def gemini_format(target: str) -> Format:
    """The format of the call `target` (`{model}:{method}`) names."""
    return EMBED_FORMAT if method_of(target) in EMBED_METHODS else GENERATE_FORMAT
