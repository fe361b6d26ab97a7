"""One typed configuration object, read from the environment (and an optional `.env`) exactly once.

Every setting of the process lives here; nothing else reads `os.environ`. Each variable is declared once in
server/config_vars.py (name, default, parser and bounds, documentation): `Config`'s defaults are the
declared ones, and `from_env` reads every variable through its declaration, so an invalid value stops
start-up with one line naming the variable (`ConfigError`). What depends on several variables is decided
here: the embedded database and secret in DATA_DIR, one Redis or a Redis Cluster, workers only with Redis,
the rate limits' counts and periods, and the test faults behind their switch (server/faults.py).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server import config_vars as v
from server.config_parse import ConfigError
from server.config_parse import database_kind as _database_kind
from server.faults import NONE as NO_FAULTS
from server.faults import Faults

__all__ = ["DEFAULT_MAX_BODY", "SECRET_FILE_NAME", "Config", "ConfigError", "RateLimit", "from_env", "load"]

DEFAULT_MAX_BODY = v.MAX_BODY_SIZE.default
SECRET_FILE_NAME = "secret_key"  # noqa: S105 (a file name, not a secret)
Networks = tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]


@dataclass(frozen=True, slots=True)
class RateLimit:
    """`count` requests per `period` seconds; `count == 0` disables the limit."""

    count: int
    period: int

    @property
    def enabled(self) -> bool:
        return self.count > 0 and self.period > 0


@dataclass(frozen=True, slots=True)
class Config:
    """The settings; each default is its variable's declared one (server/config_vars.py says what it is)."""

    database_url: str  # DATABASE_URL, or the SQLite database in DATA_DIR
    secret_key: str  # SECRET_KEY, or the embedded secret kept in DATA_DIR
    data_dir: Path
    log_database_url: str | None = v.LOG_DATABASE_URL.default
    redis_url: str | None = v.REDIS_URL.default
    redis_cluster_nodes: tuple[tuple[str, int], ...] = v.REDIS_CLUSTER_NODES.default  # seeds (host, port)
    redis_prefix: str = v.REDIS_KEY_PREFIX.default
    redis_timeout: float = v.REDIS_TIMEOUT.default
    public_url: str = v.PUBLIC_URL.default
    host: str = v.HOST.default
    port: int = v.PORT.default
    workers: int = v.WORKERS.default
    max_body_size: int = v.MAX_BODY_SIZE.default
    trusted_proxies: Networks = v.TRUSTED_PROXIES.default
    global_rate_limit: RateLimit = RateLimit(v.GLOBAL_API_RATE_LIMIT.default,
                                             v.GLOBAL_API_RATE_LIMIT_DURATION.default)
    critical_rate_limit: RateLimit = RateLimit(v.CRITICAL_RATE_LIMIT.default,
                                               v.CRITICAL_RATE_LIMIT_DURATION.default)
    user_cache_seconds: float = v.USER_CACHE_SECONDS.default
    log_level: str = v.LOG_LEVEL.default
    quota_sync_interval: float = v.QUOTA_SYNC_INTERVAL.default
    quota_sync_in_server: bool = v.QUOTA_SYNC_IN_SERVER.default
    quota_sync_process: bool = v.QUOTA_SYNC_PROCESS.default
    quota_hold_timeout: float = v.QUOTA_HOLD_TIMEOUT.default
    quota_sync_batch: int = v.QUOTA_SYNC_BATCH.default
    quota_partitions: int = v.QUOTA_PARTITIONS.default
    quota_sync_lease: float = v.QUOTA_SYNC_LEASE_TIMEOUT.default
    upstream_timeout: float = v.UPSTREAM_TIMEOUT.default
    stream_idle_timeout: float = v.STREAM_IDLE_TIMEOUT.default
    stream_keepalive: float = v.STREAM_KEEPALIVE.default
    upstream_transport: str = v.UPSTREAM_TRANSPORT.default
    upstream_allow_private: Networks = v.UPSTREAM_ALLOW_PRIVATE.default
    admin_upstream_timeout: float = v.ADMIN_UPSTREAM_TIMEOUT.default
    request_head_timeout: float = v.REQUEST_HEAD_TIMEOUT.default
    request_body_timeout: float = v.REQUEST_BODY_TIMEOUT.default
    shutdown_grace: float = v.SHUTDOWN_GRACE.default
    metrics_token: str | None = v.METRICS_TOKEN.default  # unset: `GET /metrics` answers 404
    metrics_allow: Networks = v.METRICS_ALLOW.default
    metrics_dir: Path | None = v.PROMETHEUS_MULTIPROC_DIR.default  # `tollway serve` sets a fresh one
    ready_timeout: float = v.READY_TIMEOUT.default
    ready_interval: float = v.READY_INTERVAL.default
    ready_max_sync_lag: float = v.READY_MAX_SYNC_LAG.default
    log_format: str = v.LOG_FORMAT.default
    access_log: bool = v.ACCESS_LOG.default
    faults: Faults = NO_FAULTS  # the crash and stop tests' fault injection (server/faults.py): none

    @property
    def separate_logs_url(self) -> str | None:
        """The log database when it is another one than the main database; None: logs stay in the main."""
        url = self.log_database_url
        return url if url and url != self.database_url else None

    @property
    def quota_lease_seconds(self) -> float:
        """A sync's partition leases: QUOTA_SYNC_LEASE_TIMEOUT, at least three passes (renewed on each)."""
        return max(self.quota_sync_lease, 3 * self.quota_sync_interval)

    @property
    def embedded(self) -> bool:
        """No Redis: one process, in-process engine."""
        return self.redis_url is None and not self.redis_cluster_nodes

    @property
    def redis_setting(self) -> str:
        """The variable that names this deployment's Redis (for messages)."""
        return "REDIS_CLUSTER_NODES" if self.redis_cluster_nodes else "REDIS_URL"

    @property
    def database_kind(self) -> str:
        """`sqlite`, `mysql` or `postgres` (the names `GET /api/setup` reports)."""
        return _database_kind(self.database_url)

    @property
    def secure_cookies(self) -> bool:
        return self.public_url.startswith("https://")


def _embedded_secret(data_dir: Path) -> str:
    """The embedded-mode secret: generated once, kept in DATA_DIR with 0600, never regenerated."""
    path = data_dir / SECRET_FILE_NAME
    try:
        if path.exists():
            value = path.read_text(encoding="utf-8").strip()
            if len(value) < 32:
                raise ConfigError(
                    f"SECRET_KEY: the stored secret in {path} is damaged (shorter than 32 chars)")
            return value
        value = secrets.token_urlsafe(48)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(value + "\n")
        return value
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not text"
        raise ConfigError(f"SECRET_KEY: cannot read or create the stored secret {path}: {reason}") from None


def _storage(env: Mapping[str, str], uses_redis: bool) -> dict[str, Any]:
    """DATABASE_URL and SECRET_KEY, or the SQLite database and the secret kept in DATA_DIR (created 0700
    when one of them is needed). The secret is required with Redis or a server database."""
    data_dir = v.DATA_DIR.read(env)
    database_url = v.DATABASE_URL.read(env)
    secret_key = v.SECRET_KEY.read(env)
    needs_secret = uses_redis or (database_url and _database_kind(database_url) != "sqlite")
    if not database_url or not secret_key:
        try:
            data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # private: database and secret
        except OSError as exc:
            raise ConfigError(f"DATA_DIR: cannot create {data_dir}: {exc.strerror}") from None
    if not database_url:
        database_url = f"sqlite+aiosqlite:///{(data_dir / 'tollway.db').resolve()}"
    if not secret_key:
        if needs_secret:
            raise ConfigError("SECRET_KEY: required when Redis (REDIS_URL, REDIS_CLUSTER_NODES) or a server "
                              "database is configured")
        secret_key = _embedded_secret(data_dir)
    return {"database_url": database_url, "secret_key": secret_key, "data_dir": data_dir}


def _faults(env: Mapping[str, str]) -> Faults:
    """The faults the tests arm (server/faults.py): none without the switch, which any `TEST_*` needs."""
    if not v.TOLLWAY_TEST_FAULTS.read(env):
        stray = [var.name for var in v.FAULT_VARS if env.get(var.name, "")]
        if stray:
            raise ConfigError(f"{stray[0]}: fault injection is for tests only; it needs "
                              f"{v.TOLLWAY_TEST_FAULTS.name}=1")
        return NO_FAULTS
    return Faults(kill_after_credit_commit=v.TEST_KILL_AFTER_CREDIT_COMMIT.read(env),
                  kill_after_log_commit=v.TEST_KILL_AFTER_LOG_COMMIT.read(env),
                  worker_start_delay=v.TEST_WORKER_START_DELAY.read(env))


def from_env(env: Mapping[str, str]) -> Config:
    """Build the config from a mapping of environment variables; may create DATA_DIR and its secret.

    A declaration with a `field` gives that field as read, in the declarations' order after LOG_FORMAT
    (the refusal of another variable is written in it); the others are combined here, after them."""
    v.LOG_FORMAT.read(env)
    values: dict[str, Any] = {var.field: var.read(env) for var in v.VARS if var.field}
    redis_url = v.REDIS_URL.read(env)
    cluster_nodes = v.REDIS_CLUSTER_NODES.read(env)
    if cluster_nodes and redis_url is not None:
        raise ConfigError("REDIS_CLUSTER_NODES: set either REDIS_URL (one Redis server) or "
                          "REDIS_CLUSTER_NODES (a Redis Cluster), not both")
    uses_redis = redis_url is not None or bool(cluster_nodes)
    if values["workers"] > 1 and not uses_redis:
        raise ConfigError("WORKERS: more than one worker needs REDIS_URL or REDIS_CLUSTER_NODES (embedded "
                          "mode is one process)")
    global_limit = RateLimit(v.GLOBAL_API_RATE_LIMIT.read(env), v.GLOBAL_API_RATE_LIMIT_DURATION.read(env))
    critical_limit = RateLimit(v.CRITICAL_RATE_LIMIT.read(env), v.CRITICAL_RATE_LIMIT_DURATION.read(env))
    faults = _faults(env)
    storage = _storage(env, uses_redis)  # last: it may create DATA_DIR and the secret once all else is valid
    return Config(**storage, redis_url=redis_url, redis_cluster_nodes=cluster_nodes, faults=faults,
                  global_rate_limit=global_limit, critical_rate_limit=critical_limit, **values)


def _reporting_format(env: Mapping[str, str]) -> str:
    """The format of the line that reports a configuration error: `LOG_FORMAT` when that one is valid."""
    try:
        return v.LOG_FORMAT.read(env)
    except ConfigError:
        return v.LOG_FORMAT.default


def load(environ: Mapping[str, str] | None = None, dotenv_path: str | None = ".env") -> Config:
    """Read `.env` (if present; real environment variables win) and the environment, once."""
    merged: dict[str, str] = {}
    if dotenv_path and Path(dotenv_path).is_file():
        from dotenv import dotenv_values

        merged.update({key: value for key, value in dotenv_values(dotenv_path).items() if value is not None})
    merged.update(os.environ if environ is None else environ)
    try:
        return from_env(merged)
    except ConfigError as exc:
        exc.log_format = _reporting_format(merged)  # the refusal is written as the operator asked
        raise
