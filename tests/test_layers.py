"""Import arrows point one way (docs/ARCHITECTURE.md, "Layers and import directions").

The layers, top to bottom, and what each may import:

    the top        server/{app,container,context,cli,supervise,quota_sync}.py — wires everything
    domains        server/<domain>/ (accounts, auth, channels, keys, logs, payments, pricing, redemptions,
                   relay, system, topups, console) — never each other
    components     server/components/ (caches, stores, directories, rules shared by domains) and
                   server/upstream/ (the one upstream client, its providers and fault vocabulary)
    shared         server/web/ (the HTTP adapter) and the shared server/*.py modules (errors, crypto, …)
    below          models/ (SQL), quota/ (the quota engine: money), core/ (domain terms, the standard library
                   only)
    the bottom     backend/ (the shared state: broadcasts, versions, records, locks, the stores) — imports
                   nothing of the project's; quota/ imports only it

Parses every module's imports and checks each rule; the package graph (backend, core, models, quota,
scripts and each of the server layers and domains above) has no cycle. Imports under `if TYPE_CHECKING:`
count for every rule but the cycle (they are not executed). The deliberate exceptions are the allow-list
below, each with its reason; an entry that no longer matches an import fails too, so the list never
outlives it.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOMAINS = ("accounts", "auth", "channels", "keys", "logs", "system", "relay", "redemptions", "topups",
           "payments", "console", "observability", "pricing")
COMPONENT_PACKAGES = ("components", "upstream")
TOP_MODULES = ("app", "container", "context", "cli", "supervise", "quota_sync")

# (importing file, imported module): the deliberate exceptions.
EXCEPTIONS = frozenset({
    # the typed accessor of the request's services, `services_of(request) -> Services`: typing only
    ("server/web/state.py", "server.container"),
})


def modules_under(folder: str) -> Iterator[Path]:
    yield from sorted((ROOT / folder).rglob("*.py"))


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _names_of(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if isinstance(node, ast.ImportFrom):
        assert node.level == 0, "relative import"
        assert node.module is not None
        return {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return set()


def imported(path: Path, *, executed_only: bool = False) -> set[str]:
    """Every module `path` imports, anywhere in the file; `from a import b` counts as `a` and `a.b`.
    `executed_only` leaves out the imports under `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skipped: set[int] = set()
    if executed_only:
        for node in ast.walk(tree):
            typing_only = isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
                and node.test.id == "TYPE_CHECKING"
            if typing_only:
                skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) not in skipped:
            names |= _names_of(node)
    return names


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def layer_of(module: str) -> str | None:
    """The package a module belongs to in the layer graph: `backend`, `core`, `models`, `quota`, `scripts`,
    `server.top`, `server.<domain>`, `server.components`, `server.upstream`, `server.web` or
    `server.shared`; None for anything outside the project."""
    parts = module.split(".")
    if parts[0] in ("backend", "core", "models", "quota", "scripts"):
        return parts[0]
    if parts[0] != "server":
        return None
    if len(parts) == 1:  # the package itself (`from server import __version__`)
        return "server.shared"
    if parts[1] in TOP_MODULES:
        return "server.top"
    if parts[1] in DOMAINS or parts[1] in COMPONENT_PACKAGES or parts[1] == "web":
        return f"server.{parts[1]}"
    return "server.shared"


def module_of(name: str) -> str:
    """The module part of an imported name that may end in an attribute (`server.keys.service.KeyService`)."""
    parts = name.split(".")
    packaged = parts[0] == "server" and len(parts) > 2 and parts[1] in (*DOMAINS, *COMPONENT_PACKAGES, "web")
    depth = 3 if packaged else 2
    return ".".join(parts[:depth])


def arrows(package: str) -> Iterator[tuple[str, str, str]]:
    """(file, its layer, the imported module) for every import of a project module under `package`."""
    for path in modules_under(package):
        module = rel(path)[:-3].replace("/", ".").removesuffix(".__init__")
        source = layer_of(module)
        assert source is not None
        for name in imported(path):
            if layer_of(name) is not None:
                yield rel(path), source, name


def refused(package: str, forbidden: set[str]) -> set[tuple[str, str]]:
    """The imports under `package` whose target layer is in `forbidden`, less the allowed exceptions."""
    found = {(file, module_of(name)) for file, _, name in arrows(package) if layer_of(name) in forbidden}
    return found - EXCEPTIONS


DOMAIN_LAYERS = {f"server.{d}" for d in DOMAINS}


def test_nothing_below_the_top_imports_it() -> None:
    below = {(f, m) for f, m in refused("server", {"server.top"})
             if layer_of(f[:-3].replace("/", ".")) != "server.top"}
    assert below == set(), "import the top (app, container, context, cli, supervise, quota_sync)"


def test_a_domain_imports_no_other_domain() -> None:
    found = {(file, module_of(name)) for file, source, name in arrows("server")
             if source in DOMAIN_LAYERS and layer_of(name) in DOMAIN_LAYERS and layer_of(name) != source}
    assert found - EXCEPTIONS == set(), "a domain reaches into another; share it through server/components/"


def test_components_and_upstream_import_no_domain() -> None:
    for package in ("server/components", "server/upstream"):
        assert refused(package, DOMAIN_LAYERS) == set(), f"{package} imports a domain"


def test_components_never_import_the_upstream_package() -> None:
    """The upstream package may use components (the model catalog); components are below it."""
    assert refused("server/components", {"server.upstream"}) == set()


def test_web_and_shared_modules_import_no_domain_or_component() -> None:
    for file, source, name in arrows("server"):
        if source in ("server.web", "server.shared") and (file, module_of(name)) not in EXCEPTIONS:
            assert layer_of(name) not in DOMAIN_LAYERS | {"server.components", "server.upstream"}, \
                f"{file} imports {name}"


def test_the_error_vocabulary_imports_no_framework() -> None:
    """server/errors.py is words any layer may raise; turning them into HTTP is server/web/errors.py."""
    names = imported(ROOT / "server" / "errors.py")
    bad = sorted(n for n in names
                 if n.split(".")[0] in ("sanic", "redis", "sqlalchemy", "server", "backend", "quota"))
    assert bad == []


def test_models_never_import_server_or_sanic() -> None:
    for path in modules_under("models"):
        bad = [n for n in imported(path) if within(n, "server") or within(n, "sanic")]
        assert not bad, f"{rel(path)} imports {bad}"


def test_core_imports_the_standard_library_only() -> None:
    for path in modules_under("core"):
        tops = {n.split(".")[0] for n in imported(path)}
        bad = sorted(t for t in tops if t not in sys.stdlib_module_names and t not in ("core", "__future__"))
        assert not bad, f"{rel(path)} imports {bad}"


def test_quota_imports_neither_server_models_sanic_nor_sqlalchemy() -> None:
    for path in modules_under("quota"):
        bad = [n for n in imported(path)
               if any(within(n, p) for p in ("server", "models", "sanic", "sqlalchemy"))]
        assert not bad, f"{rel(path)} imports {bad}"


def test_backend_imports_nothing_of_the_project() -> None:
    """The shared state is the bottom layer: every subsystem builds on it, it knows none of them (not even
    core/: its words are keys, counters and channels, not the domain's)."""
    for path in modules_under("backend"):
        bad = sorted(n for n in imported(path) if layer_of(n) not in (None, "backend")
                     or within(n, "sanic") or within(n, "sqlalchemy"))
        assert not bad, f"{rel(path)} imports {bad}"


def test_quota_imports_only_backend_of_the_project() -> None:
    """Money is built on the shared state and on nothing else of the project's (not core/ either: the
    engine's values are its own, quota/types.py)."""
    for path in modules_under("quota"):
        bad = sorted(n for n in imported(path) if layer_of(n) not in (None, "quota", "backend"))
        assert not bad, f"{rel(path)} imports {bad}"


def test_production_code_never_imports_scripts() -> None:
    """`scripts/` holds runnable entry points (benchmarks, the sync's `python -m` form); what they run lives
    in the packages, so nothing in them imports `scripts`."""
    for package in ("server", "models", "backend", "quota", "core"):
        for path in modules_under(package):
            bad = [n for n in imported(path) if within(n, "scripts")]
            assert not bad, f"{rel(path)} imports {bad}"


def package_graph() -> dict[str, set[str]]:
    """Layer → the layers its modules import when they run (imports under TYPE_CHECKING left out)."""
    graph: dict[str, set[str]] = {}
    for package in ("backend", "core", "models", "quota", "scripts", "server"):
        for path in modules_under(package):
            module = rel(path)[:-3].replace("/", ".").removesuffix(".__init__")
            source = layer_of(module)
            assert source is not None
            targets = graph.setdefault(source, set())
            targets |= {t for n in imported(path, executed_only=True)
                        if (t := layer_of(n)) is not None and t != source}
    return graph


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` (its nodes in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt, path)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [])) is not None:
            return found
    return None


def test_the_package_graph_has_no_cycle() -> None:
    assert cycle_in(package_graph()) is None


def test_the_cycle_finder_finds_one() -> None:
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) in (["a", "b", "c", "a"],)
    assert cycle_in({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_every_allowed_exception_is_still_needed() -> None:
    """An exception whose import is gone is removed from the list (and from docs/ARCHITECTURE.md)."""
    every = {(file, module_of(name)) for file, _, name in arrows("server")}
    assert {pair for pair in EXCEPTIONS if pair not in every} == set()


def test_the_typed_accessor_imports_the_container_for_typing_only() -> None:
    assert "server.container" in imported(ROOT / "server" / "web" / "state.py")
    assert "server.container" not in imported(ROOT / "server" / "web" / "state.py", executed_only=True)
