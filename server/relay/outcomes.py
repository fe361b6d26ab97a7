"""How a model call ended, as the label `outcome` of `tollway_model_calls_total` (docs/MONITORING.md).

`Relay.call` (server/relay/pipeline.py) counts every call once, in its `finally`: a charged call is a
`success` however it ended (a stream cut by its client is still charged); any other call takes the label
of the refusal or failure it raised (`outcome_of`), so the dashboards tell refused keys, bad requests,
short balances, rate limits, missing channels, upstream failures and timeouts apart.
"""

from __future__ import annotations

import asyncio

from server.errors import (
    AllChannelsFailed,
    ChannelUnavailable,
    GroupNotAllowed,
    InvalidApiKey,
    InvalidRequest,
    IpNotAllowed,
    ModelNotAllowed,
    ModelNotFound,
    ModelPriceError,
    NotEnoughQuota,
    RateLimitExceeded,
    TokenDisabled,
    TokenExhausted,
    TokenExpired,
    UnknownMethod,
    UnsupportedModality,
    UpstreamPassthrough,
    UpstreamTimeout,
    UserDisabled,
)
from server.metrics import Outcome

OUTCOMES: dict[type[BaseException], Outcome] = {
    NotEnoughQuota: Outcome.INSUFFICIENT_QUOTA, TokenExhausted: Outcome.INSUFFICIENT_QUOTA,
    RateLimitExceeded: Outcome.RATE_LIMITED, ChannelUnavailable: Outcome.NO_CHANNEL,
    AllChannelsFailed: Outcome.UPSTREAM_FAILED, UpstreamPassthrough: Outcome.UPSTREAM_REJECTED,
    UpstreamTimeout: Outcome.TIMEOUT,
    **{refusal: Outcome.REFUSED_KEY for refusal in (InvalidApiKey, TokenDisabled, TokenExpired, UserDisabled,
                                                    IpNotAllowed, GroupNotAllowed, ModelNotAllowed)},
    **{refusal: Outcome.BAD_REQUEST for refusal in (InvalidRequest, UnknownMethod, ModelNotFound,
                                                    UnsupportedModality, ModelPriceError)},
}
"""The outcome label of each refusal (`tollway_model_calls_total`); another exception is `error`."""


def outcome_of(ended: BaseException) -> Outcome:
    """The outcome label of a call that raised: its refusal's, `cancelled`, or `error`."""
    if isinstance(ended, asyncio.CancelledError):
        return Outcome.CANCELLED
    return OUTCOMES.get(type(ended), Outcome.ERROR)
