"""The gateway refuses a model-call body holding a lone surrogate whichever way it was written (a JSON
escape, or raw UTF-8-style bytes of a surrogate), and its fast pre-check on the raw bytes never lets one
through: for arbitrary JSON values, `parse_object` refuses exactly the bodies the full walk would."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from server.errors import GatewayError
from server.upstream.providers.bodies import parse_object
from server.web.text import first_bad_text

# any code point, lone surrogates included
TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=12)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


def encodings(value: dict[str, Any]) -> list[bytes]:
    return [json.dumps(value).encode(),  # ASCII with \uXXXX escapes
            json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")]  # raw bytes


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(TEXT, JSON, max_size=4))
def test_a_body_is_refused_exactly_when_it_holds_a_lone_surrogate(value: dict[str, Any]) -> None:
    expected_bad = first_bad_text(value, nul=False) is not None
    for body in encodings(value):
        try:
            parse_object(body)
            refused = False
        except GatewayError as exc:
            assert exc.status == 400
            refused = True
        assert refused == expected_bad, body
