"""HTTP requests by route template, method and status, and the build information."""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version

from prometheus_client import Counter, Gauge, Histogram

from server.metrics.tally import BufferedCounter, BufferedHistogram

UNMATCHED = "unmatched"
"""The route label of a request no route matched (its raw path is never a label)."""

METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})

HTTP_REQUESTS = Counter("tollway_http_requests",
                        "HTTP requests answered, by route template, method and status",
                        ("route", "method", "status"))
HTTP_DURATION = Histogram("tollway_http_request_duration_seconds",
                          "Time from a request's head to the end of its answer, by route template and method",
                          ("route", "method"))
BUILD_INFO = Gauge("tollway_build_info", "Always 1: the version running and its Python",
                   ("version", "python"), multiprocess_mode="livemax")


def _version() -> str:
    try:
        return version("tollway")
    except PackageNotFoundError:
        return "unknown"


BUILD_INFO.labels(_version(), platform.python_version()).set(1)

_http: dict[tuple[str, str, int], tuple[BufferedCounter, BufferedHistogram]] = {}

def observe_http(route: str, method: str, status: int, seconds: float) -> None:
    """One request answered: `route` is the route's template (or `UNMATCHED`)."""
    if method not in METHODS:
        method = "OTHER"
    key = (route, method, status)
    children = _http.get(key)
    if children is None:
        children = _http[key] = (BufferedCounter(HTTP_REQUESTS.labels(route, method, str(status))),
                                 BufferedHistogram(HTTP_DURATION.labels(route, method)))
    children[0].inc()
    children[1].observe(seconds)


METRICS = (HTTP_REQUESTS, HTTP_DURATION, BUILD_INFO)
