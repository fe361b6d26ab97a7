"""Each environment variable is declared once (server/config_vars.py), and everything follows from that:

    the docs      docs/OPERATIONS.md's configuration table is what `python -m scripts.config_table` writes
                  today; a doc writes no range of its own (`{range}` is the parser's bounds)
    the reading   `from_env` reads exactly the declared variables, each numeric default lies within its
                  bounds, and an empty value is the default for every one of them
    the defaults  `Config`'s dataclass defaults are the declared ones (what `Config(...)` in the tests and
                  `from_env({})` give agree), each declared field is a field of `Config`
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from scripts.config_table import OPERATIONS_DOC, default_cell, markdown, meaning_cell, updated
from server import config_vars as v
from server.config import Config, RateLimit, from_env
from server.config_parse import Var, whole
from server.faults import NONE as NO_FAULTS

NAMES = [var.name for var in v.VARS]
SECRET = "0123456789abcdef0123456789abcdef"
# Config's fields that `from_env` builds from several declarations (no declaration has them as `field`)
COMBINED = {"database_url", "secret_key", "data_dir", "redis_url", "redis_cluster_nodes", "global_rate_limit",
            "critical_rate_limit", "faults"}


class Recording(Mapping[str, str]):
    """An environment that remembers every name looked up."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values, self.seen = values, set[str]()

    def __getitem__(self, key: str) -> str:
        self.seen.add(key)
        return self.values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)


def test_the_committed_table_is_current() -> None:
    text = OPERATIONS_DOC.read_text(encoding="utf-8")
    assert updated(text) == text, "docs/OPERATIONS.md's configuration table is stale: run " \
                                  "python -m scripts.config_table"


def test_one_row_per_declaration_in_order_with_its_default_and_range() -> None:
    rows = markdown().splitlines()
    assert rows[:2] == ["| Variable | Default | Meaning |", "|---|---|---|"]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows[2:]] == [f"`{name}`" for name in NAMES]
    assert len(set(NAMES)) == len(NAMES)
    assert default_cell(v.REDIS_TIMEOUT) == "`2`" and default_cell(v.ACCESS_LOG) == "`false`"
    assert default_cell(v.REDIS_URL) == "unset" and default_cell(v.REDIS_KEY_PREFIX) == "`tollway:`"
    assert "connecting included (0.05–60);" in meaning_cell(v.REDIS_TIMEOUT)
    odd = Var("X", 5, whole(1, 10**5), doc="a | b ({range})")
    assert (default_cell(odd), meaning_cell(odd)) == ("`5`", "a \\| b (1–100000)")
    with pytest.raises(ValueError, match=r"^LOG_LEVEL: "):
        meaning_cell(dataclasses.replace(v.LOG_LEVEL, doc="({range})"))  # a choice has no bounds


def test_a_doc_writes_no_range_of_its_own() -> None:
    for var in v.VARS:
        assert var.doc.strip(), var.name
        assert not re.search(r"\d–\d", var.doc), f"{var.name}: write {{range}}, the parser's bounds"


def test_from_env_reads_exactly_the_declared_variables(tmp_path: Path) -> None:
    for switch in ("", "1"):
        env = Recording({"DATA_DIR": str(tmp_path), "SECRET_KEY": SECRET, "TOLLWAY_TEST_FAULTS": switch})
        from_env(env)
        assert env.seen == set(NAMES), switch


def test_every_numeric_default_lies_within_its_bounds() -> None:
    numeric = [var for var in v.VARS if var.parse.kind in ("int", "float")]
    assert len(numeric) >= 25
    for var in numeric:
        assert var.lo is not None and var.hi is not None
        assert var.lo <= var.default <= var.hi, var.name


@pytest.mark.parametrize("name", NAMES)
def test_an_empty_value_is_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.chdir(tmp_path)  # DATA_DIR's default, ./data, is in the test's directory
    assert from_env({name: ""}) == from_env({})


def test_config_defaults_are_the_declared_ones(tmp_path: Path) -> None:
    fields = {f.name: f for f in dataclasses.fields(Config)}
    fed = {var.field: var for var in v.VARS if var.field}
    assert set(fields) == set(fed) | COMBINED
    for name, var in fed.items():
        assert fields[name].default == var.default, name
    built = Config(database_url="sqlite+aiosqlite:///x.db", secret_key=SECRET, data_dir=tmp_path)
    assert (built.redis_url, built.redis_cluster_nodes, built.faults) == (None, (), NO_FAULTS)
    assert built.global_rate_limit == RateLimit(v.GLOBAL_API_RATE_LIMIT.default,
                                                v.GLOBAL_API_RATE_LIMIT_DURATION.default)
    assert built.critical_rate_limit == RateLimit(v.CRITICAL_RATE_LIMIT.default,
                                                  v.CRITICAL_RATE_LIMIT_DURATION.default)
    read = from_env({"DATA_DIR": str(tmp_path), "SECRET_KEY": SECRET, "DATABASE_URL": built.database_url})
    assert read == dataclasses.replace(built, data_dir=read.data_dir)
