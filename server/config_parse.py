"""The shape of an environment setting's declaration (`Var`) and the parsers its value is read with.

Each variable Tollway reads is declared once, in server/config_vars.py: its name, its default, its parser
(with the bounds of a number) and its documentation. `Var.read` is the only way a value is read: an unset
or empty variable gives the default, anything else goes through the parser, and a parser's `ValueError`
becomes a `ConfigError` whose message starts with the variable's name — so every refusal names it.
Numbers are written in ASCII digits (core/numerals.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

from core import numerals

T = TypeVar("T")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


class ConfigError(ValueError):
    """A setting is missing or invalid; the message starts with the variable's name.

    `log_format` is how the line that reports it must be written (`load` sets it): `LOG_FORMAT` as
    configured, so that with `LOG_FORMAT=json` a refused start is a JSON log line too, unless `LOG_FORMAT`
    itself is the broken setting — then the default, text."""

    log_format: str = "text"


@dataclass(frozen=True, slots=True)
class Parser(Generic[T]):
    """How a set value is read: `read(text)` gives the value or raises ValueError saying why (without the
    variable's name, which `Var.read` puts first). `strip`: white space around the value is dropped first
    (never for a number: ` 16` is refused). `kind` and `lo`..`hi`: a number's kind and bounds."""

    read: Callable[[str], T]
    kind: str = "text"
    lo: float | None = None
    hi: float | None = None
    strip: bool = True


@dataclass(frozen=True, slots=True)
class Var(Generic[T]):
    """One environment variable: its name, its default (unset or empty), its parser and its documentation
    (the Meaning cell of docs/OPERATIONS.md's table, where `{range}` is replaced by the parser's bounds).

    `field`: the `Config` attribute its value is as read; empty when `from_env` combines it with others
    (a rate limit's count and period, the faults, the database and secret that depend on DATA_DIR).
    `shown`: the table's Default cell when the default does not speak for itself."""

    name: str
    default: T
    parse: Parser[T]
    doc: str
    field: str = ""
    shown: str = ""

    def read(self, env: Mapping[str, str]) -> T:
        raw = env.get(self.name, "")
        text = raw.strip() if self.parse.strip else raw
        if text == "":
            return self.default
        try:
            return self.parse.read(text)
        except ValueError as exc:
            raise ConfigError(f"{self.name}: {exc}") from None

    @property
    def lo(self) -> float | None:
        return self.parse.lo

    @property
    def hi(self) -> float | None:
        return self.parse.hi


def show_number(value: float) -> str:
    """`2.0` → `2`, `0.05` → `0.05`, `100000` → `100000` (the docs' way)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def whole(lo: int, hi: int) -> Parser[int]:
    """A whole number in lo..hi in ASCII digits (no `١٦`, `1_6`, `+16` or ` 16`)."""
    def read(text: str) -> int:
        value = numerals.whole(text, negative=lo < 0)
        if not lo <= value <= hi:
            raise ValueError(f"{value} is outside {lo}..{hi}")
        return value

    return Parser(read, kind="int", lo=lo, hi=hi, strip=False)


def number(lo: float, hi: float) -> Parser[float]:
    """A number in lo..hi in ASCII (core/numerals.py: digits, a fraction, an exponent)."""
    low, high = float(lo), float(hi)

    def read(text: str) -> float:
        value = numerals.decimal(text, negative=low < 0)
        if not low <= value <= high:
            raise ValueError(f"{value} is outside {low}..{high}")
        return value

    return Parser(read, kind="float", lo=low, hi=high, strip=False)


seconds = number
"""A duration in seconds, lo..hi (a number; the name says what it counts)."""


def _flag(text: str) -> bool:
    value = text.lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise ValueError(f"{value!r} is not a boolean (use true or false)")


def flag() -> Parser[bool]:
    """`true`/`false` (also 1/0, yes/no, on/off), any case."""
    return Parser(_flag, kind="bool")


def exactly(value: str) -> Parser[bool]:
    """True when the variable is `value` exactly; false for anything else (a switch)."""
    return Parser(lambda raw: raw == value, kind="bool", strip=False)


def choice(*options: str, upper: bool = False) -> Parser[str]:
    """One of `options`, any case (stored lower case, or upper with `upper`)."""
    expected = ", ".join(options[:-1]) + " or " + options[-1]

    def read(text: str) -> str:
        value = text.upper() if upper else text.lower()
        if value not in options:
            raise ValueError(f"expected {expected}")
        return value

    return Parser(read)


def text(check: Callable[[str], str | None] | None = None, *, strip: bool = True) -> Parser[str]:
    """The text as set; `check(text)` returns why it is refused, or None."""
    def read(value: str) -> str:
        problem = check(value) if check else None
        if problem:
            raise ValueError(problem)
        return value

    return Parser(read, strip=strip)


def optional(parser: Parser[T]) -> Parser[T | None]:
    """The same parser, for a setting whose default is None (unset)."""
    return Parser(parser.read, kind=parser.kind, lo=parser.lo, hi=parser.hi, strip=parser.strip)


def token(minimum: int) -> Parser[str]:
    """A secret of at least `minimum` characters."""
    return text(lambda value: None if len(value) >= minimum else
                f"too short (use at least {minimum} characters, e.g. `openssl rand -hex 32`)")


def path() -> Parser[Path]:
    return Parser(lambda value: Path(value).expanduser())


def _parts(value: str) -> list[str]:
    """The items of a comma (or semicolon) separated list, blanks dropped."""
    return [part.strip() for part in value.replace(";", ",").split(",") if part.strip()]


def _networks(value: str, refusal: str) -> tuple[Network, ...]:
    nets = []
    for part in _parts(value):
        try:
            nets.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ValueError(f"{part!r} is not {refusal}") from None
    return tuple(nets)


def networks() -> Parser[tuple[Network, ...]]:
    """A comma (or semicolon) separated list of IP addresses and CIDRs."""
    return Parser(lambda value: _networks(value, "an IP address or CIDR"))


def _allow_private(value: str) -> tuple[Network, ...]:
    lowered = value.lower()
    if lowered in FALSE:
        return ()
    if lowered in TRUE:
        return (ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))
    return _networks(lowered, "true, false, an IP address or a CIDR")


def networks_or_flag() -> Parser[tuple[Network, ...]]:
    """`false` → no network, `true` → every address, or a list of IP addresses and CIDRs."""
    return Parser(_allow_private)


def _cluster_nodes(value: str) -> tuple[tuple[str, int], ...]:
    nodes: list[tuple[str, int]] = []
    for part in _parts(value):
        host, sep, port = part.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        try:
            port_number = numerals.whole(port)
        except ValueError:
            port_number = 0
        if not sep or not host or not 0 < port_number < 65536:
            raise ValueError(f"{part!r} is not host:port")
        nodes.append((host, port_number))
    return tuple(nodes)


def host_ports() -> Parser[tuple[tuple[str, int], ...]]:
    """`host:port,host:port,…` (an IPv6 host in brackets: `[::1]:7000`)."""
    return Parser(_cluster_nodes)


def database_kind(url: str) -> str:
    """`sqlite`, `mysql` or `postgres` from a database URL's scheme; ValueError for any other."""
    scheme = url.split(":", 1)[0].split("+", 1)[0].lower()
    if scheme == "sqlite":
        return "sqlite"
    if scheme in ("mysql", "mariadb"):
        return "mysql"
    if scheme in ("postgresql", "postgres"):
        return "postgres"
    raise ValueError(f"unsupported database {scheme!r} (use sqlite, mysql or postgresql)")


ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "mysql": "mysql+aiomysql", "postgres": "postgresql+asyncpg"}


def _database_url(url: str) -> str:
    if "://" not in url:
        raise ValueError("not a database URL (expected e.g. mysql+aiomysql://user:pass@host/db)")
    scheme, rest = url.split("://", 1)
    expected = ASYNC_DRIVERS[database_kind(url)]
    _, plus, driver = scheme.partition("+")
    if plus and driver.lower() != expected.split("+", 1)[1]:
        raise ValueError(f"driver {driver!r} is not supported; use {expected}://")
    return f"{expected}://{rest}"


def database_url() -> Parser[str]:
    """`mysql://`, `mariadb://`, `postgres://`, `sqlite://` … given the async driver Tollway uses; another
    driver is refused (the message never repeats the URL, which may hold a password)."""
    return Parser(_database_url)


def url(*schemes: str, expected: str, trim: bool = False) -> Parser[str]:
    """A URL with one of `schemes` (with `trim`, its trailing `/` dropped); `expected` is the refusal."""
    def read(value: str) -> str:
        value = value.rstrip("/") if trim else value
        if value and urlsplit(value).scheme not in schemes:
            raise ValueError(f"expected {expected}")
        return value

    return Parser(read)


def declared(namespace: Mapping[str, Any]) -> tuple[Var[Any], ...]:
    """The `Var`s of a module's namespace, in the order they are written."""
    return tuple(value for value in namespace.values() if isinstance(value, Var))
