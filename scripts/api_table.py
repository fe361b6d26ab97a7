"""Rewrite the route table of docs/API.md from the app's routes: `python -m scripts.api_table [--check]`.

`--check` changes nothing and exits 1 when the committed table is stale (the test does the same).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from server.app import create_app
from server.config import from_env
from server.web.openapi import document
from server.web.route_table import markdown, replace_between

API_DOC = Path(__file__).resolve().parent.parent / "docs" / "API.md"


def current_table(app_name: str = "api_table") -> str:
    """The table of the routes `create_app` registers (an embedded config; nothing is started)."""
    with tempfile.TemporaryDirectory() as data:
        config = from_env({"DATA_DIR": data, "DATABASE_URL": "sqlite+aiosqlite:///:memory:"})
        return markdown(document(create_app(config, name=app_name)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/API.md's table is stale")
    args = parser.parse_args(argv)
    text = API_DOC.read_text(encoding="utf-8")
    updated = replace_between(text, current_table())
    if args.check:
        if updated != text:
            print("docs/API.md: the route table is stale; run python -m scripts.api_table", file=sys.stderr)
            return 1
        return 0
    API_DOC.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
