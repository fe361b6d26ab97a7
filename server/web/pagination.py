"""Pagination (docs/API.md#paging): `p` 1-based, `page_size` (aliases `ps`, `size`) 10 by default,
at most 100; nonsense falls back to the defaults instead of failing. A page number beyond `MAX_PAGE` is
read as `MAX_PAGE` (an empty page), so the SQL offset always fits a BIGINT."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

from pydantic import Field

from server.web.schema import Rule, Schema

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


@dataclass(frozen=True, slots=True)
class _Lenient(Rule):
    """A page parameter as sent (nonsense falls back to the default, see `Page.from_args`)."""

    def check(self, value: Any) -> Any:
        return None if value is None else str(value)

    def json_schema(self, generated: dict[str, Any]) -> dict[str, Any]:
        return {"type": "integer"}


PageParam = Annotated[str | None, _Lenient()]


class PageQuery(Schema):
    """The paging parameters of a list route: `p` (1-based), `page_size` (aliases `ps`, `size`)."""

    p: PageParam = Field(None, description="page number, from 1")
    page_size: PageParam = Field(None, description=f"rows per page, 1–{MAX_PAGE_SIZE} (default "
                                                   f"{DEFAULT_PAGE_SIZE})")
    ps: PageParam = Field(None, description="alias of page_size")
    size: PageParam = Field(None, description="alias of page_size")

    def page(self) -> Page:
        return Page.from_args({k: v for k, v in self.model_dump().items() if v is not None})


T = TypeVar("T")


class Paged(Schema, Generic[T]):
    """One page of a list."""

    items: list[T]
    total: int
    page: int
    page_size: int
