"""OpenAI embeddings (`POST /v1/embeddings`): the body checks and the usage (docs/CHAT.md#what-is-checked).

Checked, each a 400 naming the field: `model` (non-empty string); `input`: a non-empty string, a
non-empty array of non-empty strings, a non-empty array of token ids, or a non-empty array of non-empty
arrays of token ids; `encoding_format` (`float` or `base64`); `dimensions` (int ≥ 1). The reply (floats
or base64, as asked) comes back byte for byte. Reserved on the prompt estimate alone (token ids count one
each), with no `PreConsumedQuota` floor; billed on `usage.prompt_tokens`.
"""

from __future__ import annotations

from typing import Any

from server.upstream.formats.openai_compat import (
    OPENAI_COMPATIBLE,
    OpenAIPassThrough,
    OpenAIRoute,
    whole_count,
)
from server.upstream.providers.base import Asked, Operation, Usage
from server.upstream.providers.bodies import invalid, parse_object, required_model
from server.upstream.providers.gemini import GEMINI

EMBEDDINGS = Operation("embeddings")
ENCODINGS = ("float", "base64")
INPUT_RULE = ("input: must be a non-empty string, a non-empty array of non-empty strings, a non-empty array "
              "of token ids, or a non-empty array of non-empty arrays of token ids")


def _token_ids(value: Any) -> bool:
    return (isinstance(value, list) and bool(value)
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value))


def read_input(value: Any) -> tuple[list[str], int]:
    """The input's texts and its count of token ids."""
    bad = invalid(INPUT_RULE, "input")
    if isinstance(value, str):
        if not value:
            raise bad
        return [value], 0
    if not isinstance(value, list) or not value:
        raise bad
    if all(isinstance(v, str) for v in value):
        if not all(value):
            raise bad
        return list(value), 0
    if _token_ids(value):
        return [], len(value)
    if all(_token_ids(v) for v in value):
        return [], sum(len(v) for v in value)
    raise bad


def read_embeddings(body: bytes) -> Asked:
    data = parse_object(body)
    model = required_model(data)
    texts, counted = read_input(data.get("input"))
    encoding = data.get("encoding_format")
    if encoding is not None and encoding not in ENCODINGS:
        raise invalid('encoding_format: must be "float" or "base64"', "encoding_format")
    dimensions = data.get("dimensions")
    if dimensions is not None and (isinstance(dimensions, bool) or not isinstance(dimensions, int)
                                   or dimensions < 1):
        raise invalid("dimensions: must be an integer ≥ 1", "dimensions")
    return Asked(model, texts, False, 0, data, floor=False, counted=counted)


def usage_of_embeddings(usage: Any) -> Usage | None:
    if not isinstance(usage, dict) or "prompt_tokens" not in usage:
        return None
    return Usage(whole_count(usage.get("prompt_tokens")), 0)


EMBEDDINGS_FORMAT = OpenAIRoute("embeddings", EMBEDDINGS, read_embeddings,
                               OpenAIPassThrough("embeddings", usage_of_embeddings, None),
                               OPENAI_COMPATIBLE | {GEMINI.channel_type})
