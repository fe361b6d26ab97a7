"""Numbers written as text — environment settings (server/config.py), site options (core/option_registry.py),
the status-code lists of options (core/option_values.py) — read in ASCII only.

Python's `int()` and `float()` accept far more than an operator means to write: digits of other scripts
(`١٦`, `１６`), underscores (`1_6`), a plus sign, white space around the number, and for `float()` also
`inf`, `nan` and `infinity`. A value like that passes a review as "not a number" and is read as one, and
two readers (ours and the database's, a proxy's, new-api's) may disagree about it. So a whole number is
`[0-9]+`, with a leading `-` only where the caller allows negatives; a decimal number is the same with an
optional fraction and exponent (`0.5`, `1e-05`, `1.5e+16`: what `repr` writes and a browser's number field
sends). Anything else is a `ValueError` whose message says what is expected; the caller names the setting.
"""

from __future__ import annotations

import re

MAX_CHARS = 40
"""Longer text is refused before it is converted (no setting needs it; `int()` of thousands of digits is
slow, and refused past 4,300)."""

_WHOLE = re.compile(r"[0-9]+")
_SIGNED_WHOLE = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_SIGNED_DECIMAL = re.compile(r"-?" + _DECIMAL.pattern)


def whole(text: str, *, negative: bool = False) -> int:
    """`text` as an int: ASCII digits, after a `-` only when `negative` allows it."""
    pattern = _SIGNED_WHOLE if negative else _WHOLE
    if len(text) > MAX_CHARS or not pattern.fullmatch(text):
        sign = "an optional - and " if negative else ""
        raise ValueError(f"{text[:MAX_CHARS]!r} is not a whole number (write {sign}the digits 0-9 only)")
    return int(text)


def decimal(text: str, *, negative: bool = False) -> float:
    """`text` as a finite float: ASCII digits with an optional fraction and exponent, after a `-` only
    when `negative` allows it."""
    pattern = _SIGNED_DECIMAL if negative else _DECIMAL
    value = float(text) if len(text) <= MAX_CHARS and pattern.fullmatch(text) else None
    if value is None or value in (float("inf"), float("-inf")):
        sign = "an optional - and " if negative else ""
        raise ValueError(f"{text[:MAX_CHARS]!r} is not a number (write {sign}the digits 0-9, with an "
                         "optional . and exponent, only)")
    return value
