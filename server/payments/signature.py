"""Checking a payment webhook's `Stripe-Signature` header: our own HMAC on the service's clock.

The header is `t=<unix seconds>,v1=<hex>[,v1=<hex>…]` (other schemes, such as `v0`, are ignored). The
delivery is genuine when one `v1` equals hex HMAC-SHA256 keyed by the whole webhook secret over
`"<t>." + the raw body bytes` (compared in constant time) and `t` is at most `TOLERANCE` seconds away
from now. Anything else is refused with a reason that never quotes the header or the body.
"""

from __future__ import annotations

import hashlib
import hmac

TOLERANCE = 300
HEADER_MAX = 4096


class BadSignature(ValueError):
    """The reason a delivery is refused (safe to show: no header or body text in it)."""


def expected_signature(secret: str, timestamp: int | str, body: bytes) -> str:
    """The `v1` a delivery of `body` signed at `timestamp` carries."""
    signed = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def parse_header(header: str) -> tuple[int, list[str]]:
    """(t, [v1, …]) of a `Stripe-Signature` header, else `BadSignature`."""
    if not header or len(header) > HEADER_MAX:
        raise BadSignature("missing or unreadable signature header")
    timestamp: int | None = None
    signatures: list[str] = []
    for item in header.split(","):
        name, sep, value = item.strip().partition("=")
        if not sep:
            raise BadSignature("unreadable signature header")
        if name == "t":
            if not value.isascii() or not value.isdigit() or len(value) > 12:
                raise BadSignature("unreadable signature timestamp")
            timestamp = int(value)
        elif name == "v1":
            signatures.append(value)
    if timestamp is None or not signatures:
        raise BadSignature("the signature header has no timestamp or no v1 signature")
    return timestamp, signatures


def verify(header: str, body: bytes, secret: str, now: float, tolerance: int = TOLERANCE) -> None:
    """Return when the delivery is genuine and fresh; raise `BadSignature` otherwise."""
    timestamp, signatures = parse_header(header)
    expected = expected_signature(secret, timestamp, body).encode()
    matched = False
    for candidate in signatures:  # every candidate compared, in constant time each
        matched |= hmac.compare_digest(expected, candidate.encode("ascii", "replace"))
    if not matched:
        raise BadSignature("no signature matches")
    if abs(now - timestamp) > tolerance:
        raise BadSignature("the signature timestamp is outside the tolerance")
