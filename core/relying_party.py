"""Who the passkey relying party is: its id, display name and accepted origins, resolved from the options.

`passkey.rp_id` and `passkey.origins` win when set. Otherwise they come from `ServerAddress` (its host, its
origin), and without one from the request itself (`Host` and `X-Forwarded-Proto`), so a server reached
under several names answers each under its own. A plain-http origin is accepted only for a local host
(`localhost`, `*.localhost`, `127.0.0.1`, `::1`) unless `passkey.allow_insecure_origin` is on: browsers
offer passkeys on secure origins only, and a ceremony over plain http elsewhere would be readable in transit.

Pure: the service and `/api/status` both call `resolve` with the settings and the request's `RequestSite`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
# what a `Host` header may hold: a DNS name or IPv4 address, or a bracketed IPv6 address, and a port
_HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\])"
                   r"(?::[0-9]{1,5})?")


@dataclass(frozen=True, slots=True)
class RequestSite:
    """How this request reached us: the `Host` header as sent and the scheme the client used."""

    host: str
    scheme: str


@dataclass(frozen=True, slots=True)
class PasskeyPolicy:
    """The passkey options as `Settings` holds them (raw, before resolution)."""

    rp_id: str
    rp_display_name: str
    origins: str  # comma-separated
    user_verification: str  # required | preferred | discouraged
    attachment: str  # "" | platform | cross-platform
    allow_insecure_origin: bool


@dataclass(frozen=True, slots=True)
class RelyingParty:
    rp_id: str  # "" when nothing names one (no option, no ServerAddress, no usable Host)
    name: str
    origins: tuple[str, ...]
    insecure: tuple[str, ...]  # the origins refused as insecure (empty when insecure origins are allowed)


def _host_of(netloc: str) -> str:
    return (urlsplit(f"//{netloc}").hostname or "").lower()


def _origin_of(scheme: str, netloc: str) -> str:
    """`scheme://host[:port]`, lower-cased, without user information or a default port."""
    parts = urlsplit(f"{scheme}://{netloc}")
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    default = {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != default else "")


def is_local(host: str) -> bool:
    host = host.lower().strip("[]")
    return host in LOCAL_HOSTS or host.endswith(".localhost")


def _secure(origin: str) -> bool:
    parts = urlsplit(origin)
    return parts.scheme == "https" or (parts.scheme == "http" and is_local(parts.hostname or ""))


def resolve(policy: PasskeyPolicy, server_address: str, system_name: str, site: RequestSite) -> RelyingParty:
    """The relying party this request talks to (see the module docstring for the order of sources)."""
    server = urlsplit(server_address) if server_address else None
    if server is not None and server.scheme in ("http", "https") and server.hostname:
        default_id, default_origin = server.hostname.lower(), _origin_of(server.scheme, server.netloc)
    elif _HOST.fullmatch(site.host):
        scheme = site.scheme if site.scheme in ("http", "https") else "http"
        default_id, default_origin = _host_of(site.host), _origin_of(scheme, site.host)
    else:
        default_id, default_origin = "", ""
    rp_id = policy.rp_id.strip().lower() or default_id
    listed = tuple(o.strip().rstrip("/") for o in policy.origins.split(",") if o.strip())
    origins = listed or ((default_origin,) if default_origin else ())
    insecure = () if policy.allow_insecure_origin else tuple(o for o in origins if not _secure(o))
    return RelyingParty(rp_id=rp_id, name=policy.rp_display_name.strip() or system_name, origins=origins,
                        insecure=insecure)
