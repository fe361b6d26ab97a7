"""The docs stay small, and what they name exists (issue 34: docs by subject, with a budget).

Every Markdown file of the repository is under 40 KB; every repository path a doc names (in backticks, in a
code block, in prose or as a link) exists; and every `docs/….md#anchor` cited anywhere — in the code, the
tests, the console's scripts and the docs themselves, including a doc's relative links — is a heading of
that file, by GitHub's rule for heading anchors.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUDGET = 40 * 1024
SKIPPED_DIRS = {".git", ".venv", "node_modules", "test-artifacts", "__pycache__", ".mypy_cache",
                ".ruff_cache", ".pytest_cache", ".hypothesis"}
# The top-level folders a doc may name a path in; a path elsewhere (`/tmp/…`, a URL) is not the repository's.
TOP = ("server", "backend", "quota", "models", "core", "scripts", "tests", "docs", ".ci")
# A path begins after a space, a backtick, a bracket or a quote, and never inside a longer word or path
# (`/tmp/docs/x` and `https://…/server/x` are not ours).
PATH = re.compile(r"(?<![\w./:-])((?:" + "|".join(re.escape(t) for t in TOP) + r")/[\w./-]*)")
CITATION = re.compile(r"(?<![\w/])docs/((?:[\w-]+/)*[\w-]+\.md)#([\w-]*)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
CITING = {".py", ".js", ".md", ".lua", ".yml", ".yaml", ".toml", ".json", ".html", ".css", ".sh", ".txt"}


def repository_files(suffixes: set[str]) -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*")):
        parts = path.relative_to(ROOT).parts
        if any(part in SKIPPED_DIRS for part in parts) or not path.is_file():
            continue
        if path.suffix in suffixes or (path.suffix == "" and path.name == "Dockerfile" and "" in suffixes):
            yield path


def markdown_files() -> list[Path]:
    return list(repository_files({".md"}))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: link text kept, lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    """Every heading anchor of a Markdown file, with GitHub's `-1`, `-2` for a repeated heading."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        heading = None if fenced else re.match(r"#{1,6} (.*)", line)
        if heading:
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def named_paths(text: str) -> Iterator[str]:
    """The repository paths a text names (placeholders like `server/<domain>/` and globs are not paths)."""
    for match in PATH.finditer(text):
        raw = match.group(1)
        end = match.end(1)
        if end < len(text) and text[end] in "<*{…":
            continue
        path = raw.split("::")[0].rstrip(".,;:")
        yield path


def test_every_markdown_file_is_under_the_budget() -> None:
    docs = markdown_files()
    assert any(doc.name == "ARCHITECTURE.md" for doc in docs)
    over = {str(doc.relative_to(ROOT)): doc.stat().st_size for doc in docs if doc.stat().st_size >= BUDGET}
    assert over == {}, f"over {BUDGET} bytes: split by subject"


def test_every_path_a_doc_names_exists() -> None:
    missing: list[str] = []
    for doc in markdown_files():
        text = doc.read_text(encoding="utf-8")
        name = doc.relative_to(ROOT)
        for path in named_paths(text):
            if not (ROOT / path).exists():
                missing.append(f"{name}: {path}")
        for match in LINK.finditer(text):
            target = match.group(1).split("#")[0]
            if not target or re.match(r"[a-z]+:", target) or target.startswith("/"):
                continue
            resolved = (doc.parent / target).resolve()
            if resolved.is_relative_to(ROOT) and not resolved.exists():
                missing.append(f"{name}: link {target}")
    assert missing == []


def cited_anchors() -> Iterator[tuple[str, Path, str]]:
    """(where, doc, anchor) for every cited `docs/…` anchor in the repository and every relative link in a
    doc."""
    for path in repository_files(CITING):
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(ROOT))
        for match in CITATION.finditer(text):
            yield where, ROOT / "docs" / match.group(1), match.group(2)
        if path.suffix == ".md":
            for match in LINK.finditer(text):
                target, _, anchor = match.group(1).partition("#")
                if not anchor or re.match(r"[a-z]+:", target):
                    continue
                yield where, (path.parent / target).resolve() if target else path, anchor


def test_every_cited_anchor_is_a_heading() -> None:
    headings: dict[Path, set[str]] = {}
    broken: list[str] = []
    count = 0
    for where, doc, anchor in cited_anchors():
        count += 1
        if not doc.exists():
            broken.append(f"{where}: {doc.relative_to(ROOT)} does not exist")
            continue
        if doc not in headings:
            headings[doc] = anchors(doc)
        if anchor not in headings[doc]:
            broken.append(f"{where}: {doc.relative_to(ROOT)}#{anchor}")
    assert count > 100
    assert broken == []


# ---- the checkers themselves -------------------------------------------------------------------------------

@pytest.mark.parametrize(("heading", "anchor"), [
    ("Connections: request deadlines and the stop", "connections-request-deadlines-and-the-stop"),
    ("The domain core (`core/`)", "the-domain-core-core"),
    ("Revealing a channel's key", "revealing-a-channels-key"),
    ("Gemini generateContent (G1)", "gemini-generatecontent-g1"),
    ("Decisions beyond the API reference (gateway, keys, channels, logs, money)",
     "decisions-beyond-the-api-reference-gateway-keys-channels-logs-money"),
    ("E-mail codes and password reset", "e-mail-codes-and-password-reset"),
    ("See [the guide](GUIDE.md) first", "see-the-guide-first"),
])
def test_slug_follows_github(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_a_repeated_heading_gets_a_number(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text("# T\n\n## Notes\n\n```\n## not a heading\n```\n\n## Notes\n", encoding="utf-8")
    assert anchors(doc) == {"t", "notes", "notes-1"}


def test_named_paths_are_precise() -> None:
    text = ("`server/relay/pipeline.py` `Relay`, see tests/quota/test_engine.py::test_x, "
            "docs/api/gateway.md#prices. Not /tmp/server/x, https://example.com/docs/a.md, "
            "`server/<domain>/`, `docs/grafana/*.json`, nor 10 requests/s.")
    assert list(named_paths(text)) == ["server/relay/pipeline.py", "tests/quota/test_engine.py",
                                       "docs/api/gateway.md"]
