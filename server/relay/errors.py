"""The error replies of the model-call routes (docs/api/gateway.md#gateway-errors): any error of the tree, in
the error object of the route's provider wire.

The wire is the one the route declares (`route(..., wire=Wire.GOOGLE | OPENAI | ANTHROPIC | ...)`); a
request that matched no route (an unknown path, a wrong method, a body too large before routing) takes
the wire of its path's family (`server/relay/routes.py` `FAMILIES`). Every message the gateway writes ends
with `(request id: X)`, and every reply carries the id in the wire's headers (`request_id_headers`). The
status is the refusal's, as the wire reads it (`refusal_status`: Anthropic's SDK reads a short balance
as a 402). A non-retried upstream answer already in the wire's shape goes back as it came.
"""

from __future__ import annotations

from typing import cast

from sanic import Request
from sanic.response import HTTPResponse, raw

from server.errors import TollwayError, UpstreamPassthrough
from server.relay.routes import FAMILIES
from server.upstream.providers import for_wire
from server.upstream.providers.base import Provider
from server.web.errors import ErrorShape
from server.web.routing import Wire

DEFAULT_CODE = {400: "invalid_request", 401: "invalid_api_key", 403: "permission_denied", 404: "not_found",
                405: "method_not_allowed", 413: "request_too_large", 429: "rate_limit_exceeded",
                503: "service_unavailable"}
"""The `code` of an error of the tree that is no gateway refusal (a 503 when Redis is down, Sanic's 413)."""


def code_of(err: TollwayError) -> str:
    if err.code:
        return err.code
    return DEFAULT_CODE.get(err.status, "internal_error" if err.status >= 500 else "invalid_request")


def error_reply(provider: Provider, err: TollwayError, request_id: str) -> HTTPResponse:
    headers = err.headers()
    for name in provider.request_id_headers:
        headers[name] = request_id
    upstream = isinstance(err, UpstreamPassthrough)
    if isinstance(err, UpstreamPassthrough) and err.same_wire and provider.is_error_body(err.body):
        return raw(err.body, status=err.status, content_type="application/json", headers=headers)
    code = code_of(err)
    status = err.status if upstream else provider.refusal_status(err.status, code)
    body = provider.error_body(status, code, f"{err.message} (request id: {request_id})",
                               getattr(err, "param", None), upstream=upstream)
    return raw(body, status=status, content_type="application/json", headers=headers)


def wire_of(request: Request) -> Wire:
    route = request.route
    if route is not None:
        return cast(Wire, getattr(route.ctx, "wire", Wire.ENVELOPE))
    path = request.path
    for prefix, wire in FAMILIES:
        if path.startswith(prefix):
            return wire
    return Wire.ENVELOPE


def shape_for(request: Request) -> ErrorShape | None:
    """The error shape of the request's route family; None for the envelope (`/api`)."""
    provider = for_wire(wire_of(request), request.path,
                        anthropic_version="anthropic-version" in request.headers)
    if provider is None:
        return None
    return lambda err, request_id: error_reply(provider, err, request_id)
