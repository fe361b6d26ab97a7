"""Text a caller may hand us: what every string read from a request must be before it goes anywhere.

JSON can carry strings that are not Unicode text at all: `"\\ud800"` (a lone UTF-16 surrogate escape) is
valid JSON, but no UTF-8 encoder can write it, so SQLite, MariaDB, PostgreSQL and Redis all fail on it —
and so does the JSON encoder of any reply that echoes it. NUL (`"\\u0000"`) is valid Unicode, but
PostgreSQL's text types refuse it. Header and cookie values that are not UTF-8 arrive (Sanic decodes
them with `surrogateescape`) as the same kind of lone surrogates.

Both are refused once, where bodies, cookies and headers are read, so that no handler ever sees them:
`first_bad_text` walks a parsed JSON value and names the first field that holds one (`username`,
`models[2]`, `setting.name`). Nothing here knows HTTP; the callers raise their route family's 400.
"""

from __future__ import annotations

from typing import Any

NOT_TEXT = "must be valid Unicode text (a lone surrogate is not)"
HAS_NUL = "must not contain NUL characters"
BAD_NAME = "has a member name that is not valid Unicode text or contains NUL"


def is_text(value: str) -> bool:
    """True when `value` can be encoded as UTF-8 (no lone surrogates)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def text_problem(value: str, *, nul: bool = True) -> str | None:
    """Why `value` cannot be stored (NUL refused too unless `nul` is False), or None."""
    if not is_text(value):
        return NOT_TEXT
    if nul and "\x00" in value:
        return HAS_NUL
    return None


def _child(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def first_bad_text(value: Any, *, nul: bool = True, root: str = "request body") -> tuple[str, str] | None:
    """(field path, problem) of the first string or member name in a parsed JSON value that is not
    storable text, else None. Iterative: a body nested as deeply as the JSON parser allows is fine."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item, nul=nul)
            if problem is not None:
                return path or root, problem
        elif isinstance(item, dict):
            for key, child in item.items():
                if text_problem(key, nul=nul) is not None:
                    return path or root, BAD_NAME  # never echo the bad name itself
                stack.append((_child(path, key), child))
        elif isinstance(item, list):
            stack.extend((_child(path, i), child) for i, child in enumerate(item))
    return None
