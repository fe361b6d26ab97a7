"""Pagination as the contract fixes it: `p` 1-based, `page_size` (aliases `ps`, `size`) 10 by default,
at most 100; nonsense falls back to the defaults instead of failing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_PAGE_SIZE = 10
MAX_PAGE_SIZE = 100


def _as_int(raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        return int(raw.strip())
    except ValueError:
        return None


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
        page = page if page is not None and page >= 1 else 1
        size = DEFAULT_PAGE_SIZE if size is None or size < 1 else min(size, MAX_PAGE_SIZE)
        return cls(page, size)

    def payload(self, items: list[Any], total: int) -> dict[str, Any]:
        return {"items": items, "total": total, "page": self.page, "page_size": self.size}
