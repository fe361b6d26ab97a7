"""Import arrows point one way (docs/ARCHITECTURE.md, "Layers and import directions").

Parses every module's imports (including those under `if TYPE_CHECKING:`) and checks:

- no module of a server domain (`server/<domain>/`), of `server/web/` or of the shared `server/*.py`
  modules imports the top: `server.context`, `server.container`, `server.app`, `server.cli`. Only the top
  itself (app, container, context, cli) wires things together;
- a domain imports from a sibling domain only that domain's published components (the caches and stores
  `server/context.py` builds and hands to services), never its services, routes or rules;
- `server/web/` and the shared `server/*.py` modules import no domain; a component imports no other
  domain and no service or route;
- `models/` never imports `server/` or Sanic; `core/` imports the standard library only; `quota/` imports
  neither `server/`, `models/`, Sanic nor SQLAlchemy.

The deliberate exceptions are the explicit allow-lists below; each is explained in docs/ARCHITECTURE.md.
An allow-list entry that no longer matches an import fails too, so the list never outlives its reason.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOMAINS = ("accounts", "auth", "channels", "keys", "logs", "system", "relay", "redemptions", "topups",
           "payments")
TOP = ("server.app", "server.container", "server.context", "server.cli")
TOP_FILES = ("server/app.py", "server/container.py", "server/context.py", "server/cli.py",
             "server/supervise.py")

# The caches and stores each domain publishes: built by server/context.py, handed to services by
# server/container.py; any domain may import them to declare what its services receive.
COMPONENTS = frozenset({
    "server.accounts.directory",  # UserDirectory: a user's role, status, token digest
    "server.auth.sessions",       # SessionStore: login sessions (Redis or SQL)
    "server.accounts.codes",      # EmailCodes, ResetTokens: single-use e-mail codes and reset tokens
    "server.auth.verification",   # SecureVerifier: whether a caller holds a fresh secure verification
    "server.channels.table",      # ChannelTable: the in-memory routing table
    "server.keys.directory",      # KeyDirectory: an API key's cached state
    "server.system.options",      # Options: the option values and their typed Settings
    "server.channels.catalog",    # the model catalog: capabilities, built-in prices (pure metadata)
    "server.relay.admin",         # UpstreamAdmin: upstream calls made for an admin (test, balance, models)
    "server.relay.upstream",      # Upstream: the worker's one outgoing HTTP client (payments call through it)
})

# (importing file, imported module): the deliberate exceptions, explained in docs/ARCHITECTURE.md.
SIBLING_EXCEPTIONS = frozenset({
    # the user rules (username, password, invitation code) are one set for every way a user is made
    ("server/auth/schemas.py", "server.accounts.rules"),
    ("server/auth/service.py", "server.accounts.rules"),
    ("server/auth/passkeys.py", "server.accounts.rules"),  # the role hierarchy of the admin passkey reset
    ("server/system/service.py", "server.accounts.rules"),
    # the role hierarchy is one rule for every admin action on another user (here: resetting their 2FA)
    ("server/auth/two_factor.py", "server.accounts.rules"),
    # how a user is shown lives in one place per resource; login answers with the user's login view
    ("server/auth/routes.py", "server.accounts.views"),
    ("server/auth/passkey_routes.py", "server.accounts.views"),
    # the admin passkey reset names its user as every admin user route does
    ("server/auth/passkey_routes.py", "server.accounts.schemas"),
    # the request the worker's upstream client sends is described by the relay's `UpstreamCall`
    ("server/payments/checkout.py", "server.relay.providers"),
})
TOP_EXCEPTIONS = frozenset({
    # the typed accessor of the request's services (`services_of`, for typing only)
    ("server/web/state.py", "server.container"),
})


def modules_under(folder: str) -> Iterator[Path]:
    yield from sorted((ROOT / folder).rglob("*.py"))


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def imported(path: Path) -> set[str]:
    """Every module `path` imports, anywhere in the file; `from a import b` counts as `a` and `a.b`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{rel(path)}: relative import"
            assert node.module is not None
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def domain_of(name: str) -> str | None:
    """`server.keys.service` → `keys`; None for anything that is not a server domain module."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "server" and parts[1] in DOMAINS else None


def module_of(name: str) -> str:
    """The module part of an imported name that may end in an attribute (`server.keys.service.KeyService`)."""
    parts = name.split(".")
    return ".".join(parts[:3]) if parts[0] == "server" and len(parts) > 3 else name


def server_modules() -> Iterator[tuple[str, set[str]]]:
    for path in modules_under("server"):
        if rel(path) not in TOP_FILES:
            yield rel(path), imported(path)


def test_nothing_below_the_top_imports_the_context_or_the_container() -> None:
    found = {(file, top) for file, names in server_modules() for top in TOP
             if any(within(n, top) for n in names)}
    assert found - TOP_EXCEPTIONS == set(), "import the top (context/container/app/cli)"


def test_a_domain_imports_only_the_published_components_of_its_siblings() -> None:
    found: set[tuple[str, str]] = set()
    for file, names in server_modules():
        own = file.split("/")[1] if file.count("/") >= 2 else None
        for name in names:
            other = domain_of(name)
            if other is not None and other != own:
                module = module_of(name)
                if module != f"server.{other}" and module not in COMPONENTS:
                    found.add((file, module))
    assert found - SIBLING_EXCEPTIONS == set(), "reach into a sibling domain's internals"


def test_components_import_no_service_route_or_other_domain() -> None:
    for component in COMPONENTS:
        path = ROOT / (component.replace(".", "/") + ".py")
        own = component.split(".")[1]
        for name in imported(path):
            other = domain_of(name)
            if other is None:
                continue
            assert other == own, f"{component} imports {name}"
            assert module_of(name).rsplit(".", 1)[-1] not in ("service", "routes", "guard"), \
                f"{component} imports {name}"


def test_web_and_shared_server_modules_import_no_domain() -> None:
    for file, names in server_modules():
        if file.count("/") == 1 or file.startswith("server/web/"):
            assert not [n for n in names if domain_of(n)], f"{file} imports a domain"


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


def test_every_allowed_exception_is_still_needed() -> None:
    """An exception whose import is gone is removed from the list (and from docs/ARCHITECTURE.md)."""
    every = {(file, module_of(n)) for file, names in server_modules() for n in names}
    stale = {pair for pair in SIBLING_EXCEPTIONS | TOP_EXCEPTIONS if pair not in every}
    assert stale == set()


def test_production_code_never_imports_scripts() -> None:
    """`scripts/` holds runnable entry points (benchmarks, the sync's `python -m` form); what they run lives
    in the packages, so nothing in them imports `scripts`."""
    for package in ("server", "models", "quota", "core"):
        for path in modules_under(package):
            bad = [n for n in imported(path) if within(n, "scripts")]
            assert not bad, f"{rel(path)} imports {bad}"
