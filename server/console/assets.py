"""The console's files, read once per worker when it starts: `Bundle.load()`.

Every file under `static/` (package data) is held in memory with its media type and a strong ETag (a
digest of its bytes); the bundle's `version` is a digest of all of them. The files are addressed by their
relative name only (`js/main.js`), so a request can reach nothing but these files: there is no file
system path in a lookup. `index.html` names the files under `/console/<version>/…`, so a new release is
new URLs and a browser may keep a file of a given version for good.

`page_manifest()` reads `static/pages.json`, the console's pages (path, module, title key, access, sidebar
group, summary): the server answers each path with `index.html` (server/console/routes.py) and the
console's router (`js/pages.js`) imports the same file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import NotRequired, TypedDict

INDEX = "index.html"
VERSION_MARK = "%CONSOLE_VERSION%"  # index.html names its files /console/%CONSOLE_VERSION%/…
MEDIA_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".html": "text/html; charset=utf-8",
    ".json": "application/json",  # a JSON module (`import … with { type: "json" }`)
}
MANIFEST = "pages.json"


class PageEntry(TypedDict):
    """A page of `static/pages.json`."""

    path: str
    module: str  # js/pages/<module>.js
    title: str  # the catalogue key of its title
    access: str  # setup, guest, anyone, user, admin or root
    group: NotRequired[str]  # its sidebar group; none: no entry
    summary: str  # its route's summary in the API document


@cache
def page_manifest() -> tuple[PageEntry, ...]:
    """The console's pages, in the sidebar's order (`static/pages.json`, package data)."""
    text = (resources.files("server.console") / "static" / MANIFEST).read_text(encoding="utf-8")
    entries: list[PageEntry] = json.loads(text)
    return tuple(entries)


@dataclass(frozen=True)
class Asset:
    body: bytes
    media_type: str
    etag: str  # quoted, as sent in `ETag`

    @classmethod
    def of(cls, name: str, body: bytes) -> Asset:
        suffix = name[name.rfind("."):] if "." in name else ""
        return cls(body, MEDIA_TYPES[suffix], f'"{hashlib.sha256(body).hexdigest()[:32]}"')


@dataclass(frozen=True)
class Bundle:
    """The console of this release: `index` (the page every console path answers) and `files`."""

    version: str
    index: Asset
    files: Mapping[str, Asset]

    @classmethod
    def load(cls, root: Traversable | None = None) -> Bundle:
        """Read every file of a known type under `root` (default: this package's `static/`)."""
        root = root if root is not None else resources.files("server.console") / "static"
        files: dict[str, bytes] = dict(_walk(root, ""))
        page = files.pop(INDEX, None)
        if page is None:
            raise RuntimeError(f"the console's {INDEX} is missing (package data not installed?)")
        digest = hashlib.sha256()
        for name in sorted(files):
            digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
        digest.update(page)
        version = digest.hexdigest()[:16]
        index = Asset.of(INDEX, page.replace(VERSION_MARK.encode(), version.encode()))
        return cls(version, index, {name: Asset.of(name, body) for name, body in files.items()})


def _walk(folder: Traversable, prefix: str) -> Iterator[tuple[str, bytes]]:
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        name = prefix + entry.name
        if entry.is_dir():
            yield from _walk(entry, name + "/")
        elif any(name.endswith(suffix) for suffix in MEDIA_TYPES):
            yield name, entry.read_bytes()
