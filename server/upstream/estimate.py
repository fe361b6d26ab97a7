"""Token estimates for reservations and for billing calls whose upstream reports no usage
(docs/api/gateway.md#token-usage-and-estimates).

An exact count would use tiktoken's `o200k_base` from a local, hash-checked file; none ships with Tollway
(fetching it would be a network call, which the gateway never makes), so this fallback is used:
ceil(ASCII code points / 4) + non-ASCII code points. It is deterministic and errs high for CJK text.
"""

from __future__ import annotations

from collections.abc import Iterable


def count_tokens(text: str) -> int:
    if not text:
        return 0
    if text.isascii():
        return (len(text) + 3) // 4
    ascii_count = sum(1 for c in text if ord(c) < 128)
    return (ascii_count + 3) // 4 + (len(text) - ascii_count)


def count_all(texts: Iterable[str]) -> int:
    return sum(count_tokens(t) for t in texts)
