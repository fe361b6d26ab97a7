"""Every environment variable Tollway reads, declared once: name, default, parser (and bounds), meaning.

`Config`'s defaults (server/config.py) are these defaults, `from_env` reads each variable through its
declaration (so a refusal names it), and the configuration table of docs/OPERATIONS.md is generated from
them (`python -m scripts.config_table`; tests/test_config_table.py fails when it drifts). A `doc` is that
table's Meaning cell, in Markdown, relative links from docs/; `{range}` in it is the parser's bounds, so a
range is written only in the parser. `VARS` is every declaration, in the table's order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from quota.leases import DEFAULT_LEASE_SECONDS
from quota.partitions import DEFAULT_PARTITIONS, MAX_PARTITIONS
from server.config_parse import (
    Network,
    Var,
    choice,
    database_url,
    declared,
    exactly,
    flag,
    host_ports,
    networks,
    networks_or_flag,
    optional,
    path,
    seconds,
    text,
    token,
    url,
    whole,
)
from server.faults import NONE as NO_FAULTS
from server.faults import SWITCH

NO_NETWORKS: tuple[Network, ...] = ()

# ---- storage ---------------------------------------------------------------------------------------------

DATABASE_URL = Var(
    "DATABASE_URL", "", database_url(), shown="SQLite at `DATA_DIR/tollway.db`",
    doc=("SQLAlchemy URL of the main database: `sqlite:///…`, `mysql://user:pass@host:3306/db` "
         "(MySQL/MariaDB), `postgresql://user:pass@host:5432/db`. The async driver (`aiosqlite`, "
         "`aiomysql`, `asyncpg`) is filled in; a synchronous driver such as `mysql+pymysql` is refused."))
LOG_DATABASE_URL = Var(
    "LOG_DATABASE_URL", None, optional(database_url()), field="log_database_url",
    doc=("A separate database for the logs (same URL forms as `DATABASE_URL`; any of the three kinds, "
         "whatever the main one is). When set to another database than `DATABASE_URL`, the `logs` table "
         "lives there alone: it is created and migrated at start-up like the main database (`tollway "
         "migrate` does both), every log is written there exactly once and every log route reads it there;"
         " balances, counters, the usage-data buckets and everything else stay in the main database. "
         "Service logs (manage, system, …) reach it through a small outbox in the main database within "
         "about a second. Unset, or equal to `DATABASE_URL`: the logs live in the main database, written "
         "in the same transaction as their charge. Logs already in the main database are not moved when "
         "you set it. See [MONEY.md](MONEY.md#logs-in-a-separate-database)."))
REDIS_URL = Var(
    "REDIS_URL", None, optional(url("redis", "rediss", "unix",
                                    expected="redis://host:port/db, rediss://… or unix://…")),
    doc=("`redis://host:6379/0`, `rediss://…` or `unix://…`. Unset = **embedded mode** (one process, "
         "everything in-process). Set = sessions, rate counters, invalidation and the live quota balances "
         "shared through Redis (see "
         "[Production](PRODUCTION.md#production-several-nodes-behind-a-load-balancer) for the Redis "
         "settings it needs)."))
REDIS_CLUSTER_NODES = Var(
    "REDIS_CLUSTER_NODES", (), host_ports(),
    doc=("A Redis Cluster instead of one server: `host:port,host:port,…` (an IPv6 host in brackets), a few"
         " of its nodes; the others are discovered. Exclusive with `REDIS_URL` (both set: start-up "
         "refused). Everything runs on it, the quota engine included; see [Redis "
         "Cluster](PRODUCTION.md#redis-cluster) for what is where and what a master failover may lose. The"
         " setting must match the server: `REDIS_URL` naming a node of a Redis Cluster is refused at "
         "start-up (`REDIS_URL points at a Redis Cluster node; set REDIS_CLUSTER_NODES instead`), and so "
         "is `REDIS_CLUSTER_NODES` naming a single server (`… which is not a Redis Cluster node …; set "
         "REDIS_URL instead`)."))
REDIS_KEY_PREFIX = Var(
    "REDIS_KEY_PREFIX", "tollway:", field="redis_prefix",
    # the quota keys' hash tags must be the first braces of a key
    parse=text(lambda value: "must not contain { or }" if {"{", "}"} & set(value) else None, strip=False),
    doc=("Prefix of every Redis key and pub/sub channel. Several deployments can share one Redis server if"
         " each has its own prefix or its own database number in `REDIS_URL` (a channel's name carries "
         "both: `<prefix>invalidate:db<n>`)."))
REDIS_TIMEOUT = Var(
    "REDIS_TIMEOUT", 2.0, seconds(0.05, 60), field="redis_timeout",
    doc=("Seconds one Redis command may take, connecting included ({range}); past it the call answers 503 "
         "`service_unavailable` and nothing is charged. Measured on the worker's event loop, so a worker "
         "saturated with work reaches it too."))
SECRET_KEY = Var(
    "SECRET_KEY", "", token(16), shown="generated in embedded mode",
    doc=("Encrypts secrets at rest and keys the HMAC digests of tokens. At least 16 characters (`openssl "
         "rand -hex 32`). **Required** when `REDIS_URL`, `REDIS_CLUSTER_NODES` or a MySQL/PostgreSQL "
         "`DATABASE_URL` is set. Otherwise it is generated once and kept in `DATA_DIR/secret_key` (mode "
         "0600) and reused at every start. Changing it invalidates access tokens and stored secrets."))
DATA_DIR = Var(
    "DATA_DIR", Path("data"), path(), shown="`./data`",
    doc=("Where the embedded database and the generated secret live; created when needed, with mode 0700 "
         "(an existing directory keeps its mode). The SQLite database and its `-wal` / `-shm` / `-journal`"
         " files are kept 0600 (tightened at start if an older version left them readable)."))

# ---- serving ---------------------------------------------------------------------------------------------

PUBLIC_URL = Var(
    "PUBLIC_URL", "", url("http", "https", expected="an http(s) URL", trim=True), field="public_url",
    doc=("The address users reach, e.g. `https://ai.example.com`. When it — or the `ServerAddress` option,"
         " which root can change at run time — starts with `https://`, the session cookie gets `Secure`. "
         "Both are also this site's origins for the cross-site refusal: behind a proxy that rewrites "
         "`Host` (nginx's default `proxy_pass`) or that terminates TLS without setting "
         "`X-Forwarded-Proto`, set one of them, or the console's own sign-in and changes are refused as "
         "cross-site (403 `CROSS_SITE_REQUEST`; the warning log line names the origin sent and the ones "
         "expected)."))
HOST = Var("HOST", "127.0.0.1", text(), field="host",
           doc="Listen address (`0.0.0.0` to accept connections from other hosts).")
PORT = Var("PORT", 3000, whole(0, 65535), field="port", doc="Listen port.")
WORKERS = Var(
    "WORKERS", 1, whole(1, 256), field="workers",
    doc=("Worker processes. More than one needs `REDIS_URL` (or `REDIS_CLUSTER_NODES`). `tollway serve "
         "--workers N` overrides it."))
MAX_BODY_SIZE = Var("MAX_BODY_SIZE", 32 * 1024 * 1024, whole(1024, 1024**3), field="max_body_size",
                    shown="`33554432` (32 MiB)", doc="Largest request body in bytes; larger is a 413.")
# Whole deadlines for a client sending a request (server/web/connections.py): Sanic's own timers restart on
# every byte, so a client trickling its head or body kept a connection forever.
REQUEST_HEAD_TIMEOUT = Var(
    "REQUEST_HEAD_TIMEOUT", 20.0, seconds(1, 600), field="request_head_timeout",
    doc=("Seconds ({range}) a client has to send the request line and headers, counted from the "
         "connection's opening (first request) or the request's first byte; past it the answer is 408 and "
         "the connection is closed, however slowly bytes keep coming."))
REQUEST_BODY_TIMEOUT = Var(
    "REQUEST_BODY_TIMEOUT", 120.0, seconds(1, 3600), field="request_body_timeout",
    doc=("Seconds ({range}) a client has to send the whole body once the headers are in; past it 408 and "
         "close. Responses are not bounded by it: a model call may answer or stream as long as its "
         "upstream does."))
SHUTDOWN_GRACE = Var(
    "SHUTDOWN_GRACE", 30.0, seconds(0, 3600), field="shutdown_grace",
    doc=("Seconds ({range}) requests in flight get on SIGTERM or SIGINT; a model stream still running then "
         "ends with its provider's error event (503) and is charged for what it delivered. Give the "
         "process manager more than this + 5 s (systemd `TimeoutStopSec`, `docker stop -t`)."))
TRUSTED_PROXIES = Var(
    "TRUSTED_PROXIES", NO_NETWORKS, networks(), field="trusted_proxies", shown="none",
    doc=("Comma-separated IPs or CIDRs of your proxies / load balancers. Only from them is "
         "`X-Forwarded-For` believed; the client IP is the last hop before them."))
# The rate limits: `from_env` pairs each count with its period (server/config.py `RateLimit`).
GLOBAL_API_RATE_LIMIT = Var(
    "GLOBAL_API_RATE_LIMIT", 180, whole(0, 10**9),
    doc="Requests per client IP to any `/api` route per `GLOBAL_API_RATE_LIMIT_DURATION`. `0` disables.")
GLOBAL_API_RATE_LIMIT_DURATION = Var("GLOBAL_API_RATE_LIMIT_DURATION", 180, whole(0, 10**7), doc="Seconds.")
CRITICAL_RATE_LIMIT = Var(
    "CRITICAL_RATE_LIMIT", 20, whole(0, 10**9),
    doc=("Requests per client IP to the critical routes (login, register, setup, …) per "
         "`CRITICAL_RATE_LIMIT_DURATION`. `0` disables."))
CRITICAL_RATE_LIMIT_DURATION = Var("CRITICAL_RATE_LIMIT_DURATION", 1200, whole(0, 10**7), doc="Seconds.")
USER_CACHE_SECONDS = Var(
    "USER_CACHE_SECONDS", 1.0, seconds(0, 1), field="user_cache_seconds",
    doc=("How long a worker may reuse a user's role and status from its own memory before asking the "
         "shared copy again ({range}; changes are broadcast anyway)."))

# ---- logs, metrics, readiness ----------------------------------------------------------------------------

LOG_LEVEL = Var("LOG_LEVEL", "INFO", choice("DEBUG", "INFO", "WARNING", "ERROR", upper=True),
                field="log_level", doc="`DEBUG`, `INFO`, `WARNING` or `ERROR`.")
LOG_FORMAT = Var(  # server/logging_setup.py
    "LOG_FORMAT", "text", choice("text", "json"), field="log_format",
    doc=("`text`: `time level logger: message` lines. `json`: one JSON object per line for a log shipper —"
         " `time` (ISO 8601, UTC, milliseconds), `level`, `logger`, `message`, `request_id` (null outside "
         "a request), `user_id` (once the request's caller is known: a session's or token's user, an API "
         "key's owner), `exception` (a traceback); the start-up lines on stdout and a failed start's last "
         "line on stderr are JSON too. Messages are redacted either way ([Logs](MONITORING.md#logs))."))
ACCESS_LOG = Var(  # server/logging_setup.py `access_line`
    "ACCESS_LOG", False, flag(), field="access_log",
    doc=("`true`: one line per request answered (logger `tollway.access`, at INFO whatever `LOG_LEVEL` "
         "says) with the method, the route's template (never the raw path or query), the status, the "
         "duration, the client IP and the user when known — in `LOG_FORMAT`'s format "
         "([Logs](MONITORING.md#logs))."))
METRICS_TOKEN = Var(
    "METRICS_TOKEN", None, optional(token(16)), field="metrics_token",
    doc=("Turns `GET /metrics` on: a scrape must send `Authorization: Bearer <METRICS_TOKEN>` (at least 16"
         " characters). Unset, `/metrics` answers the 404 of an unknown route, and so does a scrape "
         "without the token or with a wrong one."))
METRICS_ALLOW = Var(
    "METRICS_ALLOW", NO_NETWORKS, networks(), field="metrics_allow",
    doc=("On top of `METRICS_TOKEN`: comma-separated IPs or CIDRs (`127.0.0.1,10.0.0.0/8`) the scrape must"
         " come from. The address is the client IP as `TRUSTED_PROXIES` decides it (behind a trusted load "
         "balancer: the hop before it; `X-Forwarded-For` from anyone else is ignored). A scrape from "
         "elsewhere gets the same 404 as one without the token. Unset: any address with the token."))
PROMETHEUS_MULTIPROC_DIR = Var(
    "PROMETHEUS_MULTIPROC_DIR", None, optional(path()), field="metrics_dir",
    doc=("prometheus-client's multiprocess directory, where each process of a node keeps its metrics for "
         "`GET /metrics` to sum. `tollway serve` sets a fresh one for its processes and removes it when it "
         "stops; leave it unset (see `server/metrics/__init__.py`)."))
# `GET /readyz`: how long each dependency may take to answer, how often each worker asks them in the
# background (the route answers from the last round), and how far the quota sync may lag behind.
READY_TIMEOUT = Var(
    "READY_TIMEOUT", 1.0, seconds(0.05, 30), field="ready_timeout",
    doc=("`GET /readyz`: seconds ({range}) each dependency (database, Redis, the quota sync's position) "
         "may take to answer in a round of readiness checks."))
READY_INTERVAL = Var(
    "READY_INTERVAL", 1.0, seconds(0.1, 60), field="ready_interval",
    doc=("`GET /readyz`: seconds ({range}) between two rounds of readiness checks; each worker runs them in"
         " the background and the route answers from the last round. A failure shows within "
         "`READY_INTERVAL + 2 × READY_TIMEOUT` (3 s by default)."))
READY_MAX_SYNC_LAG = Var(
    "READY_MAX_SYNC_LAG", 60.0, seconds(1, 86_400), field="ready_max_sync_lag",
    doc=("`GET /readyz`: seconds ({range}) the oldest entry waiting for the quota sync may be old before "
         "the node reports itself not ready."))

# ---- the quota engine ------------------------------------------------------------------------------------

QUOTA_SYNC_INTERVAL = Var(
    "QUOTA_SYNC_INTERVAL", 1.0, seconds(0.01, 60), field="quota_sync_interval",
    doc=("Quota engine: seconds (fractions allowed, {range}) between two runs of the sync that moves "
         "settled usage and balance adjustments from Redis (or memory) into SQL. It is also how far SQL "
         "lags the live balances, and about what a Redis data loss can cost (see [Quota "
         "guarantees](PRODUCTION.md#quota-guarantees))."))
QUOTA_SYNC_IN_SERVER = Var(
    "QUOTA_SYNC_IN_SERVER", True, flag(), field="quota_sync_in_server",
    doc=("Quota engine: `tollway serve` runs that sync itself (several syncs take turns on a row lock; "
         "each entry is applied once). `false` leaves it to separate `tollway quota-sync` processes, of "
         "which at least one must run. Embedded mode always syncs in-process."))
QUOTA_SYNC_PROCESS = Var(
    "QUOTA_SYNC_PROCESS", True, flag(), field="quota_sync_process",
    doc=("Quota engine, with Redis: `tollway serve` runs that sync as one process of its own beside the "
         "workers (started, restarted if it dies, stopped with the server), so its SQL work never runs on "
         "a serving worker's event loop. `false`: inside every worker instead."))
QUOTA_HOLD_TIMEOUT = Var(
    "QUOTA_HOLD_TIMEOUT", 600.0, seconds(1, 86_400), field="quota_hold_timeout",
    doc=("Quota engine: the lease of a reservation, in seconds ({range}). A reservation neither settled "
         "nor released within it (its worker died) is returned by the sweeper; a call that settles later "
         "still pays its full cost."))
QUOTA_SYNC_BATCH = Var(
    "QUOTA_SYNC_BATCH", 2000, whole(1, 100_000), field="quota_sync_batch",
    doc=("Quota engine: most entries the sync writes in one SQL transaction ({range}); a full batch is "
         "followed at once by the next."))
QUOTA_SYNC_LEASE_TIMEOUT = Var(  # Config.quota_lease_seconds: at least three sync passes
    "QUOTA_SYNC_LEASE_TIMEOUT", DEFAULT_LEASE_SECONDS, seconds(0.5, 600), field="quota_sync_lease",
    doc=("Quota engine with Redis: seconds ({range}; at least three `QUOTA_SYNC_INTERVAL`s are used) a "
         "quota sync's leases on its partitions last without renewal. The syncs that are running (`tollway"
         " serve`'s and every `tollway quota-sync`) share the partitions, each moving at most its fair "
         "share; when one dies, the others take its partitions over after this long."))
QUOTA_PARTITIONS = Var(  # fixed per deployment (quota/partitions.py)
    "QUOTA_PARTITIONS", DEFAULT_PARTITIONS, whole(1, MAX_PARTITIONS), field="quota_partitions",
    doc=("Quota engine with Redis: how many partitions the quota state is split into ({range}; see [Quota "
         "partitions](PRODUCTION.md#quota-partitions)). Chosen once per deployment: every process must use"
         " the same value, and a process whose value differs from the one recorded in Redis refuses to "
         "start."))

# ---- the gateway's upstream calls ------------------------------------------------------------------------

UPSTREAM_TIMEOUT = Var(
    "UPSTREAM_TIMEOUT", 300.0, seconds(1, 3600), field="upstream_timeout",
    doc=("Gateway: seconds an upstream call may take per read or write (connecting: at most 10 s); on a "
         "timeout the call is retried elsewhere, and a last attempt that timed out answers 504 (a dropped "
         "or refused connection: 503)."))
ADMIN_UPSTREAM_TIMEOUT = Var(
    "ADMIN_UPSTREAM_TIMEOUT", 15.0, seconds(1, 300), field="admin_upstream_timeout",
    doc=("Channel tests, balances and upstream model lists: seconds the whole upstream call may take "
         "({range}); past it the route answers 502."))
STREAM_IDLE_TIMEOUT = Var(
    "STREAM_IDLE_TIMEOUT", 120.0, seconds(1, 3600), field="stream_idle_timeout",
    doc=("Gateway: a streamed call whose upstream sends nothing for this many seconds is ended with an "
         "error event and settled on what was delivered."))
STREAM_KEEPALIVE = Var(
    "STREAM_KEEPALIVE", 15.0, seconds(1, 3600), field="stream_keepalive",
    doc=("Gateway: seconds ({range}) of upstream silence after which an SSE stream gets an SSE comment (`: "
         "keep-alive`), repeated as long as the silence lasts, so proxies and clients with read timeouts "
         "keep the connection."))
UPSTREAM_TRANSPORT = Var(
    "UPSTREAM_TRANSPORT", "aiohttp", choice("httpx", "aiohttp"), field="upstream_transport",
    doc=("Gateway: the HTTP client of every upstream call — model calls, channel tests, balances, model "
         "lists and checkout sessions alike; a worker runs only this one. `aiohttp`: aiohttp's pooled "
         "session, called directly (a model call costs the client about 60 µs of CPU against httpx's ~320 "
         "at concurrency 1 and ~830 at 16 — `python -m scripts.bench_transport`). `httpx`: httpx's own "
         "transport (httpx + httpcore). Either way a failure reads the same (httpx's error classes: only a"
         " timeout is a timeout)."))
UPSTREAM_ALLOW_PRIVATE = Var(
    "UPSTREAM_ALLOW_PRIVATE", NO_NETWORKS, networks_or_flag(), field="upstream_allow_private",
    shown="`false`",
    doc=("Gateway: which non-public addresses a channel's `base_url` may reach. `false`: none — loopback, "
         "private, link-local (cloud metadata), carrier-grade NAT and the like are refused (see "
         "[Security](SECURITY.md)); `true`: all of them; or a comma list of IPs/CIDRs, e.g. `10.1.2.0/24` "
         "for a self-hosted model server, which keeps the rest closed."))

# ---- testing only: the crash and stop tests' faults (server/faults.py), behind one switch -----------------

TOLLWAY_TEST_FAULTS = Var(
    SWITCH, False, exactly("1"), shown="unset",
    doc=("Testing only: `1` lets the three `TEST_*` variables below arm a fault (`server/faults.py`). "
         "Without it, any of them set stops start-up with an error naming it, so a stray variable can "
         "never arm a fault in production."))
TEST_KILL_AFTER_CREDIT_COMMIT = Var(
    "TEST_KILL_AFTER_CREDIT_COMMIT", NO_FAULTS.kill_after_credit_commit, flag(),
    doc=("Testing only (the crash test; needs `TOLLWAY_TEST_FAULTS=1`): `true` makes a process SIGKILL "
         "itself right after committing a credit's SQL fact (a redeemed code, a completed order, a "
         "transfer), before the live balance is raised."))
TEST_KILL_AFTER_LOG_COMMIT = Var(
    "TEST_KILL_AFTER_LOG_COMMIT", NO_FAULTS.kill_after_log_commit, flag(),
    doc=("Testing only (the crash test; needs `TOLLWAY_TEST_FAULTS=1`): with a separate log database, "
         "`true` makes the quota sync SIGKILL its own process right after a batch's logs are committed in "
         "the log database, before the batch's charges are committed in the main database."))
TEST_WORKER_START_DELAY = Var(
    "TEST_WORKER_START_DELAY", NO_FAULTS.worker_start_delay, seconds(0, 60),
    doc=("Testing only (the stop test; needs `TOLLWAY_TEST_FAULTS=1`): seconds ({range}) each server worker "
         "waits while it starts, before it serves, so that a stop signal can be sent to workers still "
         "starting."))
FAULT_VARS = (TEST_KILL_AFTER_CREDIT_COMMIT, TEST_KILL_AFTER_LOG_COMMIT, TEST_WORKER_START_DELAY)

VARS: tuple[Var[Any], ...] = declared(globals())
"""Every declaration, in the order written here (the table's order)."""
