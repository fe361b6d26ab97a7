"""The rules an option's value must pass (`core/option_registry.py` names one per option).

A rule is called with the value already converted to the option's kind and raises `ValueError` with the
problem ("must be between 0 and 10"); the registry prefixes the key. The rules about a size — a text's
length, a number's range, a choice among a few values — are small classes that also tell their `Bounds`,
so a form (the console's Settings page, through `GET /api/option/schema`) can offer a list or show the
range from the same declaration that `PUT /api/option/` checks. The others check a shape (a JSON map of
numbers, a list of origins) and have no bounds to tell.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from core.option_values import parse_status_ranges

Rule = Callable[[Any], None]


def _fail(msg: str) -> None:
    raise ValueError(msg)


def _number(value: float) -> str:
    """A bound as people read it: a whole number with all its digits (`:g` made 2^53 − 1 "9.0072e+15")."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True, slots=True)
class Bounds:
    """What a rule allows, told before anything is sent: the values to choose from, a number's range
    (`exclusive_minimum`: the minimum itself is refused), a text's length. None: no such bound."""

    choices: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    min_length: int | None = None
    max_length: int | None = None


NO_BOUNDS = Bounds()


class BoundedRule:
    """A rule that can tell its bounds."""

    @property
    def bounds(self) -> Bounds:  # pragma: no cover - overridden
        return NO_BOUNDS

    def __call__(self, value: Any) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


def bounds_of(rule: Rule | None) -> Bounds:
    return rule.bounds if isinstance(rule, BoundedRule) else NO_BOUNDS


@dataclass(frozen=True, slots=True)
class Length(BoundedRule):
    lo: int
    hi: int

    def __call__(self, value: Any) -> None:
        if not self.lo <= len(value) <= self.hi:
            _fail(f"must be {self.lo}–{self.hi} characters")

    @property
    def bounds(self) -> Bounds:
        return Bounds(min_length=self.lo, max_length=self.hi)


@dataclass(frozen=True, slots=True)
class OneOf(BoundedRule):
    allowed: tuple[str, ...]

    def __call__(self, value: Any) -> None:
        if value not in self.allowed:
            _fail(f"must be one of {', '.join(self.allowed) or '(empty)'}")

    @property
    def bounds(self) -> Bounds:
        return Bounds(choices=self.allowed)


@dataclass(frozen=True, slots=True)
class AtLeast(BoundedRule):
    lo: float
    strict: bool = False  # the minimum itself is refused

    def __call__(self, value: Any) -> None:
        if self.strict and not value > self.lo:
            _fail(f"must be greater than {_number(self.lo)}")
        if not self.strict and not value >= self.lo:
            _fail(f"must be at least {_number(self.lo)}")

    @property
    def bounds(self) -> Bounds:
        return Bounds(minimum=self.lo, exclusive_minimum=self.strict)


@dataclass(frozen=True, slots=True)
class Between(BoundedRule):
    lo: float
    hi: float

    def __call__(self, value: Any) -> None:
        if not self.lo <= value <= self.hi:
            _fail(f"must be between {_number(self.lo)} and {_number(self.hi)}")

    @property
    def bounds(self) -> Bounds:
        return Bounds(minimum=self.lo, maximum=self.hi)


def http_url_or_empty(v: str) -> None:
    if v == "":
        return
    parts = urlsplit(v)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        _fail("must be an http(s) URL")
    if v.endswith("/"):
        _fail("must not end with '/'")


_HOSTNAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")


def host_name_or_empty(v: str) -> None:
    """A passkey RP id: a bare host name (no scheme, port or path)."""
    if v and not _HOSTNAME.fullmatch(v):
        _fail("must be a host name such as example.com (no scheme, port or path)")


def origin_list(v: str) -> None:
    """Comma-separated origins, each `http(s)://host[:port]` without a path."""
    for origin in (o.strip() for o in v.split(",")):
        if not origin:
            continue
        parts = urlsplit(origin)
        try:
            parts.port  # noqa: B018  (raises on a port that is not a number in range)
        except ValueError:
            _fail(f"{origin!r} has an invalid port")
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path.strip("/") \
                or parts.query or parts.fragment or parts.username is not None:
            _fail(f"{origin!r} must be an origin such as https://example.com")


def number_map(v: Any) -> None:
    if not isinstance(v, dict):
        _fail("must be a JSON object")
    for k, n in v.items():
        if isinstance(n, bool) or not isinstance(n, int | float) or not math.isfinite(n) or n < 0:
            _fail(f"value of {k!r} must be a number ≥ 0")


def positive_number_map(v: Any) -> None:
    number_map(v)
    for k, n in v.items():
        if n <= 0:
            _fail(f"value of {k!r} must be a number > 0")


def token_cap_map(v: Any) -> None:
    """`{"<model>": n, "default": n}`: each n a whole number of tokens, 1 … 10,000,000."""
    if not isinstance(v, dict):
        _fail("must be a JSON object")
    for k, n in v.items():
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 10_000_000:
            _fail(f"value of {k!r} must be a whole number of tokens, 1 to 10000000")


def group_ratio(v: Any) -> None:
    number_map(v)
    for name in v:
        if not 1 <= len(name) <= 64 or "," in name:
            _fail(f"group name {name!r} must be 1–64 characters without ','")
    if "default" not in v:
        _fail("must keep the 'default' group")


def string_map(v: Any) -> None:
    if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
        _fail("must be a JSON object of strings")


def nested_number_map(v: Any) -> None:
    if not isinstance(v, dict):
        _fail("must be a JSON object")
    for inner in v.values():
        number_map(inner)


def string_list(v: Any) -> None:
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        _fail("must be a JSON array of names")


def number_list(v: Any) -> None:
    if not isinstance(v, list) or not all(isinstance(x, int | float) and not isinstance(x, bool) and x > 0
                                          for x in v):
        _fail("must be a JSON array of positive numbers")


def rate_limit_groups(v: Any) -> None:
    if not isinstance(v, dict):
        _fail("must be a JSON object")
    for name, pair in v.items():
        if (not isinstance(pair, list) or len(pair) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in pair)):
            _fail(f"value of {name!r} must be [count, success_count] (integers ≥ 0)")


def capabilities(v: Any) -> None:
    if not isinstance(v, dict):
        _fail("must be a JSON object")
    for model, caps in v.items():
        if not isinstance(caps, dict) or not all(isinstance(b, bool) for b in caps.values()):
            _fail(f"value of {model!r} must be an object of booleans")


def json_object_text(v: str) -> None:
    if v == "":
        return
    try:
        parsed = json.loads(v)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        _fail("must be empty or a JSON object")


def status_ranges(v: str) -> None:
    parse_status_ranges(v)
