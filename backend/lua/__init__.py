"""Lua scripts of the Redis backend, one atomic step per file: the shared ones (rate limits, counters,
version counters, compare-and-delete). The quota store's own scripts are in `quota/lua/`, whose loader
also finds these (a quota script takes gcra.lua's arithmetic as a prelude).

A script that shares arithmetic with others names the shared file as a prelude: `load("gcra_multi", "gcra")`
is gcra.lua's local functions followed by gcra_multi.lua, one script text registered once per process.
"""

from importlib.resources import files


def text(name: str) -> str:
    """The text of `name`.lua in this folder."""
    return (files(__package__) / f"{name}.lua").read_text(encoding="utf-8")


def load(name: str, *preludes: str) -> str:
    """The text of `name`.lua, after the text of each prelude file in order."""
    return "".join(text(part) for part in (*preludes, name))
