"""Redaction of secrets from text that came from outside, before it is stored, logged or forwarded.

An upstream provider's error text is ours to keep only after redaction: some providers quote the key they
were sent ("Incorrect API key provided: sk-…"), and that text would otherwise land in a channel's
auto-disable reason, in a warning line and, for a passed-through error, in the caller's reply. `redact`
replaces with `[redacted]`

- every secret it is given (a channel's keys — all of them for a multi-key channel), wherever it appears,
  also in its JSON-escaped form;
- strings shaped like credentials: `sk-…` keys (OpenAI-style, ours too), Google `AIza…` keys, the token of
  `Bearer …` / `Basic …`, JWTs, the value of a `key=` / `api_key=` / `access_token=` query parameter, and
  any run of 32 or more letters, digits, `-` and `_` that mixes upper case, lower case and digits (a
  random token; hex digests, UUIDs and words joined by dashes are left alone).

Bytes are redacted without decoding damage: what is not a secret stays byte for byte, also bytes that are
not UTF-8. One function for the whole code base, so the rule cannot drift between callers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import overload

REDACTED = "[redacted]"
MIN_SECRET = 6
"""Given secrets shorter than this are not searched for (they would match ordinary text)."""

_TOKEN = r"A-Za-z0-9_\-"  # noqa: S105 (a character class, not a secret)
_SHAPED = re.compile(
    rf"(?<![{_TOKEN}])(?:sk|pk|rk)-[{_TOKEN}]{{16,}}"  # OpenAI-style secret keys (and ours)
    rf"|(?<![{_TOKEN}])AIza[{_TOKEN}]{{30,}}"  # Google API keys
    rf"|(?<![{_TOKEN}])eyJ[{_TOKEN}]{{8,}}\.[{_TOKEN}]{{8,}}(?:\.[{_TOKEN}]*)?"  # JWTs
)
_SCHEME = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/\-]{16,}=*")
_PARAM = re.compile(r"(?i)([?&](?:key|api_key|apikey|access_token|token)=)[^&\s\"'<>]+")
_LONG = re.compile(rf"(?<![{_TOKEN}])[{_TOKEN}]{{32,}}(?![{_TOKEN}])")


def _random_looking(match: re.Match[str]) -> str:
    run = match.group(0)
    mixed = (any(c.isdigit() for c in run) and any(c.isupper() for c in run)
             and any(c.islower() for c in run))
    return REDACTED if mixed else run


def _redact_text(text: str, known: Iterable[str]) -> str:
    needles: set[str] = set()
    for secret in known:
        secret = secret.strip()
        if len(secret) >= MIN_SECRET:
            needles.add(secret)
            needles.add(json.dumps(secret)[1:-1])  # as it appears inside a JSON string
    for needle in sorted(needles, key=len, reverse=True):
        text = text.replace(needle, REDACTED)
    text = _SHAPED.sub(REDACTED, text)
    text = _SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _PARAM.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    return _LONG.sub(_random_looking, text)


@overload
def redact(value: str, known: Iterable[str] = ()) -> str: ...


@overload
def redact(value: bytes, known: Iterable[str] = ()) -> bytes: ...


def redact(value: str | bytes, known: Iterable[str] = ()) -> str | bytes:
    """`value` with the `known` secrets and credential-shaped strings replaced by `[redacted]`."""
    if isinstance(value, bytes):
        text = value.decode("utf-8", "surrogateescape")
        return _redact_text(text, known).encode("utf-8", "surrogateescape")
    return _redact_text(value, known)
