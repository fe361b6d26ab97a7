"""Which header names an operator may add to an upstream request (a channel's `header_override`).

The headers that frame a request are the HTTP client's to write, from the request it actually sends:
its length and transfer coding (`Content-Length`, `Transfer-Encoding`, `Trailer`, `TE`), what becomes of
the connection (`Connection`, `Keep-Alive`, `Upgrade`, `HTTP2-Settings`), whom the request is for
(`Host`), whether the body waits for an interim answer (`Expect`), and anything addressed to a proxy on
the way (`Proxy-*`). Set by hand, they desynchronise the two ends of a pooled connection: a
`Content-Length: 5` over a 75-byte body ends the request after 5 bytes and leaves 70 on the connection,
read by the upstream as the start of the next request. So such a name is refused when a channel is saved
(`header_refusal`) and never sent, even from a channel stored before the rule (`sendable`).

A name must also be an HTTP token (RFC 9110 §5.6.2: letters, digits and ``!#$%&'*+-.^_`|~``): a name with
a blank or a colon in it (`Content-Length ` with a trailing blank) is no header a strict server reads,
and one that a lenient server may read as a framing header.
"""

from __future__ import annotations

import re

FRAMING_HEADERS = frozenset({
    "content-length", "transfer-encoding", "trailer", "te", "connection", "keep-alive", "upgrade",
    "http2-settings", "host", "expect",
})
"""Lower-cased names of the headers that frame a request (see the module docstring)."""
FRAMING_PREFIXES = ("proxy-",)
"""Lower-cased prefixes of framing headers: `Proxy-Authorization`, `Proxy-Connection`, …"""

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def is_token(name: str) -> bool:
    """`name` is an HTTP field name: a non-empty token (ASCII only)."""
    return _TOKEN.fullmatch(name) is not None


def frames_request(name: str) -> bool:
    """`name` is a header that frames a request (any case)."""
    lowered = name.lower()
    return lowered in FRAMING_HEADERS or lowered.startswith(FRAMING_PREFIXES)


def header_refusal(name: str) -> str | None:
    """Why an operator may not set the header `name` (a sentence without the name), None when they may."""
    if not is_token(name):
        return ("is not a header name: use letters, digits and !#$%&'*+-.^_`|~ only, without blanks or "
                "colons")
    if frames_request(name):
        return "frames the request (its length, connection, host or proxy) and is set by the gateway only"
    return None


def sendable(name: str) -> bool:
    """An operator's header `name` may go upstream."""
    return header_refusal(name) is None
