"""The cross-site refusal: a browser's state-changing request must come from a page of this site.

Login CSRF: a page of another site posts a form to `POST /api/user/login` with the attacker's own
credentials; the victim's browser follows the reply and keeps its `Set-Cookie` (`SameSite=Strict` stops a
cookie from being *sent* cross-site, not from being *set* by a cross-site reply), and the victim works —
pays, adds keys — in the attacker's account. Bodies read only as `application/json` (server/web/body.py)
stop the form shapes; this stops the rest, on every route `same_site_only` names (server/web/access.py:
every POST, PUT, PATCH and DELETE but the API-key and passthrough routes), before the route's credential
is even looked at (`Guard.check_origin`):

- `Sec-Fetch-Site: cross-site` → 403 `CROSS_SITE_REQUEST`;
- an `Origin` that is not one of this server's own → the same 403 (`Origin: null` too: a sandboxed frame
  or a redirect hides where it came from, and nothing hidden can be ours);
- neither header (curl, the SDKs, a server) → admitted: such a client is no victim's browser, and it holds
  no cookie of anyone else's to ride.

This server's own origins are the one the request arrived at — `Host` with the scheme the client used
(`X-Forwarded-Proto` first: `server/web/site.py`, the reading the passkey relying party uses too) — and
those of `PUBLIC_URL` and of the `ServerAddress` option (read on every request: root may change it). A
proxy that rewrites `Host` (or drops `X-Forwarded-Proto` in front of https) therefore needs one of those
two set. Origins are compared as `scheme://host[:port]`, lower-cased, without a default port.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from sanic import Request

from server.components.options import Options
from server.errors import CrossSiteRequest
from server.web.site import request_site

log = logging.getLogger("tollway.auth")

DEFAULT_PORTS = {"http": 80, "https": 443}
_SHOWN = 100  # characters of a refused header that the log line repeats


def origin_of(url: str, *, strict: bool = True) -> str | None:
    """`scheme://host[:port]` of an `Origin` value (or, not `strict`, of any http(s) URL: its path and the
    rest dropped) — lower-cased, without a default port — or None when it names no origin: `null`,
    another scheme, a bad port, and when `strict` anything but `scheme://host[:port]`."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), parts.hostname or ""
    if scheme not in DEFAULT_PORTS or not host:
        return None
    if strict and (parts.path or parts.query or parts.fragment or "@" in parts.netloc):
        return None
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != DEFAULT_PORTS[scheme] else "")


class SameSite:
    """Decides whether a request came from this site (see the module docstring)."""

    def __init__(self, public_url: str, options: Options) -> None:
        self.public_origin = origin_of(public_url, strict=False) if public_url else None
        self.options = options

    def own_origins(self, request: Request) -> set[str]:
        site = request_site(request)
        found = {origin_of(f"{site.scheme}://{site.host}"), self.public_origin,
                 origin_of(self.options.settings.server_address or "", strict=False)}
        return {origin for origin in found if origin}

    def check(self, request: Request) -> None:
        """Refuse (403 `CROSS_SITE_REQUEST`) a request a browser sent from another site."""
        headers = request.headers
        fetch_site = headers.get("sec-fetch-site")
        origin = headers.get("origin")
        if fetch_site is not None and fetch_site.strip().lower() == "cross-site":
            self._refuse(request, origin, fetch_site)
        if origin is not None:
            own = self.own_origins(request)
            if origin_of(origin) not in own:
                self._refuse(request, origin, fetch_site, own)

    @staticmethod
    def _refuse(request: Request, origin: str | None, fetch_site: str | None,
                own: set[str] | None = None) -> None:
        # the operator's clue when the site's own console is refused: a proxy rewriting `Host`
        log.warning("refused a cross-site %s %s: Origin %r, Sec-Fetch-Site %r; this server's origins: %s",
                    request.method, request.path, (origin or "")[:_SHOWN] or None,
                    (fetch_site or "")[:_SHOWN] or None,
                    ", ".join(sorted(own)) if own is not None else "(not compared)")
        raise CrossSiteRequest("cross-site request refused: this action must be sent from this site's own "
                               "pages")
