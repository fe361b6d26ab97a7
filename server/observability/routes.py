"""`GET /metrics`, `GET /healthz`, `GET /readyz`: outside `/api` (and its per-IP rate limit), public to the
guard; `/metrics` checks its own bearer token (`METRICS_TOKEN`) and client address (`METRICS_ALLOW`) and,
when either fails or no token is configured, answers the 404 of an unknown route, so a caller cannot tell
it exists (docs/MONITORING.md#metrics)."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse, raw, text

from server import metrics
from server.errors import NotFound
from server.web.access import Access, Wire, route
from server.web.state import services_of

bp = Blueprint("observability")


@route(bp, "GET", "/metrics", access=Access.PUBLIC, reply=str, wire=Wire.RAW, media_type=metrics.CONTENT_TYPE,
       real_statuses=True)
async def get_metrics(request: Request) -> HTTPResponse:
    """The Prometheus metrics of this node (every worker and the quota-sync process, summed).
    Send `Authorization: Bearer <METRICS_TOKEN>` from an address `METRICS_ALLOW` admits; without it (or
    with `METRICS_TOKEN` unset, a wrong token, another address) the answer is the 404 of an unknown route."""
    body = await services_of(request).observability.scrape(request.headers.get("authorization"),
                                                            request.ctx.client_ip)
    if body is None:  # not configured, no token or a wrong one, another address: as if it did not exist
        raise NotFound("no such route")
    return raw(body, content_type=metrics.CONTENT_TYPE)


@route(bp, "GET", "/healthz", access=Access.PUBLIC, reply=str, wire=Wire.RAW, media_type="text/plain",
       real_statuses=True)
async def healthz(request: Request) -> HTTPResponse:
    """Liveness: the process answers (always 200 `ok`, nothing else is asked)."""
    return text("ok")


@route(bp, "GET", "/readyz", access=Access.PUBLIC, reply=str, wire=Wire.RAW, media_type="text/plain",
       real_statuses=True)
async def readyz(request: Request) -> HTTPResponse:
    """Readiness: 200 `ok` when the database (schema at the head revision), Redis and the quota sync
    answered in time in the worker's last round of checks (one every `READY_INTERVAL`, in the
    background); else 503 with `not ready:` and the failed checks (`stale`: that round is too old)."""
    failed = services_of(request).observability.not_ready()
    if not failed:
        return text("ok")
    return text("not ready: " + ", ".join(failed), status=503)
