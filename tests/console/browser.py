"""What the console's browser tests share: Debian's Chromium driven by Playwright, a real `tollway serve`
(embedded) per test module, a fake upstream on its own thread, the root's API client, and the axe-core
check.

Chromium is the system's (`/usr/bin/chromium`, installed by `.ci/run`): Playwright's own browser download
cannot be reached here. Without it the tests skip, or fail with CI=true.
"""

from __future__ import annotations

import asyncio
import functools
import re
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Browser, Locator, Page, Playwright

from tests.fakes.base import FakeServer
from tests.services import unavailable
from tests.test_e2e_serve import ROOT_PASSWORD, clean_env, free_port, mariadb_redis_env, serving, setup_root

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
WIDTHS = (1280, 360)
FAKES_NETWORK = "127.0.0.1/32"  # the fake upstreams listen on loopback, which Tollway refuses unless allowed
PASSWORD = "password-1234"


def launch(playwright: Playwright) -> Browser:
    if not CHROMIUM.exists():
        unavailable("chromium", f"{CHROMIUM} is missing (apt-get install chromium)")
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)


@dataclass
class Server:
    """A running `tollway serve`; `root` is an API client signed in as root (None before setup)."""

    url: str
    root: httpx.Client | None = None

    def admin(self) -> httpx.Client:
        assert self.root is not None, "the server is not set up"
        return self.root

    def add_user(self, quota: int = 0, name: str = "") -> tuple[str, int]:
        """A new common user (name, id; a fresh name unless given) with `quota` added by root."""
        name = name or f"u{secrets.token_hex(4)}"
        made = self.admin().post("/api/user/", json={"username": name, "password": PASSWORD})
        assert made.status_code == 200, made.text
        user_id = int(made.json()["data"]["id"])
        if quota:
            topped = self.admin().post("/api/user/manage", json={"id": user_id, "action": "add_quota",
                                                                 "mode": "add", "value": quota})
            assert topped.status_code == 200, topped.text
        return name, user_id

    def status(self) -> dict[str, Any]:
        data: dict[str, Any] = httpx.get(f"{self.url}/api/status").json()["data"]
        return data


@contextmanager
def tollway(tmp: Path, *, set_up: bool) -> Iterator[Server]:
    """`tollway serve` in embedded mode on a free port (no per-IP limits: one browser makes every call of
    a module; 127.0.0.1 is a trusted proxy, so a test may stand for another client with
    `X-Forwarded-For`, as the per-IP e-mail limit needs), set up with root when `set_up`."""
    env = clean_env(DATA_DIR=str(tmp / "data"), HOST="127.0.0.1", PORT=str(free_port()),
                    UPSTREAM_ALLOW_PRIVATE=FAKES_NETWORK, GLOBAL_API_RATE_LIMIT="0", CRITICAL_RATE_LIMIT="0",
                    TRUSTED_PROXIES="127.0.0.1/32")
    with serving(tmp, env) as (_proc, url):
        if not set_up:
            yield Server(url)
            return
        with set_up_as_root(url, "sqlite") as server:
            yield server


@contextmanager
def tollway_on_mariadb_redis(tmp: Path, workers: int = 2) -> Iterator[Server]:
    """`tollway serve --workers N` on a fresh MariaDB database and Redis key prefix
    (`tests/test_e2e_serve.py` `mariadb_redis_env`), the fakes' network allowed, set up with root."""
    with (mariadb_redis_env(tmp, "console", UPSTREAM_ALLOW_PRIVATE=FAKES_NETWORK) as (env, _, _),
          serving(tmp, env, "--workers", str(workers)) as (_proc, url),
          set_up_as_root(url, "mysql") as server):
        yield server


@contextmanager
def set_up_as_root(url: str, database_type: str) -> Iterator[Server]:
    """Set the server at `url` up (its database reports `database_type`) and sign root in."""
    setup_root(url, database_type)
    with httpx.Client(base_url=url, timeout=30) as root:
        login = root.post("/api/user/login", json={"username": "root", "password": ROOT_PASSWORD})
        assert login.status_code == 200, login.text
        root.headers["New-Api-User"] = str(login.json()["data"]["id"])
        yield Server(url, root)


@contextmanager
def on_thread(fake: FakeServer) -> Iterator[FakeServer]:
    """Run a fake upstream on an event loop of its own thread (the browser tests are synchronous)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name=f"fake-{type(fake).__name__}", daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(fake.start(), loop).result(timeout=30)
        yield fake
    finally:
        asyncio.run_coroutine_threadsafe(fake.stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()


def serious_violations(page: Page) -> list[str]:
    """axe-core's serious and critical violations on the page as it is now, one line each. axe-core is
    put in a document once and run as often as asked: compiling its 500 KB script again for every run was
    a large share of the browser's work in these tests."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(_axe_script())
    results = page.evaluate("options => axe.run(document, options)", {"resultTypes": ["violations"]})
    return [f"{v['id']} ({v['impact']}): {v['help']} — "
            + "; ".join(n["target"][0] if isinstance(n["target"][0], str) else str(n["target"])
                        for n in v["nodes"][:5])
            for v in results["violations"] if v.get("impact") in ("serious", "critical")]


@functools.cache
def _axe_script() -> str:
    """The axe-core build that axe-playwright-python ships."""
    from axe_playwright_python.sync_playwright import Axe

    script: str = Axe().axe_script
    return script


def check_accessibility(page: Page, what: str) -> None:
    """No serious or critical axe-core violation on the current page at each width of `WIDTHS`, in the
    light and in the dark colour scheme."""
    size = page.viewport_size or {"width": 1280, "height": 800}
    found: list[str] = []
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 800})
            found += [f"{what} at {width}px, {scheme}: {line}" for line in serious_violations(page)]
    page.emulate_media(color_scheme="light")
    page.set_viewport_size(size)
    assert not found, "\n".join(found)


def sign_in(page: Page, server: Server, name: str, password: str = PASSWORD) -> None:
    """Sign in through the page and land on the dashboard."""
    from playwright.sync_api import expect

    page.goto(f"{server.url}/login")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password", exact=True).fill(password)
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page.get_by_role("heading", level=1, name="Dashboard")).to_be_visible()


def sign_out(page: Page) -> None:
    """Sign out through the page and wait until it shows the sign-in form: the logout request has
    answered by then, so a navigation that follows cannot abort it and find the session still open."""
    from playwright.sync_api import expect

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", level=1, name="Sign in")).to_be_visible()
    expect(page.get_by_role("status").filter(has_text="You are signed out.")).to_be_visible()


def as_root(page: Page, server: Server, path: str, title: str) -> None:
    """Sign in as root through the page and open the page `title` from the navigation."""
    from playwright.sync_api import expect

    sign_in(page, server, "root", ROOT_PASSWORD)
    page.get_by_role("navigation", name="Main").get_by_role("link", name=title).click()
    expect(page.get_by_role("heading", level=1, name=title)).to_be_visible()
    assert page.url.endswith(path)


@dataclass(frozen=True)
class Words:
    """How a row's action buttons are named in a language: the menu button's word and `common.rowAction`."""

    more: str = "More"
    row_action: str = "{action} {name}"

    def label(self, action: str, name: str) -> str:
        return self.row_action.format(action=action, name=name)


ENGLISH = Words()
CHINESE = Words("更多", "{action}：{name}")


def row_menu(page: Page, row_name: str, words: Words = ENGLISH) -> Locator:
    """Open the "More" menu of the row named `row_name` (by its button, as a person does) → the menu."""
    from playwright.sync_api import expect

    more = page.get_by_role("button", name=words.label(words.more, row_name), exact=True)
    # a list still being read again after the last action redraws its rows, closing a menu opened on the
    # old ones (as it should): open it once the rows are the new ones, as a person sees them settle
    expect(page.locator("table[aria-busy=true]")).to_have_count(0)
    more.click()
    expect(more).to_have_attribute("aria-expanded", "true")
    menu = page.get_by_role("menu", name=words.label(words.more, row_name), exact=True)
    expect(menu).to_be_visible()
    return menu


def row_action(page: Page, row_name: str, action: str, words: Words = ENGLISH) -> None:
    """Do `action` on the row named `row_name` as a person would: press its button ("Edit alice") when the
    row shows one, else choose it from the row's "More" menu."""
    from playwright.sync_api import expect

    direct = page.get_by_role("button", name=words.label(action, row_name), exact=True)
    more = page.get_by_role("button", name=words.label(words.more, row_name), exact=True)
    expect(direct.or_(more).first).to_be_visible()
    if direct.count():
        direct.click()
        return
    row_menu(page, row_name, words).get_by_role("menuitem", name=action, exact=True).click()


def row_offers(page: Page, row_name: str, words: Words = ENGLISH) -> list[str]:
    """The actions the row named `row_name` offers: its primary button's, then its menu's (opened and
    closed again with Escape); [] for a row without actions."""
    from playwright.sync_api import expect

    named = page.locator("th", has_text=re.compile(f"^{re.escape(row_name)}$"))
    row = page.locator("tbody tr").filter(has=named)
    expect(row).to_have_count(1)
    offered = [text.strip() for text in row.locator(".row-actions > button").all_text_contents()]
    if row.get_by_role("button", name=words.label(words.more, row_name), exact=True).count() == 0:
        return offered
    menu = row_menu(page, row_name, words)
    offered += [text.strip() for text in menu.get_by_role("menuitem").all_text_contents()]
    page.keyboard.press("Escape")
    expect(menu).to_be_hidden()
    return offered


def data(response: httpx.Response) -> Any:
    """The `data` of a successful API reply."""
    assert response.status_code == 200, response.text
    return response.json()["data"]


def set_option(server: Server, key: str, value: Any) -> None:
    response = server.admin().put("/api/option/", json={"key": key, "value": value})
    assert response.status_code == 200, response.text


@contextmanager
def user_client(server: Server, name: str, password: str = PASSWORD) -> Iterator[httpx.Client]:
    """An API client signed in as `name`."""
    with httpx.Client(base_url=server.url, timeout=30) as client:
        login = client.post("/api/user/login", json={"username": name, "password": password})
        assert login.status_code == 200, login.text
        client.headers["New-Api-User"] = str(login.json()["data"]["id"])
        yield client
