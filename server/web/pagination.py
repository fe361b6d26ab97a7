"""Pagination as the contract fixes it: `p` 1-based, `page_size` (aliases `ps`, `size`) 10 by default,
at most 100; nonsense falls back to the defaults instead of failing. A page number beyond `MAX_PAGE` is
read as `MAX_PAGE` (an empty page), so the SQL offset always fits a BIGINT."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_PAGE_SIZE = 10
MAX_PAGE_SIZE = 100
MAX_PAGE = 10**9
_INT = re.compile(r"[+-]?[0-9]+")


def _as_int(raw: str | None) -> int | None:
    if raw is None:
        return None
    text = raw.strip()
    if not _INT.fullmatch(text):
        return None
    if len(text.lstrip("+-")) > 18:  # beyond any bound used here (and int() refuses very long text)
        return -(10**18) if text.startswith("-") else 10**18
    return int(text)


@dataclass(frozen=True, slots=True)
class Page:
    page: int
    size: int

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.size

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> Page:
        def first(name: str) -> str | None:
            value = args.get(name)
            if isinstance(value, list):
                return value[0] if value else None
            return value

        page = _as_int(first("p"))
        size = next((v for v in (_as_int(first(n)) for n in ("page_size", "ps", "size")) if v is not None),
                    None)
        page = min(page, MAX_PAGE) if page is not None and page >= 1 else 1
        size = DEFAULT_PAGE_SIZE if size is None or size < 1 else min(size, MAX_PAGE_SIZE)
        return cls(page, size)

    def payload(self, items: list[Any], total: int) -> dict[str, Any]:
        return {"items": items, "total": total, "page": self.page, "page_size": self.size}
