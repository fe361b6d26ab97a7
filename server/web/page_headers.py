"""The headers of every HTML reply, set in one place: the app's response hook (server/app.py).

A page of ours must not be framed by another site (clickjacking: `frame-ancestors 'none'`, and
`X-Frame-Options: DENY` for browsers that predate it), sniffed into another type, or allowed to run or load
more than its route declares. A route that serves a page declares its own `Content-Security-Policy` — the
console's (server/console/routes.py `CSP`), the API documentation's (server/system/routes.py `DOCS_CSP`,
its inline script and style allowed by their hashes, nothing from elsewhere) — and any other HTML reply gets
`STRICT_CSP`, which allows nothing at all. A policy without `frame-ancestors` gets `'none'` added.
"""

from __future__ import annotations

import base64
import hashlib

from sanic.response import BaseHTTPResponse

STRICT_CSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
HTML_HEADERS = {"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "no-referrer"}
CSP = "content-security-policy"


def inline_source(text: str) -> str:
    """The CSP source that allows one inline `<script>` or `<style>` whose text is exactly `text`."""
    digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
    return f"'sha256-{digest}'"


def protect_html(response: BaseHTTPResponse) -> None:
    """Give an HTML reply the headers above (those its route set itself are kept)."""
    if not (response.content_type or "").startswith("text/html"):
        return
    headers = response.headers
    for name, value in HTML_HEADERS.items():
        if name not in headers:
            headers[name] = value
    policy = headers.get(CSP)
    if policy is None:
        headers[CSP] = STRICT_CSP
    elif "frame-ancestors" not in policy:
        headers[CSP] = f"{policy}; frame-ancestors 'none'"
