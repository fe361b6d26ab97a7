"""How the web console is served: its pages answer `index.html` with a strict Content-Security-Policy,
its files live under `/console/<version>/…` with ETags and long caching, nothing else of the machine can be
reached through the file route, and `/api`, `/v1`, `/v1beta` answer exactly as before (an unknown `/api`
path is still the JSON 404). Also: the console's files are package data, the server and the console's
router read one page manifest, and the Settings page declares no option of its own (it builds its
fields from `GET /api/option/schema`)."""

from __future__ import annotations

import asyncio
import fnmatch
import json
import posixpath
import re
import tomllib
from pathlib import Path

from core.option_registry import REGISTRY
from server.console.assets import Bundle
from server.console.routes import CSP, PAGES
from tests.harness import Running

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "server" / "console" / "static"
SCRIPT = re.compile(r'<script type="module" src="/console/([0-9a-f]{16})/js/main\.js"></script>')


def version_of(page: str) -> str:
    found = SCRIPT.search(page)
    assert found, page
    return found.group(1)


async def raw_get(url: str, target: str) -> tuple[int, bytes]:
    """GET `target` exactly as written on the request line (no client normalizes `..` or `%2e` away)."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


async def test_every_console_page_answers_the_index_with_a_strict_policy(embedded_app: Running) -> None:
    http = embedded_app.client().http
    for path in PAGES:
        response = await http.get(path)
        assert response.status_code == 200, (path, response.text)
        assert response.headers["content-type"] == "text/html; charset=utf-8"
        assert response.headers["content-security-policy"] == CSP
        assert "default-src 'self'" in CSP and "frame-ancestors 'none'" in CSP and "unsafe" not in CSP
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["cache-control"] == "no-cache"
        assert "<tw-shell>" in response.text and "<style" not in response.text
        assert re.search(r"<script(?![^>]*\bsrc=)", response.text) is None  # no inline script
        assert "http://" not in response.text and "https://" not in response.text  # nothing from elsewhere
    reset = await http.get("/user/reset", params={"email": "a@example.com", "token": "t"})
    assert reset.status_code == 200 and "<tw-shell>" in reset.text  # the link the reset e-mail holds


async def test_a_page_is_revalidated_by_its_etag(embedded_app: Running) -> None:
    http = embedded_app.client().http
    first = await http.get("/keys")
    etag = first.headers["etag"]
    again = await http.get("/keys", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == etag
    assert (await http.get("/keys", headers={"If-None-Match": '"something-else"'})).status_code == 200


async def test_files_are_served_by_version_with_etags(embedded_app: Running) -> None:
    http = embedded_app.client().http
    version = version_of((await http.get("/")).text)
    main = await http.get(f"/console/{version}/js/main.js")
    assert main.status_code == 200
    assert main.headers["content-type"] == "text/javascript; charset=utf-8"
    assert main.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert main.headers["x-content-type-options"] == "nosniff"
    assert main.content == (STATIC / "js" / "main.js").read_bytes()
    css = await http.get(f"/console/{version}/console.css")
    assert css.status_code == 200 and css.headers["content-type"] == "text/css; charset=utf-8"
    etag = main.headers["etag"]
    for header in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        cached = await http.get(f"/console/{version}/js/main.js", headers={"If-None-Match": header})
        assert cached.status_code == 304 and cached.content == b"", header
    # a page loaded before an upgrade names an older version: it gets today's file, not to be kept
    stale = await http.get("/console/0123456789abcdef/js/main.js")
    assert stale.status_code == 200 and stale.content == main.content
    assert stale.headers["cache-control"] == "no-cache"


async def test_every_file_the_console_names_is_served(embedded_app: Running) -> None:
    """The index's links and every module's imports (static and dynamic) resolve to files of the bundle; the
    router loads `js/pages/<module>.js` for each entry of the page manifest it imports."""
    http = embedded_app.client().http
    page = (await http.get("/")).text
    version = version_of(page)
    wanted = set(re.findall(rf'"/console/{version}/([^"]+)"', page))
    seen: set[str] = set()
    while wanted - seen:
        name = sorted(wanted - seen)[0]
        seen.add(name)
        response = await http.get(f"/console/{version}/{name}")
        assert response.status_code == 200, name
        if name.endswith(".js"):
            for spec in re.findall(r'(?:from|import)\s*\(?\s*"(\.{1,2}/[^"]+)"', response.text):
                wanted.add(posixpath.normpath(posixpath.join(posixpath.dirname(name), spec)))
        if name == "pages.json":
            assert "import(`./pages/${module}.js`)" in (STATIC / "js" / "pages.js").read_text()
            wanted.update(f"js/pages/{entry['module']}.js" for entry in response.json())
    assert {"js/main.js", "js/pages/keys.js", "js/pages/dashboard.js", "console.css"} <= seen


TRAVERSALS = (
    "/console/{v}/../../pyproject.toml", "/console/{v}/%2e%2e/%2e%2e/pyproject.toml",
    "/console/{v}/..%2f..%2fpyproject.toml", "/console/{v}/js/../../routes.py",
    "/console/{v}/%2e%2e%2froutes.py", "/console/{v}//etc/passwd", "/console/{v}/%2fetc%2fpasswd",
    "/console/{v}/js%2f..%2f..%2froutes.py", "/console/{v}/index.html", "/console/{v}/tsconfig.json",
    "/console/{v}/../assets.py", "/console/{v}/js/main.js%00.py", "/console/{v}/js\\..\\..\\routes.py",
)


async def test_the_file_route_reaches_nothing_but_the_console_files(embedded_app: Running) -> None:
    http = embedded_app.client().http
    version = version_of((await http.get("/")).text)
    status, body = await raw_get(embedded_app.url, f"/console/{version}/js/main.js")
    assert status == 200 and body == (STATIC / "js" / "main.js").read_bytes()
    on_disk = ("pyproject.toml", "server/console/routes.py", "server/console/assets.py")
    secrets_on_disk = [(ROOT / name).read_bytes()[:40] for name in on_disk]
    for template in TRAVERSALS:
        status, body = await raw_get(embedded_app.url, template.format(v=version))
        assert status in (400, 404), (template, status)
        assert not any(secret in body for secret in secrets_on_disk), template
        assert b"root:" not in body, template


async def test_the_api_and_model_routes_answer_as_before(embedded_app: Running) -> None:
    """Beside the console (which answers `/`), `/api`, `/v1` and `/v1beta` answer as they always did."""
    http = embedded_app.client().http
    assert (await http.get("/")).headers["content-type"] == "text/html; charset=utf-8"
    unknown = await http.get("/api/no/such/route")
    assert unknown.status_code == 404
    assert unknown.json() == {"success": False, "message": "no such route"}
    assert unknown.headers["content-type"].startswith("application/json")
    posted = await http.post("/api/keys")
    assert posted.status_code == 404 and posted.json()["message"] == "no such route"
    status = await http.get("/api/status")
    assert status.status_code == 200 and status.json()["success"] is True
    assert "content-security-policy" not in status.headers
    openai = await http.get("/v1/models")
    assert openai.status_code == 401 and "error" in openai.json()
    google = await http.get("/v1beta/models")
    assert google.status_code == 401 and google.json()["error"]["status"] == "UNAUTHENTICATED"
    other = await http.get("/no-such-page")
    assert other.status_code == 404 and other.json() == {"success": False, "message": "no such route"}

    # a browser opening an address the console has no page for gets the console (its "Page not found"),
    # with the 404 status; the API's and the model routes' unknown paths stay JSON for browsers too
    html = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    page = await http.get("/nope", headers=html)
    assert page.status_code == 404 and "<tw-shell>" in page.text
    assert page.headers["content-security-policy"] == CSP
    asset = f"/console/{version_of(page.text)}/nope.js"
    for path in ("/api/nope", "/v1/nope", "/v1beta/nope", "/api", asset):
        answer = await http.get(path, headers=html)
        assert answer.status_code == 404 and "<tw-shell>" not in answer.text, path
    posted = await http.post("/nope", headers=html)
    assert posted.status_code in (404, 405) and "<tw-shell>" not in posted.text


def test_the_console_files_are_package_data() -> None:
    """`pip install .` from a clean clone ships every file the console serves (pyproject package-data)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = setuptools["package-data"]["server"]
    served = Bundle.load()
    names = {*served.files, "index.html"}
    assert len(names) > 15
    for name in names:
        relative = f"console/static/{name}"
        assert any(fnmatch.fnmatch(relative, p) and relative.count("/") == p.count("/")
                   for p in patterns), name


def test_the_server_and_the_router_read_one_page_manifest() -> None:
    """`static/pages.json` is the one list of pages: the server answers its paths, `js/pages.js` imports it
    (and lists no path of its own), and each entry names a page module that exists."""
    manifest = json.loads((STATIC / "pages.json").read_text())
    assert [entry["path"] for entry in manifest] == list(PAGES)
    assert [entry["summary"] for entry in manifest] == list(PAGES.values())
    router = (STATIC / "js" / "pages.js").read_text()
    assert 'import manifest from "../pages.json" with { type: "json" };' in router
    assert not re.search(r'path: "/', router), "pages.js must not list a page of its own"
    for entry in manifest:
        assert (STATIC / "js" / "pages" / f"{entry['module']}.js").is_file(), entry
        assert entry["access"] in {"setup", "guest", "anyone", "user", "admin", "root"}, entry
        assert entry.get("group", "use") in {"use", "money", "manage", "system"}, entry
        assert entry["title"].startswith("page."), entry


def test_the_settings_page_declares_no_option_of_its_own() -> None:
    """The registry (core/option_registry.py) is the one declaration of an option's kind, section and
    secrecy: the page names no option but the site name, which the shell shows as soon as it is saved
    (tests/console/test_settings_page.py checks that every option gets the field its kind calls for)."""
    page = (STATIC / "js" / "pages" / "settings.js").read_text()
    named = {key for key in REGISTRY if re.search(rf'"{re.escape(key)}"', page)}
    assert named == {"SystemName"}
    assert "/api/option/schema" in page
    assert not re.search(r"token\|secret\|key", page, re.I), "the page must not re-declare what is secret"


async def test_the_api_document_lists_the_console_routes(embedded_app: Running) -> None:
    response = await embedded_app.client().http.get("/api/openapi.json")
    assert response.status_code == 200
    doc = response.json()
    assert {"/", "/keys", "/user/reset", "/console/{version}/{name}"} <= set(doc["paths"])
    file_route = doc["paths"]["/console/{version}/{name}"]["get"]
    assert file_route["tags"] == ["console"] and "304" in file_route["responses"]
    assert doc["paths"]["/"]["get"]["x-access"] == "public"
    assert "text/html" in doc["paths"]["/"]["get"]["responses"]["200"]["content"]
