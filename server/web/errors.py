"""The one place that turns errors into HTTP replies (the vocabulary is `server/errors.py`).

`register(app, …)` installs the app's single exception handler: any exception is classified into the tree
(`to_tollway_error`: Sanic's own exceptions keep their meaning — its 405 keeps the `Allow` header, a request
line or headers over the limit is a 413 that says so; Redis and database failures are a 503; anything else
a bare 500 that logs its traceback) and answered in its route family's shape.

`/api` routes answer the envelope `{"success": false, "message": …}`. The model-call routes answer the
error object of their provider's wire, for every error of the tree (`register`'s `shape_for`,
`server/relay/errors.py`).

With the option `NewApiCompatibleErrors` on, an envelope error answers the status `new_api_status` gives
(docs/API.md#envelope-and-status-codes): 200 for a refusal, as new-api does, except where new-api keeps a
status too (`keeps_status`: no valid credential 401, rate limits 429, a missing secure verification 403,
a request no route took) and for the refusals of a request's form that new-api does not have (a cross-site
request 403, a body not sent as JSON 415). The provider wires never change, and neither does a route
declared with `real_statuses` (the payment webhook: its provider reads the status, and takes any 2xx as
delivered).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from redis.exceptions import RedisError
from sanic import Request, Sanic
from sanic import exceptions as sanic_exc
from sanic.response import HTTPResponse, json
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from backend.base import BackendUnavailable
from quota.store import CursorMoved
from server.errors import (
    BadRequest,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    RequestTimedOut,
    ServiceUnavailable,
    TollwayError,
    UpstreamFailed,
)
from server.web.request_id import request_id_from

log = logging.getLogger("tollway.errors")


_SANIC_MAP: tuple[tuple[type[Exception], type[TollwayError], str | None], ...] = (
    (sanic_exc.NotFound, NotFound, "no such route"),
    (sanic_exc.MethodNotAllowed, MethodNotAllowed, None),
    (sanic_exc.PayloadTooLarge, PayloadTooLarge, None),
    (sanic_exc.BadRequest, BadRequest, "malformed request"),
)


class _Passthrough(TollwayError):
    """A client error Sanic raised with a status the tree does not name (e.g. 417 Expectation Failed)."""

    def __init__(self, status: int, message: str, headers: dict[str, str]) -> None:
        super().__init__(message)
        self.status = status
        self._headers = headers

    def headers(self) -> dict[str, str]:
        return dict(self._headers)


class _NotAllowed(MethodNotAllowed):
    """405 with the `Allow` header the router computed."""

    def __init__(self, allow: str) -> None:
        super().__init__()
        self._allow = allow

    def headers(self) -> dict[str, str]:
        return {"Allow": self._allow} if self._allow else {}


def _from_sanic(exc: sanic_exc.SanicException) -> TollwayError | None:
    if isinstance(exc, sanic_exc.MethodNotAllowed):
        return _NotAllowed(str((exc.headers or {}).get("Allow", "")))
    if isinstance(exc, sanic_exc.PayloadTooLarge) and "header" in str(exc).lower():
        return PayloadTooLarge("request line or headers too large")
    if isinstance(exc, sanic_exc.RequestTimeout):  # which part, and the limit (server/web/connections.py)
        return RequestTimedOut(str(exc) or None)
    for sanic_type, ours, message in _SANIC_MAP:
        if isinstance(exc, sanic_type):
            return ours(message)
    status = int(getattr(exc, "status_code", 500) or 500)
    if 400 <= status < 500:
        return _Passthrough(status, str(exc) or "invalid request", {})
    return None


def to_tollway_error(exc: BaseException) -> TollwayError:
    """Classify any exception into the tree; unknown ones become a bare 500."""
    if isinstance(exc, TollwayError):
        return exc
    if isinstance(exc, sanic_exc.SanicException):
        mapped = _from_sanic(exc)
        if mapped is not None:
            mapped.keeps_status = True  # no handler took the request (new-api's unknown routes are a 404)
            return mapped
    unavailable = (BackendUnavailable | CursorMoved | RedisError | OperationalError | PoolTimeout
                   | ConnectionError | TimeoutError)
    if isinstance(exc, unavailable) or (isinstance(exc, DBAPIError) and exc.connection_invalidated):
        return ServiceUnavailable()
    return TollwayError()


VERIFICATION_CODES = frozenset({"VERIFICATION_REQUIRED", "VERIFICATION_EXPIRED", "VERIFICATION_INVALID"})


def new_api_status(err: TollwayError) -> int:
    """The status of an envelope error under `NewApiCompatibleErrors`: 200 for a refusal (a 4xx) and for an
    upstream called on an admin's behalf that failed (502), as new-api answers them; its own status for a
    refusal new-api answers with a status too (`keeps_status`; a 403 whose `code` asks for a secure
    verification, which new-api's console reads from the 403) and for every other 5xx."""
    if err.keeps_status or (err.status == 403 and err.code in VERIFICATION_CODES):
        return err.status
    if 400 <= err.status < 500 or isinstance(err, UpstreamFailed):
        return 200
    return err.status


def envelope_error(err: TollwayError, request_id: str | None, *, new_api: bool = False) -> HTTPResponse:
    body: dict[str, Any] = {**err.fields(), "success": False, "message": err.message}
    if err.code:
        body["code"] = err.code
    headers = err.headers()
    if request_id:
        headers["X-Request-Id"] = request_id
    return json(body, status=new_api_status(err) if new_api else err.status, headers=headers)


ErrorShape = Callable[[TollwayError, str], HTTPResponse]


def register(app: Sanic[Any, Any], shape_for: Callable[[Request], ErrorShape | None] | None = None,
             new_api_errors: Callable[[Request], bool] | None = None) -> None:
    """Install the single exception handler of the app. `shape_for` picks another wire shape by route
    family (the model-call routes answer their provider's error objects); None keeps the envelope.
    `new_api_errors` says whether the envelope answers new-api's statuses (`new_api_status`) now: it reads
    the in-memory option snapshot, never the database."""

    @app.exception(Exception)
    async def handle(request: Request, exc: Exception) -> HTTPResponse:
        err = to_tollway_error(exc)
        request_id = getattr(getattr(request, "ctx", None), "request_id", None)
        if not request_id:  # the error came before the pipeline ran
            headers = getattr(request, "headers", None)
            request_id = request_id_from(headers.get("x-request-id") if headers is not None else None)
        if err.status >= 500:
            if type(err) is TollwayError:
                log.exception("unhandled error (request id %s)", request_id, exc_info=exc)
            else:
                log.warning("%s (request id %s): %s", type(exc).__name__, request_id, str(exc)[:200])
        shape = shape_for(request) if shape_for is not None else None
        if shape is not None:
            return shape(err, request_id)
        return envelope_error(err, request_id, new_api=new_api_errors is not None and new_api_errors(request))
