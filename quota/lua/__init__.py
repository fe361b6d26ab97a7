"""Lua scripts of the Redis backend, one atomic step per file.

A script that shares arithmetic with others names the shared file as a prelude: `load("reserve", "gcra")`
is gcra.lua's local functions followed by reserve.lua, one script text registered once per process.
"""

from importlib.resources import files


def load(name: str, *preludes: str) -> str:
    """The text of `name`.lua, after the text of each prelude file in order."""
    return "".join((files(__package__) / f"{part}.lua").read_text(encoding="utf-8")
                   for part in (*preludes, name))
