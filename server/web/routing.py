"""`route(...)`: the only way a handler is registered, with everything the route promises declared next to it.

    @route(bp, "PUT", "/api/token/", access=Access.USER, body=TokenUpdate, query=TokenUpdateQuery,
           reply=TokenView)
    async def update_token(request: Request, body: TokenUpdate, query: TokenUpdateQuery) -> HTTPResponse:
        \"\"\"Change one of your API keys. <the rule, in a sentence or two>\"\"\"

What is declared is stored on the Sanic route's `ctx` (`access`, `critical`, `session_only`, `body`,
`query`, `path`, `reply`, `wire`, `real_statuses`, `secret`, ...). The guard reads the access level from
there, the OpenAPI document (`server.web.openapi`) is generated from it, and the tests check that every
route declares it.

Validation happens here, once, after the guard has admitted the request: the body (a JSON object, sent as
`application/json`: server/web/body.py) is validated against `body`, the query string against `query`,
the path parameters against `path`; the handler receives the validated models as keyword arguments of the
same names (`body=`, `query=`, and each path parameter by its name). A failure is the usual 400 naming
the field (`server.web.schema`).

`passthrough=True` (the model-call routes) keeps the body as the caller's bytes: `body`, `query` and
`path_params` then only document what the gateway reads, and nothing is parsed here (the hot path does
not pay for it).
A route with nothing to validate is registered as is, without a wrapper.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError
from sanic import Blueprint, Request

from server.web.body import json_object
from server.web.schema import bad_request

if TYPE_CHECKING:  # access.py re-exports `route`: no import of it at run time
    from server.web.access import Access

Handler = Callable[..., Any]


class Wire(Enum):
    """How a route's replies are shaped (the OpenAPI document describes each)."""

    ENVELOPE = "envelope"  # {"success", "message", "data"}; `reply` is the model of `data`
    # `reply` is the whole body; errors are the envelope (the API document itself; the channel test and
    # balance, whose envelope carries a field next to `data`)
    RAW = "raw"
    OPENAI = "openai"      # `reply` is the whole body; errors are that provider's error objects
    GOOGLE = "google"      # `reply` is the whole body; errors are that provider's error objects
    ANTHROPIC = "anthropic"  # `reply` is the whole body; errors are that provider's error objects
    # either of the two by the path (the provider that claims the path: server/upstream/providers/)
    GOOGLE_OR_OPENAI = "google-or-openai"
    # either of the two by the request: Anthropic's when it carries an `anthropic-version` header
    OPENAI_OR_ANTHROPIC = "openai-or-anthropic"


def _query_values(request: Request, model: type[BaseModel]) -> dict[str, Any]:
    """The first value of each declared parameter (by its alias when it has one) that is present."""
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        key = info.alias or name
        value = request.args.get(key)
        if value is not None:
            out[key] = value
    return out


def _validate(model: type[BaseModel], data: Mapping[str, Any]) -> BaseModel:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise bad_request(exc, model) from None


def route(bp: Blueprint, method: str, path: str, *, access: Access, reply: Any,
          body: type[BaseModel] | None = None, query: type[BaseModel] | None = None,
          path_params: type[BaseModel] | None = None, passthrough: bool = False,
          wire: Wire = Wire.ENVELOPE, media_type: str = "application/json", critical: bool = False,
          session_only: bool = False, calls_upstream: bool = False, cors: bool = False,
          real_statuses: bool = False, conditional: bool = False, secret: bool = False,
          ) -> Callable[[Handler], Handler]:
    """Register a handler with its access level and its schemas (see the module docstring).

    `reply` is the type of the envelope's `data` (None when it is always null) or, for a route that does
    not answer the envelope (`wire`), of the whole body. `calls_upstream`: the route calls a provider on
    an admin's behalf and answers 502 when it fails. `cors`: every answer of the route, errors included,
    carries `Access-Control-Allow-Origin: *` (a route any web page may call with an API key).
    `real_statuses`: the route's errors answer their real HTTP status whatever `NewApiCompatibleErrors`
    says (a machine reads the status: the payment webhook, whose provider takes any 2xx as delivered).
    `conditional`: the route answers 304 to an `If-None-Match` naming its `ETag` (the console's files).
    `secret`: the reply carries a secret (its `reply` holds a `Secret`, server/web/no_store.py): every
    answer says `Cache-Control: no-store`."""

    def decorate(handler: Handler) -> Handler:
        validated_body = body if body is not None and not passthrough else None
        target = handler
        if not passthrough and (validated_body is not None or query is not None or path_params is not None):
            @functools.wraps(handler)
            async def validating(request: Request, **params: Any) -> Any:
                if path_params is not None:
                    params = dict(_validate(path_params, params))
                if query is not None:
                    params["query"] = _validate(query, _query_values(request, query))
                if validated_body is not None:
                    params["body"] = _validate(validated_body, json_object(request))
                return await handler(request, **params)

            target = validating
        doc = (handler.__doc__ or "").strip()
        summary, _, description = doc.partition("\n")
        register: Callable[[Handler], Handler] = bp.route(
            path, methods=[method], ctx_access=access, ctx_critical=critical, ctx_session_only=session_only,
            ctx_body=body, ctx_query=query, ctx_path=path_params, ctx_reply=reply, ctx_declared=True,
            ctx_passthrough=passthrough, ctx_wire=wire, ctx_media_type=media_type,
            ctx_summary=summary.strip(), ctx_description=" ".join(description.split()),
            ctx_operation_id=handler.__name__, ctx_path_template=path, ctx_calls_upstream=calls_upstream,
            ctx_cors=cors, ctx_real_statuses=real_statuses, ctx_conditional=conditional, ctx_secret=secret,
        )
        register(target)
        return handler

    return decorate

