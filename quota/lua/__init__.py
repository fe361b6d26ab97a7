"""Lua scripts of the Redis backend, one atomic step per file."""

from importlib.resources import files


def load(name: str) -> str:
    return (files(__package__) / f"{name}.lua").read_text(encoding="utf-8")
