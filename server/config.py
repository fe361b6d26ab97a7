"""One typed configuration object, read from the environment (and an optional `.env`) exactly once.

Every setting of the process lives here; nothing else reads `os.environ`. An invalid value stops start-up
with one line naming the variable (`ConfigError`). Numbers are written in ASCII digits (core/numerals.py).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from core import numerals
from quota.leases import DEFAULT_LEASE_SECONDS
from quota.partitions import DEFAULT_PARTITIONS, MAX_PARTITIONS
from server.faults import NONE as NO_FAULTS
from server.faults import SWITCH as FAULTS_SWITCH
from server.faults import Faults

DEFAULT_MAX_BODY = 32 * 1024 * 1024
SECRET_FILE_NAME = "secret_key"  # noqa: S105 (a file name, not a secret)


class ConfigError(ValueError):
    """A setting is missing or invalid; the message starts with the variable's name.

    `log_format` is how the line that reports it must be written (`load` sets it): `LOG_FORMAT` as
    configured, so that with `LOG_FORMAT=json` a refused start is a JSON log line too, unless `LOG_FORMAT`
    itself is the broken setting — then the default, text."""

    log_format: str = "text"


@dataclass(frozen=True, slots=True)
class Seconds:
    """A duration setting, declared once: its variable, its default and the range it must lie in."""

    name: str
    default: float
    lo: float
    hi: float

    def read(self, env: Mapping[str, str]) -> float:
        return _float(env, self.name, self.default, self.lo, self.hi)


# How long a client may take to send a request (server/web/connections.py). Sanic's own timers restart on
# every byte, so a client trickling its head or body kept a connection forever; these are whole deadlines.
REQUEST_HEAD_TIMEOUT = Seconds("REQUEST_HEAD_TIMEOUT", 20.0, 1.0, 600.0)
REQUEST_BODY_TIMEOUT = Seconds("REQUEST_BODY_TIMEOUT", 120.0, 1.0, 3600.0)
# How long requests in flight get to finish when the server is asked to stop (SIGTERM, SIGINT).
SHUTDOWN_GRACE = Seconds("SHUTDOWN_GRACE", 30.0, 0.0, 3600.0)
# `GET /readyz`: how long each dependency may take to answer, and how far the quota sync may lag behind.
READY_TIMEOUT = Seconds("READY_TIMEOUT", 1.0, 0.05, 30.0)
# … and how often each worker asks them, in the background (the route answers from the last round).
READY_INTERVAL = Seconds("READY_INTERVAL", 1.0, 0.1, 60.0)
READY_MAX_SYNC_LAG = Seconds("READY_MAX_SYNC_LAG", 60.0, 1.0, 86_400.0)
LOG_FORMATS = ("text", "json")


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
    database_url: str
    secret_key: str
    data_dir: Path
    log_database_url: str | None = None
    redis_url: str | None = None
    # a Redis Cluster instead of one server: seed nodes (host, port); the client discovers the others
    redis_cluster_nodes: tuple[tuple[str, int], ...] = ()
    redis_prefix: str = "tollway:"
    # how long one Redis command may take (connect included) before the call answers 503; it is time on
    # the worker's event loop, so a worker saturated with work also runs into it
    redis_timeout: float = 2.0
    public_url: str = ""
    host: str = "127.0.0.1"
    port: int = 3000
    workers: int = 1
    max_body_size: int = DEFAULT_MAX_BODY
    trusted_proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    global_rate_limit: RateLimit = field(default_factory=lambda: RateLimit(180, 180))
    critical_rate_limit: RateLimit = field(default_factory=lambda: RateLimit(20, 1200))
    user_cache_seconds: float = 1.0
    log_level: str = "INFO"
    quota_sync_interval: float = 1.0
    quota_sync_in_server: bool = True
    quota_sync_process: bool = True  # with Redis: `tollway serve` runs that sync as its own process
    quota_hold_timeout: float = 600.0
    quota_sync_batch: int = 2000
    quota_partitions: int = DEFAULT_PARTITIONS  # fixed per deployment (quota/partitions.py)
    quota_sync_lease: float = DEFAULT_LEASE_SECONDS  # a dead sync's partitions are taken over after it
    upstream_timeout: float = 300.0
    stream_idle_timeout: float = 120.0
    stream_keepalive: float = 15.0  # a silent upstream's SSE stream gets a comment this often
    upstream_transport: str = "aiohttp"
    upstream_allow_private: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    admin_upstream_timeout: float = 15.0  # channel tests, balances, model lists: the whole call
    request_head_timeout: float = REQUEST_HEAD_TIMEOUT.default
    request_body_timeout: float = REQUEST_BODY_TIMEOUT.default
    shutdown_grace: float = SHUTDOWN_GRACE.default
    # `GET /metrics` answers only a caller sending this bearer token; unset, it answers 404
    metrics_token: str | None = None
    # … and only from these client addresses (the client IP as TRUSTED_PROXIES decides it); empty: any
    metrics_allow: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    # prometheus-client's multiprocess directory (`tollway serve` sets a fresh one for its processes)
    metrics_dir: Path | None = None
    ready_timeout: float = READY_TIMEOUT.default
    ready_interval: float = READY_INTERVAL.default
    ready_max_sync_lag: float = READY_MAX_SYNC_LAG.default
    log_format: str = "text"  # or "json": one JSON object per line (server/logging_setup.py)
    access_log: bool = False  # one log line per request answered (server/logging_setup.py `access_line`)
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
        return database_kind(self.database_url)

    @property
    def secure_cookies(self) -> bool:
        return self.public_url.startswith("https://")


def database_kind(url: str, name: str = "DATABASE_URL") -> str:
    scheme = url.split(":", 1)[0].split("+", 1)[0].lower()
    if scheme == "sqlite":
        return "sqlite"
    if scheme in ("mysql", "mariadb"):
        return "mysql"
    if scheme in ("postgresql", "postgres"):
        return "postgres"
    raise ConfigError(f"{name}: unsupported database {scheme!r} (use sqlite, mysql or postgresql)")


_ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "mysql": "mysql+aiomysql", "postgres": "postgresql+asyncpg"}


def _normalize_db_url(name: str, url: str) -> str:
    """Accept `mysql://`, `mariadb://`, `postgres://` … and give them the async driver Tollway uses."""
    if "://" not in url:
        raise ConfigError(f"{name}: not a database URL (expected e.g. mysql+aiomysql://user:pass@host/db)")
    scheme, rest = url.split("://", 1)
    kind = database_kind(url, name)
    expected = _ASYNC_DRIVERS[kind]
    _, plus, driver = scheme.partition("+")
    if plus and driver.lower() != expected.split("+", 1)[1]:
        raise ConfigError(f"{name}: driver {driver!r} is not supported; use {expected}://")
    return f"{expected}://{rest}"


def _int(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    """A whole number in lo..hi, written in ASCII digits (core/numerals.py: no `١٦`, `1_6`, `+16` or ` 16`);
    unset or empty: `default`."""
    raw = env.get(name, "")
    if raw == "":
        return default
    try:
        value = numerals.whole(raw, negative=lo < 0)
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from None
    if not lo <= value <= hi:
        raise ConfigError(f"{name}: {value} is outside {lo}..{hi}")
    return value


def _float(env: Mapping[str, str], name: str, default: float, lo: float, hi: float) -> float:
    """A number in lo..hi, written in ASCII (core/numerals.py); unset or empty: `default`."""
    raw = env.get(name, "")
    if raw == "":
        return default
    try:
        value = numerals.decimal(raw, negative=lo < 0)
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from None
    if not lo <= value <= hi:
        raise ConfigError(f"{name}: {value} is outside {lo}..{hi}")
    return value


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}: {raw!r} is not a boolean (use true or false)")


def _cluster_nodes(raw: str) -> tuple[tuple[str, int], ...]:
    """`REDIS_CLUSTER_NODES`: `host:port,host:port,…` (an IPv6 host in brackets: `[::1]:7000`)."""
    nodes: list[tuple[str, int]] = []
    for part in raw.replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        host, sep, port = part.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        try:
            number = numerals.whole(port)
        except ValueError:
            number = 0
        if not sep or not host or not 0 < number < 65536:
            raise ConfigError(f"REDIS_CLUSTER_NODES: {part!r} is not host:port")
        nodes.append((host, number))
    return tuple(nodes)


def _networks(name: str, raw: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """A comma (or semicolon) separated list of IP addresses and CIDRs; empty: none."""
    nets = []
    for part in raw.replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        try:
            nets.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ConfigError(f"{name}: {part!r} is not an IP address or CIDR") from None
    return tuple(nets)


def _allow_private(raw: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """`UPSTREAM_ALLOW_PRIVATE`: false (default) → none, true → every address, else the networks listed."""
    value = raw.strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return ()
    if value in ("1", "true", "yes", "on"):
        return (ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))
    nets = []
    for part in value.replace(";", ",").split(","):
        if part.strip():
            try:
                nets.append(ipaddress.ip_network(part.strip(), strict=False))
            except ValueError:
                raise ConfigError(f"UPSTREAM_ALLOW_PRIVATE: {part.strip()!r} is not true, false, an IP "
                                  "address or a CIDR") from None
    return tuple(nets)


def _log_format(env: Mapping[str, str]) -> str:
    log_format = env.get("LOG_FORMAT", "text").strip().lower() or "text"
    if log_format not in LOG_FORMATS:
        raise ConfigError("LOG_FORMAT: expected text or json")
    return log_format


def _reporting_format(env: Mapping[str, str]) -> str:
    """The format of the line that reports a configuration error: `LOG_FORMAT` when that one is valid."""
    try:
        return _log_format(env)
    except ConfigError:
        return "text"


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


def from_env(env: Mapping[str, str]) -> Config:
    """Build the config from a mapping of environment variables; may create DATA_DIR and its secret."""
    data_dir = Path(env.get("DATA_DIR", "").strip() or "./data").expanduser()
    raw_db = env.get("DATABASE_URL", "").strip()
    database_url = _normalize_db_url("DATABASE_URL", raw_db) if raw_db else ""
    raw_log_db = env.get("LOG_DATABASE_URL", "").strip()
    log_database_url = _normalize_db_url("LOG_DATABASE_URL", raw_log_db) if raw_log_db else None

    redis_url = env.get("REDIS_URL", "").strip() or None
    if redis_url is not None and urlsplit(redis_url).scheme not in ("redis", "rediss", "unix"):
        raise ConfigError("REDIS_URL: expected redis://host:port/db, rediss://… or unix://…")

    cluster_nodes = _cluster_nodes(env.get("REDIS_CLUSTER_NODES", ""))
    if cluster_nodes and redis_url is not None:
        raise ConfigError("REDIS_CLUSTER_NODES: set either REDIS_URL (one Redis server) or "
                          "REDIS_CLUSTER_NODES (a Redis Cluster), not both")
    uses_redis = redis_url is not None or bool(cluster_nodes)

    needs_secret = uses_redis or (database_url and database_kind(database_url) != "sqlite")
    secret_key = env.get("SECRET_KEY", "").strip()
    if secret_key and len(secret_key) < 16:
        raise ConfigError("SECRET_KEY: too short (use at least 16 characters, e.g. `openssl rand -hex 32`)")

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

    public_url = env.get("PUBLIC_URL", "").strip().rstrip("/")
    if public_url and urlsplit(public_url).scheme not in ("http", "https"):
        raise ConfigError("PUBLIC_URL: expected an http(s) URL")

    workers = _int(env, "WORKERS", 1, 1, 256)
    if workers > 1 and not uses_redis:
        raise ConfigError("WORKERS: more than one worker needs REDIS_URL or REDIS_CLUSTER_NODES (embedded "
                          "mode is one process)")

    prefix = env.get("REDIS_KEY_PREFIX", "tollway:")
    if "{" in prefix or "}" in prefix:  # the quota keys' hash tags must be the first braces of a key
        raise ConfigError("REDIS_KEY_PREFIX: must not contain { or }")
    level = env.get("LOG_LEVEL", "INFO").strip().upper() or "INFO"
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise ConfigError("LOG_LEVEL: expected DEBUG, INFO, WARNING or ERROR")

    log_format = _log_format(env)
    metrics_token = env.get("METRICS_TOKEN", "").strip() or None
    if metrics_token is not None and len(metrics_token) < 16:
        raise ConfigError("METRICS_TOKEN: too short (at least 16 characters, e.g. `openssl rand -hex 32`)")
    metrics_dir = env.get("PROMETHEUS_MULTIPROC_DIR", "").strip()

    transport = env.get("UPSTREAM_TRANSPORT", "aiohttp").strip().lower() or "aiohttp"
    if transport not in ("httpx", "aiohttp"):
        raise ConfigError("UPSTREAM_TRANSPORT: expected httpx or aiohttp")

    return Config(
        database_url=database_url,
        log_database_url=log_database_url,
        redis_url=redis_url,
        redis_cluster_nodes=cluster_nodes,
        redis_prefix=prefix,
        redis_timeout=_float(env, "REDIS_TIMEOUT", 2.0, 0.05, 60.0),
        secret_key=secret_key,
        data_dir=data_dir,
        public_url=public_url,
        host=env.get("HOST", "").strip() or "127.0.0.1",
        port=_int(env, "PORT", 3000, 0, 65535),
        workers=workers,
        max_body_size=_int(env, "MAX_BODY_SIZE", DEFAULT_MAX_BODY, 1024, 1024 * 1024 * 1024),
        trusted_proxies=_networks("TRUSTED_PROXIES", env.get("TRUSTED_PROXIES", "")),
        global_rate_limit=RateLimit(
            _int(env, "GLOBAL_API_RATE_LIMIT", 180, 0, 10**9),
            _int(env, "GLOBAL_API_RATE_LIMIT_DURATION", 180, 0, 10**7),
        ),
        critical_rate_limit=RateLimit(
            _int(env, "CRITICAL_RATE_LIMIT", 20, 0, 10**9),
            _int(env, "CRITICAL_RATE_LIMIT_DURATION", 1200, 0, 10**7),
        ),
        user_cache_seconds=_float(env, "USER_CACHE_SECONDS", 1.0, 0.0, 1.0),
        log_level=level,
        quota_sync_interval=_float(env, "QUOTA_SYNC_INTERVAL", 1.0, 0.01, 60.0),
        quota_sync_in_server=_bool(env, "QUOTA_SYNC_IN_SERVER", True),
        quota_sync_process=_bool(env, "QUOTA_SYNC_PROCESS", True),
        quota_hold_timeout=_float(env, "QUOTA_HOLD_TIMEOUT", 600.0, 1.0, 86_400.0),
        quota_sync_batch=_int(env, "QUOTA_SYNC_BATCH", 2000, 1, 100_000),
        quota_partitions=_int(env, "QUOTA_PARTITIONS", DEFAULT_PARTITIONS, 1, MAX_PARTITIONS),
        quota_sync_lease=_float(env, "QUOTA_SYNC_LEASE_TIMEOUT", DEFAULT_LEASE_SECONDS, 0.5, 600.0),
        upstream_timeout=_float(env, "UPSTREAM_TIMEOUT", 300.0, 1.0, 3600.0),
        stream_idle_timeout=_float(env, "STREAM_IDLE_TIMEOUT", 120.0, 1.0, 3600.0),
        stream_keepalive=_float(env, "STREAM_KEEPALIVE", 15.0, 1.0, 3600.0),
        upstream_transport=transport,
        upstream_allow_private=_allow_private(env.get("UPSTREAM_ALLOW_PRIVATE", "")),
        admin_upstream_timeout=_float(env, "ADMIN_UPSTREAM_TIMEOUT", 15.0, 1.0, 300.0),
        request_head_timeout=REQUEST_HEAD_TIMEOUT.read(env),
        request_body_timeout=REQUEST_BODY_TIMEOUT.read(env),
        shutdown_grace=SHUTDOWN_GRACE.read(env),
        metrics_token=metrics_token,
        metrics_allow=_networks("METRICS_ALLOW", env.get("METRICS_ALLOW", "")),
        metrics_dir=Path(metrics_dir) if metrics_dir else None,
        ready_timeout=READY_TIMEOUT.read(env),
        ready_interval=READY_INTERVAL.read(env),
        ready_max_sync_lag=READY_MAX_SYNC_LAG.read(env),
        log_format=log_format,
        access_log=_bool(env, "ACCESS_LOG", False),
        faults=_faults(env),
    )


FAULT_VARIABLES = ("TEST_KILL_AFTER_CREDIT_COMMIT", "TEST_KILL_AFTER_LOG_COMMIT", "TEST_WORKER_START_DELAY")


def _faults(env: Mapping[str, str]) -> Faults:
    """The faults the tests arm (server/faults.py): none without the switch, which any `TEST_*` needs."""
    if env.get(FAULTS_SWITCH, "") != "1":
        stray = [name for name in FAULT_VARIABLES if env.get(name, "")]
        if stray:
            raise ConfigError(f"{stray[0]}: fault injection is for tests only; it needs {FAULTS_SWITCH}=1")
        return NO_FAULTS
    return Faults(kill_after_credit_commit=_bool(env, "TEST_KILL_AFTER_CREDIT_COMMIT", False),
                  kill_after_log_commit=_bool(env, "TEST_KILL_AFTER_LOG_COMMIT", False),
                  worker_start_delay=_float(env, "TEST_WORKER_START_DELAY", 0.0, 0.0, 60.0))


def load(environ: Mapping[str, str] | None = None, dotenv_path: str | None = ".env") -> Config:
    """Read `.env` (if present; real environment variables win) and the environment, once."""
    merged: dict[str, str] = {}
    if dotenv_path and Path(dotenv_path).is_file():
        from dotenv import dotenv_values

        merged.update({k: v for k, v in dotenv_values(dotenv_path).items() if v is not None})
    merged.update(os.environ if environ is None else environ)
    try:
        return from_env(merged)
    except ConfigError as exc:
        exc.log_format = _reporting_format(merged)  # the refusal is written as the operator asked
        raise
