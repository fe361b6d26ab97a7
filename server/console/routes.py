"""The console's routes: its pages (each answers `index.html`; the browser draws the page) and its files.

`PAGES` are the paths the console's router knows: both read the one manifest, `static/pages.json`
(`assets.page_manifest`; `static/js/pages.js` imports it). Nothing here is under `/api`, `/v1` or
`/v1beta`: those answer as before, and an unknown `/api/...` path is still the JSON 404.

A browser that opens an address the console does not have (a GET asking for HTML, outside `/api`, `/v1`,
`/v1beta` and `/console/`) gets `index.html` with the 404 status, and the console shows its "Page not
found" (`page_not_found`, put before the model routes' error shapes in server/app.py); any other unknown
path is the JSON 404 of an unknown route.

Every answer is conditional (`ETag`, a 304 on `If-None-Match`). A page is revalidated on every load
(`no-cache`) and carries a strict `Content-Security-Policy` (only this origin's scripts, styles and
connections; no inline script or style; no framing; images and sound also from `blob:` addresses, which
the page makes of what it fetched with `New-Api-User` — the 2FA QR code — or made itself — the
playground's WAV; images also from the origin of the site's `Logo` when it is on another site). A file
under `/console/<version>/` of the running release never changes, so it is cached for a year as
immutable; under another version (a page loaded before an upgrade) the current file is sent, to be
revalidated.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import Field
from sanic import Blueprint, Request, Sanic
from sanic.exceptions import NotFound as NoSuchRoute
from sanic.response import HTTPResponse

from server.console.assets import Asset, Bundle, page_manifest
from server.web.access import Access, Wire, route
from server.web.errors import ErrorShape, envelope_error
from server.web.schema import QueryTextRule, Schema
from server.web.state import services_of

bp = Blueprint("console")

# path → what the page is for (its route's summary), from the manifest the console's router also reads
PAGES: dict[str, str] = {entry["path"]: entry["summary"] for entry in page_manifest()}

IMG_SRC = "img-src 'self' blob:"
CSP = "; ".join((
    "default-src 'self'", "script-src 'self'", "style-src 'self'", IMG_SRC,
    "media-src 'self' blob:", "connect-src 'self'",
    "font-src 'self'", "object-src 'none'", "base-uri 'none'", "form-action 'self'",
    "frame-ancestors 'none'",
))
PAGE_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY", "Cache-Control": "no-cache"}
ORIGIN = re.compile(r"https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?")


@lru_cache(maxsize=8)
def page_headers(logo: str) -> dict[str, str]:
    """A page's headers: `PAGE_HEADERS`, with images also allowed from the origin of the site's `Logo` when
    it is an address on another site (only that origin, and only for images; anything that is not a plain
    http(s) origin adds nothing)."""
    parts = urlsplit(logo.strip())
    origin = f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") else ""
    if not ORIGIN.fullmatch(origin):
        return PAGE_HEADERS
    return {**PAGE_HEADERS, "Content-Security-Policy": CSP.replace(IMG_SRC, f"{IMG_SRC} {origin}")}


def headers_of(request: Request) -> dict[str, str]:
    """The headers of a page answered to `request` (`page_headers` of the site's current `Logo`)."""
    return page_headers(services_of(request).system.logo())


IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
NAME_MAX = 200


@bp.listener("before_server_start")
async def load_bundle(app: Sanic[Any, Any]) -> None:
    app.ctx.console = Bundle.load()


def bundle_of(request: Request) -> Bundle:
    bundle: Bundle = request.app.ctx.console
    return bundle


def matches(if_none_match: str, etag: str) -> bool:
    """Whether an `If-None-Match` header names `etag` (weak comparison, as RFC 9110 asks for a GET)."""
    tags = [t.strip() for t in if_none_match.split(",")]
    return "*" in tags or etag in (t.removeprefix("W/") for t in tags)


def send(request: Request, asset: Asset, headers: dict[str, str]) -> HTTPResponse:
    headers = {**headers, "ETag": asset.etag}
    if matches(request.headers.get("if-none-match", ""), asset.etag):
        return HTTPResponse(status=304, headers=headers)
    return HTTPResponse(asset.body, headers=headers, content_type=asset.media_type)


def _page(path: str, summary: str) -> None:
    async def page(request: Request) -> HTTPResponse:
        return send(request, bundle_of(request).index, headers_of(request))

    slug = path.strip("/").replace("/", "_").replace("-", "_") or "home"
    page.__name__ = page.__qualname__ = f"console_{slug}"
    page.__doc__ = (f"{summary}\nThe console's `index.html` (the page is drawn in the browser by the "
                    "console's scripts); revalidated on every load (`ETag`, 304).")
    route(bp, "GET", path, access=Access.PUBLIC, reply=str, wire=Wire.RAW, media_type="text/html",
          conditional=True)(page)


for _path, _summary in PAGES.items():
    _page(_path, _summary)

NOT_CONSOLE = ("/api/", "/v1/", "/v1beta/", "/console/")
ShapeFor = Callable[[Request], ErrorShape | None]


def page_not_found(fallback: ShapeFor) -> ShapeFor:
    """The app's error shapes (`fallback`), with the console's "Page not found" first: a browser's GET of
    an address no route has, outside the API and the console's files, answers `index.html` with 404."""

    def shape_for(request: Request) -> ErrorShape | None:
        path = request.path
        if (request.route is None and request.method in ("GET", "HEAD")
                and "text/html" in request.headers.get("accept", "")
                and path not in ("/api", "/v1", "/v1beta") and not path.startswith(NOT_CONSOLE)):
            bundle: Bundle | None = getattr(request.app.ctx, "console", None)
            if bundle is not None:
                index = bundle.index
                headers = headers_of(request)
                return lambda err, request_id: (
                    HTTPResponse(index.body, status=404, headers=headers, content_type=index.media_type)
                    if err.status == 404 else envelope_error(err, request_id))
        return fallback(request)

    return shape_for


class AssetPath(Schema):
    version: Annotated[str, QueryTextRule(trim=False, max_len=64)] = Field(
        description="the release the page names (any other version gets the current file, not cached)")
    name: Annotated[str, QueryTextRule(trim=False, max_len=NAME_MAX)] = Field(
        description="the file, e.g. `js/main.js`")


@route(bp, "GET", "/console/<version>/<name:path>", access=Access.PUBLIC, path_params=AssetPath, reply=str,
       wire=Wire.RAW, media_type="text/javascript", conditional=True)
async def console_file(request: Request, version: str, name: str) -> HTTPResponse:
    """A file of the web console: an ES module (`text/javascript`), a style sheet (`text/css`) or an icon.
    Only the console's own files are served (by name, never from a file system path): anything else is
    the 404 of an unknown route. Under the running release's version it may be cached for good."""
    bundle = bundle_of(request)
    asset = bundle.files.get(name)
    if asset is None:
        raise NoSuchRoute("no such route")
    cache = IMMUTABLE if version == bundle.version else REVALIDATE
    return send(request, asset, {"Cache-Control": cache, "X-Content-Type-Options": "nosniff"})

