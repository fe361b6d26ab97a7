"""How a stored option value is read into what the code uses: status-code ranges, and the tolerant readers
of JSON options (run once per reload, core/settings.py).

A JSON option is only known to be JSON, not to have the right shape (a value written to the database by
hand may not), so each reader drops what is malformed instead of failing: an entry of the wrong type reads
as absent, a damaged list of status codes as empty, a choice outside its set as its default.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from core import numerals
from core.money import BALANCE_MAX

StatusRanges = tuple[tuple[int, int], ...]
USER_VERIFICATION = ("required", "preferred", "discouraged")
ATTACHMENTS = ("", "platform", "cross-platform")


def parse_status_ranges(text: str) -> StatusRanges:
    """`"401,403,500-599"` → ((401, 401), (403, 403), (500, 599)); codes must be in 100–599 and written in
    ASCII digits (white space around the commas and the dash is allowed), else ValueError naming the
    part."""
    ranges = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo_s, _, hi_s = part.partition("-")
        try:
            lo, hi = numerals.whole(lo_s.strip()), numerals.whole((hi_s or lo_s).strip())
        except ValueError:
            raise ValueError(f"{part!r} is not a status code or range") from None
        if not (100 <= lo <= hi <= 599):
            raise ValueError(f"{part!r} must be within 100–599")
        ranges.append((lo, hi))
    return tuple(ranges)


def quota_amount(value: Any) -> int:
    """An amount of quota within 0 … BALANCE_MAX: a value stored before the bound existed (or by hand) is
    held to it, so no balance made from it can pass what the quota engine computes exactly."""
    return min(max(int(value), 0), BALANCE_MAX)


def status_in(status: int, ranges: StatusRanges) -> bool:
    return any(lo <= status <= hi for lo, hi in ranges)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def numbers(value: Any) -> Mapping[str, float]:
    """`{name: number}`; entries whose value is not a number are dropped."""
    if not isinstance(value, dict):
        return MappingProxyType({})
    return MappingProxyType({str(k): float(v) for k, v in value.items() if _is_number(v)})


def token_caps(value: Any) -> Mapping[str, int]:
    """`{name: tokens}`; entries whose value is not a whole number ≥ 1 are dropped."""
    if not isinstance(value, dict):
        return MappingProxyType({})
    return MappingProxyType({str(k): v for k, v in value.items()
                             if isinstance(v, int) and not isinstance(v, bool) and v >= 1})


def ratios(value: Any) -> Mapping[str, float]:
    """`{group: ratio}`: every group listed counts as existing; a ratio that is not a number reads as 1."""
    if not isinstance(value, dict):
        return MappingProxyType({})
    return MappingProxyType({str(k): float(v) if _is_number(v) else 1.0 for k, v in value.items()})


def texts(value: Any) -> Mapping[str, str]:
    """`{name: text}`: every name listed counts; a value that is not text reads as ""."""
    if not isinstance(value, dict):
        return MappingProxyType({})
    return MappingProxyType({str(k): v if isinstance(v, str) else "" for k, v in value.items()})


def names(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def capabilities(value: Any) -> Mapping[str, Mapping[str, bool]]:
    """`{model: {capability: bool}}`; entries that are not booleans are dropped."""
    if not isinstance(value, dict):
        return MappingProxyType({})
    return MappingProxyType({
        str(model): MappingProxyType({str(k): b for k, b in caps.items() if isinstance(b, bool)})
        for model, caps in value.items() if isinstance(caps, dict)})


def count_pairs(value: Any) -> Mapping[str, tuple[int, int]]:
    """`{group: [total, success]}` of the per-user rate limit; malformed entries are dropped."""
    if not isinstance(value, dict):
        return MappingProxyType({})
    out: dict[str, tuple[int, int]] = {}
    for group, pair in value.items():
        if (isinstance(pair, list) and len(pair) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in pair)):
            out[str(group)] = (max(0, pair[0]), max(0, pair[1]))
    return MappingProxyType(out)


def ranges(text: Any) -> StatusRanges:
    try:
        return parse_status_ranges(str(text))
    except ValueError:
        return ()


def choice(allowed: tuple[str, ...], default: str) -> Callable[[Any], str]:
    """A reader of one of `allowed`, `default` for anything else (a value written to the database by hand)."""
    return lambda value: value if value in allowed else default


def keywords(text: Any) -> tuple[str, ...]:
    """One keyword per line: stripped, lower-cased, none empty."""
    return tuple(w.strip().lower() for w in str(text).splitlines() if w.strip())


def domains(text: Any) -> frozenset[str]:
    """Comma-separated domains, lower-cased."""
    return frozenset(d.strip().lower() for d in str(text).split(",") if d.strip())


def stripped(text: Any) -> str:
    return str(text).strip()
