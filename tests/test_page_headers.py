"""Every HTML reply carries the page headers (server/web/page_headers.py): `X-Frame-Options: DENY`,
`nosniff`, and a `Content-Security-Policy` that forbids framing and allows nothing from elsewhere.

    every page       each route declared `text/html` (the console's pages, `/api/docs`) answers with all
                     three, its policy free of `unsafe-*`, wildcards and other hosts
    /api/docs        its policy is `default-src 'none'` plus exactly its own inline script and style (their
                     hashes: the page's texts hash to them) and requests to this origin
    any other page   an HTML reply whose route set no policy gets the one that allows nothing
(That the API docs still work under their policy, and cannot be framed, is shown in Chromium:
tests/console/test_docs_page.py.)
"""

from __future__ import annotations

import re

from sanic.response import html, text

from server.system.routes import DOCS_CSP
from server.web.page_headers import STRICT_CSP, inline_source, protect_html
from tests.harness import Running

INLINE = re.compile(r"<(script|style)>(.*?)</\1>", re.DOTALL)


def html_paths(running: Running) -> list[str]:
    paths = [route.path for route in running.app.router.routes
             if getattr(route.ctx, "media_type", "") == "text/html" and "<" not in route.path]
    return sorted("/" + path.lstrip("/") for path in set(paths))


async def test_every_page_forbids_framing_and_sniffing(embedded_app: Running) -> None:
    http = embedded_app.client().http
    paths = html_paths(embedded_app)
    assert {"/", "/login", "/api/docs"} <= set(paths)
    for path in paths:
        reply = await http.get(path)
        assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/html"), path
        assert reply.headers["x-frame-options"] == "DENY", path
        assert reply.headers["x-content-type-options"] == "nosniff", path
        policy = reply.headers["content-security-policy"]
        directives = [d.strip() for d in policy.split(";")]
        assert "frame-ancestors 'none'" in directives, (path, policy)
        assert "unsafe" not in policy and "*" not in policy and "http" not in policy, (path, policy)


async def test_the_api_docs_allow_only_their_own_script_and_style(embedded_app: Running) -> None:
    reply = await embedded_app.client().http.get("/api/docs")
    policy = reply.headers["content-security-policy"]
    assert policy == DOCS_CSP
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["default-src"] == "'none'" and directives["connect-src"] == "'self'"
    inline = INLINE.findall(reply.text)
    assert sorted(kind for kind, _ in inline) == ["script", "style"]
    for kind, body in inline:  # the browser runs each only because its hash is in the policy
        assert directives[f"{kind}-src"] == inline_source(body), kind
    assert "src=" not in reply.text and "http" not in reply.text.replace('href="/api/openapi.json"', "")


def test_an_html_reply_without_a_policy_gets_the_one_that_allows_nothing() -> None:
    page = html("<p>hello</p>")
    protect_html(page)
    assert page.headers["content-security-policy"] == STRICT_CSP
    assert "default-src 'none'" in STRICT_CSP and "frame-ancestors 'none'" in STRICT_CSP
    assert page.headers["x-frame-options"] == "DENY"
    own = html("<p>hello</p>", headers={"Content-Security-Policy": "default-src 'self'"})
    protect_html(own)
    assert own.headers["content-security-policy"] == "default-src 'self'; frame-ancestors 'none'"
    plain = text("hello")
    protect_html(plain)
    assert "content-security-policy" not in plain.headers and "x-frame-options" not in plain.headers
