"""Redis and database errors, the database pools, cache reloads, sign-in failures and lockouts, payment
webhook deliveries.

The Redis backend, the database and the version tracker live below server/ and never import this module:
they are given these functions as observers where they are built (server/context.py)."""

from __future__ import annotations

from enum import StrEnum

from prometheus_client import Counter, Gauge

from backend.observer import ErrorKind
from backend.versions import NAMES as VERSIONED

PAYMENT_WEBHOOKS = Counter("tollway_payment_webhooks", "Payment webhook deliveries by provider and outcome",
                           ("provider", "outcome"))
REDIS_ERRORS = Counter("tollway_redis_errors", "Failed Redis calls by kind", ("kind",))
DB_ERRORS = Counter("tollway_db_errors", "Database transactions failed by the database, by kind", ("kind",))
DB_POOL = Gauge("tollway_db_pool_connections", "Database pool connections by state (sampled)", ("state",),
                multiprocess_mode="livesum")
CACHE_RELOADS = Counter("tollway_cache_reloads", "Reloads of a worker's cached shared state by kind",
                        ("kind",))
SIGN_IN_FAILURES = Counter("tollway_sign_in_failures", "Failed sign-ins by reason", ("reason",))
SIGN_IN_LOCKOUTS = Counter("tollway_sign_in_lockouts",
                           "Sign-in locks started (password: per account and IP; 2FA: per account)")

METRICS = (PAYMENT_WEBHOOKS, REDIS_ERRORS, DB_ERRORS, DB_POOL, CACHE_RELOADS, SIGN_IN_FAILURES,
           SIGN_IN_LOCKOUTS)


class SignInFailure(StrEnum):
    """Why a sign-in failed (the caller is told less: `invalid username or password`)."""

    PASSWORD = "password"  # a wrong password, or no such user  # noqa: S105 (a label, not a secret)
    DISABLED = "disabled"  # the right password of a disabled account
    LOCKED = "locked"  # refused unchecked: too many failures (the lockout)
    TOTP = "totp"  # a wrong 2FA code in the second step
    PASSKEY = "passkey"  # a passkey assertion refused


_redis_errors = {kind: REDIS_ERRORS.labels(kind.value) for kind in ErrorKind}
_db_errors = {kind: DB_ERRORS.labels(kind.value) for kind in ErrorKind}
_reloads = {kind: CACHE_RELOADS.labels(kind) for kind in VERSIONED}
_sign_in = {reason: SIGN_IN_FAILURES.labels(reason.value) for reason in SignInFailure}


def redis_error(kind: ErrorKind) -> None:
    """The Redis backend's error observer."""
    _redis_errors[kind].inc()


def db_error(kind: ErrorKind) -> None:
    """The database's error observer."""
    _db_errors[kind].inc()


def cache_reload(kind: str) -> None:
    """The version tracker's reload observer: `kind` is one of backend/versions.py's NAMES."""
    child = _reloads.get(kind)
    if child is not None:
        child.inc()


def sign_in_failed(reason: SignInFailure) -> None:
    _sign_in[reason].inc()


def sign_in_locked() -> None:
    """A sign-in lock started (a later refusal while it lasts is a failure `locked`, not another lock)."""
    SIGN_IN_LOCKOUTS.inc()


def payment_webhook(provider: str, outcome: str) -> None:
    """One webhook delivery; `outcome` is a bounded enum value (server/payments/service.py `Outcome`)."""
    PAYMENT_WEBHOOKS.labels(provider, outcome).inc()


def db_pool(in_use: int, idle: int) -> None:
    """This process's database connections (its pools summed); summed over the node's processes."""
    DB_POOL.labels("in_use").set(in_use)
    DB_POOL.labels("idle").set(idle)
