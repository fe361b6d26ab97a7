"""Lua scripts of the Redis quota store, one atomic step per file.

A script that shares arithmetic with others names the shared file as a prelude: `load("reserve", "gcra")`
is gcra.lua's local functions followed by reserve.lua, one script text registered once per process. A name
that is not in this folder is one of the shared scripts in `backend/lua/` (gcra.lua, delete_if_equal.lua).
"""

from importlib.resources import files

from backend import lua as shared


def text(name: str) -> str:
    """The text of `name`.lua: in this folder, else in `backend/lua/`."""
    path = files(__package__) / f"{name}.lua"
    return path.read_text(encoding="utf-8") if path.is_file() else shared.text(name)


def load(name: str, *preludes: str) -> str:
    """The text of `name`.lua, after the text of each prelude file in order."""
    return "".join(text(part) for part in (*preludes, name))
