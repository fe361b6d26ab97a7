"""docs/API.md's route table is generated from the routes (server/web/route_table.py): the committed table
must be what `python -m scripts.api_table` writes today, and the renderer lists every operation once."""

from __future__ import annotations

from typing import Any

import pytest

from scripts.api_table import API_DOC, current_table
from server.web.route_table import BEGIN, END, markdown, replace_between


def test_the_committed_route_table_is_current() -> None:
    text = API_DOC.read_text(encoding="utf-8")
    assert replace_between(text, current_table("route_table_current")) == text, (
        "docs/API.md's route table is stale: run python -m scripts.api_table")


def test_the_table_has_one_row_per_operation_with_access_and_summary() -> None:
    doc: dict[str, Any] = {"paths": {
        "/api/thing/{id}": {"get": {"tags": ["thing"], "x-access": "admin", "summary": "One thing."},
                            "delete": {"tags": ["thing"], "x-access": "root", "x-critical": True,
                                       "summary": "Delete a | thing."}},
        "/v1/models": {"get": {"tags": ["models"], "x-access": "api_key", "summary": "The models."}},
        "/api/a": {"post": {"tags": ["a"], "x-access": "user", "x-session-only": True, "summary": "A."}}}}
    rows = markdown(doc).splitlines()
    assert rows[:2] == ["| Route | Access | What it does |", "|---|---|---|"]
    assert rows[2:] == ["| `POST /api/a` | user (session) | A. |",
                        "| `DELETE /api/thing/{id}` | root, critical limit | Delete a \\| thing. |",
                        "| `GET /api/thing/{id}` | admin | One thing. |",
                        "| `GET /v1/models` | API key | The models. |"]


def test_replace_between_keeps_the_text_around_the_markers() -> None:
    text = f"before\n{BEGIN}\nold rows\n{END}\nafter\n"
    assert replace_between(text, "new\n") == f"before\n{BEGIN}\nnew\n{END}\nafter\n"
    with pytest.raises(ValueError):
        replace_between("no markers", "new\n")
