"""The one error tree of Tollway, and the one place that turns errors into HTTP responses.

Services raise these; handlers never build error responses themselves.

    TollwayError (500 internal error; the message never carries a stack trace, SQL or a secret)
     ├── BadRequest            400  the message names the field
     ├── Unauthorized          401
     │    └── Unauthenticated  401  no valid credential: no login, a session gone, a bad access token or key
     ├── Forbidden             403  optional `code` (e.g. VERIFICATION_REQUIRED)
     ├── NotFound              404
     ├── MethodNotAllowed      405
     ├── RequestTimedOut       408  the request's head or body did not arrive in time
     ├── Conflict              409
     ├── PayloadTooLarge       413
     ├── RateLimited           429  `retry_after` seconds → `Retry-After`
     ├── UpstreamFailed        502  a provider called on an admin's behalf failed; optional `fields` in the
     │                              body (the channel test's `time`: 0)
     ├── ServiceUnavailable    503  the database or Redis is unreachable right now
     ├── DeliveryFailed        500  a message could not be handed to the mail server (nothing was kept)
     ├── PaymentProviderError  500  the payment provider refused or failed to open a checkout
     ├── PaymentNotRecorded    500  a payment webhook event could not be committed (the provider redelivers)
     ├── (_Passthrough)        4xx  another client error Sanic raised itself (e.g. 417), kept as is
     └── GatewayError               a refusal of the model-call gateway; each class carries its `code`
          ├── InvalidApiKey         401 invalid_api_key     (docs/API.md#gateway-admission-order, step 1)
          ├── TokenDisabled         401 token_disabled      (2)
          ├── TokenExpired          401 token_expired       (2)
          ├── TokenExhausted        401 token_exhausted     (2, 12)
          ├── UserDisabled          403 user_disabled       (3)
          ├── IpNotAllowed          403 ip_not_allowed      (4)
          ├── GroupNotAllowed       403 group_not_allowed   (5)
          ├── RateLimitExceeded     429 rate_limit_exceeded (6)  + `Retry-After`
          ├── InvalidRequest        400 invalid_request     (7)  + `param`, the field
          ├── UnknownMethod         404 not_found           the path names no operation
          ├── ModelNotAllowed       403 model_not_allowed   (8)
          ├── ModelNotFound         404 model_not_found     (9)
          ├── UnsupportedModality   400 unsupported_modality (10)
          ├── ModelPriceError       400 model_price_error   (11)
          ├── InsufficientQuota     429 insufficient_quota  (12) + `x-should-retry: false`
          ├── ChannelUnavailable    503 channel_unavailable (13)
          ├── AllChannelsFailed     503 upstream_failed     (13)
          ├── UpstreamTimeout       504 upstream_timeout    (13)
          └── UpstreamPassthrough   4xx upstream_error      a non-retried upstream answer, its body kept

Sanic's own 405 keeps its `Allow` header; a request line or headers over the limit is a 413 that says so.

`/api` routes answer the envelope `{"success": false, "message": …}`. The model-call routes answer the
error object of their provider's wire, for every error of the tree (`register`'s `shape_for`,
`server/relay/errors.py`).

With the option `NewApiCompatibleErrors` on, an envelope error answers the status `new_api_status` gives
(docs/API.md#envelope-and-status-codes): 200 for a refusal, as new-api does, except where new-api keeps a
status too (`keeps_status`: no valid credential 401, rate limits 429, a missing secure verification 403,
a request no route took). The provider wires never change.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from redis.exceptions import RedisError
from sanic import Request, Sanic
from sanic import exceptions as sanic_exc
from sanic.response import HTTPResponse, json
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from quota.backends.base import BackendUnavailable
from quota.store import CursorMoved
from server.web.request_id import request_id_from

log = logging.getLogger("tollway.errors")


class TollwayError(Exception):
    status = 500
    default_message = "internal error"
    # new-api answers this refusal with its status too: `NewApiCompatibleErrors` keeps it
    keeps_status = False

    def __init__(self, message: str | None = None, *, code: str | None = None) -> None:
        super().__init__(message or self.default_message)
        self.message = message or self.default_message
        self.code = code

    def headers(self) -> dict[str, str]:
        return {}

    def fields(self) -> dict[str, Any]:
        """Fields the error envelope carries besides `success`, `message` and `code`."""
        return {}


class BadRequest(TollwayError):
    status = 400
    default_message = "invalid request"


class Unauthorized(TollwayError):
    status = 401
    default_message = "not logged in"


class Unauthenticated(Unauthorized):
    """The request carries no valid credential: no login, an expired or revoked session, an invalid access
    token, a `New-Api-User` that is missing or names someone else, a missing or unknown API key."""

    keeps_status = True


class Forbidden(TollwayError):
    status = 403
    default_message = "permission denied"


class NotFound(TollwayError):
    status = 404
    default_message = "not found"


class MethodNotAllowed(TollwayError):
    status = 405
    default_message = "method not allowed on this route"


class Conflict(TollwayError):
    status = 409
    default_message = "conflict"


class RequestTimedOut(TollwayError):
    status = 408
    default_message = "the request did not arrive in time"


class PayloadTooLarge(TollwayError):
    status = 413
    default_message = "request body too large"


class RateLimited(TollwayError):
    status = 429
    default_message = "too many requests, please retry later"
    keeps_status = True

    def __init__(self, message: str | None = None, *, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(max(1, math.ceil(self.retry_after)))}


class UpstreamFailed(TollwayError):
    """What an upstream called for an admin (channel test, balance, model list) did wrong; the message is
    already redacted. `fields` go into the error envelope (the channel test answers `time: 0`)."""

    status = 502
    default_message = "upstream provider failed"

    def __init__(self, message: str | None = None, *, fields: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self._fields = dict(fields or {})

    def fields(self) -> dict[str, Any]:
        return dict(self._fields)


class ServiceUnavailable(TollwayError):
    status = 503
    default_message = "service temporarily unavailable, please retry"


class DeliveryFailed(TollwayError):
    """The mail server refused or could not be reached; the message names no detail (logged redacted)."""

    status = 500
    default_message = "could not send the e-mail"


class PaymentProviderError(TollwayError):
    status = 500
    default_message = "payment provider error"


class PaymentNotRecorded(TollwayError):
    status = 500
    default_message = "the payment event could not be recorded; deliver it again"


class GatewayError(TollwayError):
    """A refusal of the model-call gateway: its class names the HTTP status and the `code` every provider's
    error object carries (docs/API.md#gateway-errors). Never raised itself."""

    status = 500
    code: str = "internal_error"
    param: str | None = None

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message, code=type(self).code)


class InvalidApiKey(GatewayError):
    status, code, default_message = 401, "invalid_api_key", "invalid API key"


class TokenDisabled(GatewayError):
    status, code, default_message = 401, "token_disabled", "this API key is disabled"


class TokenExpired(GatewayError):
    status, code, default_message = 401, "token_expired", "this API key has expired"


class TokenExhausted(GatewayError):
    status, code, default_message = 401, "token_exhausted", "this API key's quota is used up"


class UserDisabled(GatewayError):
    status, code, default_message = 403, "user_disabled", "the owner of this API key is disabled"


class IpNotAllowed(GatewayError):
    status, code = 403, "ip_not_allowed"
    default_message = "this API key may not be used from this IP address"


class GroupNotAllowed(GatewayError):
    status, code = 403, "group_not_allowed"


class RateLimitExceeded(GatewayError):
    status, code, default_message = 429, "rate_limit_exceeded", "too many requests, please retry later"

    def __init__(self, retry_after: float) -> None:
        super().__init__()
        self.retry_seconds = max(1, int(retry_after + 0.999))

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_seconds)}


class InvalidRequest(GatewayError):
    """A body, path or parameter the gateway cannot accept; the message starts with the field's name."""

    status, code = 400, "invalid_request"

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class UnknownMethod(GatewayError):
    status, code = 404, "not_found"


class ModelNotAllowed(GatewayError):
    status, code = 403, "model_not_allowed"


class ModelNotFound(GatewayError):
    status, code = 404, "model_not_found"


class UnsupportedModality(GatewayError):
    status, code = 400, "unsupported_modality"


class ModelPriceError(GatewayError):
    status, code = 400, "model_price_error"


class InsufficientQuota(GatewayError):
    status, code, default_message = 429, "insufficient_quota", "insufficient quota for this request"

    def headers(self) -> dict[str, str]:
        return {"x-should-retry": "false"}


class ChannelUnavailable(GatewayError):
    status, code = 503, "channel_unavailable"


class AllChannelsFailed(GatewayError):
    status, code = 503, "upstream_failed"
    default_message = "every upstream channel failed for this request"


class UpstreamTimeout(GatewayError):
    status, code, default_message = 504, "upstream_timeout", "the upstream provider timed out"


class UpstreamPassthrough(GatewayError):
    """An upstream 4xx that is not retried: its status (after `status_code_mapping`), body and message.

    `body` and `message` must already be redacted (`server.redaction.redact` with the channel's keys):
    they reach the caller. None of the upstream's headers is kept: the reply has our headers only."""

    code = "upstream_error"

    def __init__(self, status: int, body: bytes, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


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
