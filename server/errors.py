"""The one error tree of Tollway: what can go wrong, in words every layer shares.

Services raise these; handlers never build error responses themselves.

    TollwayError (500 internal error; the message never carries a stack trace, SQL or a secret)
     ├── BadRequest            400  the message names the field
     ├── Unauthorized          401
     │    └── Unauthenticated  401  no valid credential: no login, a session gone, a bad access token or key
     ├── Forbidden             403  optional `code` (e.g. VERIFICATION_REQUIRED)
     │    ├── NotOffered       403  a feature of new-api Tollway does not have; the message is also `data`
     │    └── CrossSiteRequest 403  CROSS_SITE_REQUEST: a browser sent a state-changing request from
     │                              another site (`Origin`, `Sec-Fetch-Site`: server/auth/origin.py)
     ├── NotFound              404
     ├── MethodNotAllowed      405
     ├── RequestTimedOut       408  the request's head or body did not arrive in time
     ├── Conflict              409
     │    └── PaymentsNotReady 409  online top-up is off: a payment event cannot be taken now (the provider
     │                              delivers it again)
     ├── PayloadTooLarge       413
     ├── UnsupportedMediaType  415  a JSON body not labelled `application/json` (server/web/body.py)
     ├── TooManyRequests           429  `retry_after` seconds → `Retry-After`
     ├── UpstreamFailed        502  a provider called on an admin's behalf failed; optional `fields` in the
     │                              body (the channel test's `time`: 0)
     ├── ServiceUnavailable    503  the database or Redis is unreachable right now
     ├── DeliveryFailed        500  a message could not be handed to the mail server (nothing was kept)
     ├── PaymentProviderError  500  the payment provider refused or failed to open a checkout
     ├── PaymentNotRecorded    500  a payment webhook event could not be committed (the provider redelivers)
     ├── (_Passthrough)        4xx  another client error Sanic raised itself (e.g. 417), kept as is
     └── GatewayError               a refusal of the model-call gateway; each class carries its `code`
          ├── InvalidApiKey         401 invalid_api_key     (docs/api/gateway.md#gateway-admission-order: 1)
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
          ├── NotEnoughQuota     429 insufficient_quota  (12) + `x-should-retry: false`
          ├── ChannelUnavailable    503 channel_unavailable (13)
          ├── AllChannelsFailed     503 upstream_failed     (13)
          ├── UpstreamTimeout       504 upstream_timeout    (13)
          └── UpstreamPassthrough   4xx upstream_error      a non-retried upstream answer, its body kept

This module is only the vocabulary: it imports no framework, so any layer may raise these. How an error
becomes an HTTP reply — the envelope, new-api's statuses, Sanic's own exceptions and the Redis or database
failures classified into the tree — is `server/web/errors.py`, the one place that does it.
"""

from __future__ import annotations

import math
from typing import Any


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


class NotOffered(Forbidden):
    """A new-api feature Tollway does not have, asked for on a route new-api's console calls
    (docs/api/options.md#coming-from-new-api). The envelope carries the message as `data` too: new-api answers
    these routes `{"message": "error", "data": <reason>}`, and its console shows `data`."""

    default_message = "not offered by this server"

    def fields(self) -> dict[str, Any]:
        return {"data": self.message}


class CrossSiteRequest(Forbidden):
    """A browser sent a state-changing request from a page of another site: refused before anything else
    is looked at (login CSRF and its kin, server/auth/origin.py). new-api has no such refusal: its status is
    kept in both error modes, so no client mistakes it for an ordinary answer."""

    default_message = "cross-site request refused"
    keeps_status = True

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message, code="CROSS_SITE_REQUEST")


class NotFound(TollwayError):
    status = 404
    default_message = "not found"


class MethodNotAllowed(TollwayError):
    status = 405
    default_message = "method not allowed on this route"


class Conflict(TollwayError):
    status = 409
    default_message = "conflict"


class PaymentsNotReady(Conflict):
    """A payment event arrived while online top-up is not configured: a refusal that may pass later. The
    provider delivers again after any non-2xx (a 2xx would drop the payment for good); a 409 says "not in
    this state", not a fault of the server (which a 5xx would claim)."""

    default_message = "online top-up is not enabled; deliver the event again later"


class RequestTimedOut(TollwayError):
    status = 408
    default_message = "the request did not arrive in time"


class PayloadTooLarge(TollwayError):
    status = 413
    default_message = "request body too large"


class UnsupportedMediaType(TollwayError):
    """A body sent under another `Content-Type` than JSON's (server/web/body.py): a cross-site form can
    post `text/plain`, `application/x-www-form-urlencoded` or `multipart/form-data` without asking, never
    `application/json`. Like Sanic's own refusals of a request's form (405, 413), its status is kept in both
    error modes."""

    status = 415
    default_message = "the request body must be sent as application/json"
    keeps_status = True


class TooManyRequests(TollwayError):
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
    error object carries (docs/api/gateway.md#gateway-errors). Never raised itself."""

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


class NotEnoughQuota(GatewayError):
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
    they reach the caller. None of the upstream's headers is kept: the reply has our headers only.
    `same_wire`: the upstream speaks the route's wire, so a body in its error shape goes back as it came;
    a converted call's (false) is always reshaped into the route's error object from `message`."""

    code = "upstream_error"

    def __init__(self, status: int, body: bytes, message: str, *, same_wire: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.same_wire = same_wire
