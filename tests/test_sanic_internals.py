"""Sanic's internals are used in one module only (server/web/sanic_internals.py), against the Sanic release
it was read against: the installed Sanic is that minor version (pyproject.toml pins it), and no other module
of the project imports a part of Sanic outside its public API. When Sanic moves, this says so, and names
what to read again."""

from __future__ import annotations

import tomllib
from importlib.metadata import version

from server.web.sanic_internals import CHECKED
from tests.test_layers import ROOT, imported, modules_under, rel, within

INTERNALS = "server/web/sanic_internals.py"
PUBLIC = ("sanic", "sanic.response", "sanic.exceptions", "sanic.request", "sanic.log", "sanic.config",
          "sanic.blueprints", "sanic.constants")
"""Sanic's modules that are its documented API (anything else is an internal)."""


def test_the_installed_sanic_is_the_release_its_internals_were_read_against() -> None:
    installed = ".".join(version("sanic").split(".")[:2])
    assert installed == CHECKED, (
        f"Sanic {version('sanic')} is installed, but {INTERNALS} was read against {CHECKED}: read the parts "
        f"it lists again in Sanic {installed}, then change CHECKED and the pin in pyproject.toml")


def test_pyproject_pins_sanic_to_that_minor_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = [d.split("#")[0].replace(" ", "") for d in project["dependencies"] if d.startswith("sanic")]
    major, minor = (int(part) for part in CHECKED.split("."))
    assert pins == [f"sanic>={major}.{minor},<{major}.{minor + 1}"], pins


def private_imports(names: set[str]) -> set[str]:
    """The imported names that are Sanic modules outside `PUBLIC` (`from sanic import Sanic` names the
    module `sanic` and `sanic.Sanic`: a name directly under a public module counts as public)."""
    return {n for n in names if within(n, "sanic") and n not in PUBLIC
            and n.rsplit(".", 1)[0] not in PUBLIC}


def test_no_module_but_one_imports_sanics_internals() -> None:
    found = {rel(path): sorted(private_imports(imported(path)))
             for folder in ("server", "quota", "models", "core", "scripts")
             for path in modules_under(folder) if rel(path) != INTERNALS}
    assert {path: names for path, names in found.items() if names} == {}


def test_the_check_sees_a_private_import() -> None:
    assert private_imports({"sanic", "sanic.Sanic", "sanic.response", "sanic.response.json"}) == set()
    assert private_imports({"sanic.worker.manager", "sanic.worker.manager.WorkerManager"}) == {
        "sanic.worker.manager", "sanic.worker.manager.WorkerManager"}
    assert private_imports(imported(ROOT / INTERNALS))  # the one module that does
