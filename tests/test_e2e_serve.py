"""End to end: the real `tollway serve` as a subprocess, spoken to over HTTP.

    embedded          SQLite + in-process engine, one worker: setup, login, self, access token, the
                      generated secret kept in DATA_DIR and reused by the next start
    production        MariaDB + Redis, `--workers 2`: the same flow, concurrent logins spread over both
                      workers, sessions in Redis, the critical rate limit shared by the workers
    start-up errors   refusals that end the process with one readable line and no traceback, and
                      `tollway setup` before `serve`

The processes get a clean environment (no inherited DATABASE_URL, REDIS_URL, …) and a temporary working
directory (so no `.env` is read). They are always stopped: SIGINT, then SIGKILL of their process group.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from tests.services import (
    REDIS_URL,
    create_database,
    drop_database,
    redis_ping,
    redis_purge,
    run_blocking,
    unavailable,
)

pytestmark = pytest.mark.slow

# Every variable server/config.py reads; none of them leaks in from the environment running the tests.
CONFIG_VARS = (
    "DATABASE_URL", "LOG_DATABASE_URL", "REDIS_URL", "REDIS_CLUSTER_NODES", "REDIS_KEY_PREFIX", "SECRET_KEY",
    "DATA_DIR", "PUBLIC_URL", "HOST", "PORT", "WORKERS", "MAX_BODY_SIZE", "TRUSTED_PROXIES",
    "GLOBAL_API_RATE_LIMIT", "GLOBAL_API_RATE_LIMIT_DURATION", "CRITICAL_RATE_LIMIT",
    "CRITICAL_RATE_LIMIT_DURATION",
    "USER_CACHE_SECONDS", "LOG_LEVEL", "UPSTREAM_ALLOW_PRIVATE", "TOLLWAY_TEST_FAULTS",
    "TEST_KILL_AFTER_CREDIT_COMMIT", "TEST_KILL_AFTER_LOG_COMMIT", "TEST_WORKER_START_DELAY",
    "REQUEST_HEAD_TIMEOUT", "REQUEST_BODY_TIMEOUT",
    "SHUTDOWN_GRACE",
    "METRICS_TOKEN", "PROMETHEUS_MULTIPROC_DIR", "READY_TIMEOUT", "READY_INTERVAL", "READY_MAX_SYNC_LAG",
    "LOG_FORMAT",
    "METRICS_ALLOW", "ACCESS_LOG", "ADMIN_UPSTREAM_TIMEOUT", "UPSTREAM_TIMEOUT", "UPSTREAM_TRANSPORT",
    "STREAM_IDLE_TIMEOUT", "STREAM_KEEPALIVE", "REDIS_TIMEOUT", "QUOTA_HOLD_TIMEOUT", "QUOTA_PARTITIONS",
    "QUOTA_SYNC_BATCH",
    "QUOTA_SYNC_INTERVAL", "QUOTA_SYNC_IN_SERVER", "QUOTA_SYNC_LEASE_TIMEOUT", "QUOTA_SYNC_PROCESS",
)
START_DEADLINE = 90.0  # seconds to wait for /api/status (a bound on a hang, not a performance check)
STOP_GRACE = 20.0
ROOT_PASSWORD = "root-password-123"


def tollway_command() -> list[str]:
    """The console script of the running interpreter's environment, else the module."""
    script = Path(sys.executable).with_name("tollway")
    return [str(script)] if script.exists() else [sys.executable, "-m", "server.cli"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def clean_env(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CONFIG_VARS}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(settings)
    return env


@contextmanager
def redis_env(tmp_path: Path, label: str, *, database: str = "mariadb", redis_url: str = REDIS_URL,
              prefix: str | None = None, **settings: str) -> Iterator[tuple[dict[str, str], str, str]]:
    """A fresh Redis key prefix and database — `database` "mariadb" (a new MariaDB database) or "sqlite"
    (the default file in the data directory) — and the environment of a `tollway serve` on them (its own
    data directory and free port, no per-IP rate limits, `settings` on top); yields (env, database URL,
    prefix) and removes both afterwards. Without MariaDB or Redis: skipped, or failed when CI=true.
    `redis_url` picks another Redis database; `prefix` a given (fresh) prefix, e.g. one two deployments share
    in two databases — its keys are removed from `redis_url`'s database only."""
    data_dir = tmp_path / "data"
    try:
        run_blocking(redis_ping(redis_url))
        db_url = (create_database("mariadb") if database == "mariadb"
                  else f"sqlite+aiosqlite:///{(data_dir / 'tollway.db').resolve()}")
    except Exception as exc:
        unavailable(f"{database}+redis", exc)
        raise
    prefix = prefix or f"twtest:{label}:{secrets.token_hex(4)}:"
    own_db = {"DATABASE_URL": db_url} if database == "mariadb" else {}
    env = clean_env(**{**own_db, "REDIS_URL": redis_url, "REDIS_KEY_PREFIX": prefix,
                       "SECRET_KEY": secrets.token_hex(32), "DATA_DIR": str(data_dir),
                       "HOST": "127.0.0.1", "PORT": str(free_port()), "GLOBAL_API_RATE_LIMIT": "0",
                       "CRITICAL_RATE_LIMIT": "0", **settings})
    try:
        yield env, db_url, prefix
    finally:
        run_blocking(redis_purge(prefix, redis_url))
        if database == "mariadb":
            drop_database("mariadb", db_url)


@contextmanager
def mariadb_redis_env(tmp_path: Path, label: str, **settings: str
                      ) -> Iterator[tuple[dict[str, str], str, str]]:
    """`redis_env` on a fresh MariaDB database (`redis_url=`, `prefix=` pass through)."""
    with redis_env(tmp_path, label, database="mariadb", **settings) as made:
        yield made


@dataclass
class Proc:
    popen: subprocess.Popen[bytes]
    out_path: Path
    err_path: Path

    @property
    def stdout(self) -> str:
        return self.out_path.read_text(encoding="utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(encoding="utf-8", errors="replace")

    def output(self) -> str:
        return f"--- stdout ---\n{self.stdout}\n--- stderr ---\n{self.stderr}"


def start(workdir: Path, env: dict[str, str], *args: str, tag: str = "serve") -> Proc:
    out_path = workdir / f"{tag}.{secrets.token_hex(3)}.out"
    err_path = out_path.with_suffix(".err")
    with out_path.open("wb") as out, err_path.open("wb") as err:
        popen = subprocess.Popen(
            [*tollway_command(), *args], cwd=workdir, env=env, stdout=out, stderr=err,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
    return Proc(popen, out_path, err_path)


def stop(proc: Proc) -> int | None:
    """SIGINT (graceful), then SIGKILL of the whole process group (workers included)."""
    popen = proc.popen
    if popen.poll() is None:
        try:
            popen.send_signal(signal.SIGINT)
            popen.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(popen.pid, signal.SIGKILL)  # leftovers of our own session only
    try:
        return popen.wait(timeout=STOP_GRACE)
    except subprocess.TimeoutExpired:
        return None


def run_to_end(workdir: Path, env: dict[str, str], *args: str) -> Proc:
    """Run a command that should end on its own (killed after the deadline if it does not)."""
    proc = start(workdir, env, *args, tag="run")
    try:
        proc.popen.wait(timeout=START_DEADLINE)
    except subprocess.TimeoutExpired:
        stop(proc)
        pytest.fail(f"`tollway {' '.join(args)}` did not end\n{proc.output()}")
    return proc


def wait_until_serving(proc: Proc, base_url: str, workers: int = 1) -> None:
    """Until /api/status answers and, with several `workers`, each of them has said it is ready."""
    deadline = time.monotonic() + START_DEADLINE
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            pytest.fail(f"tollway serve exited with {proc.popen.returncode}\n{proc.output()}")
        try:
            httpx.get(f"{base_url}/api/status", timeout=2)
            if workers < 2 or proc.stdout.count("Worker ready") >= workers:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    pytest.fail(f"tollway serve did not answer /api/status\n{proc.output()}")


@contextmanager
def serving(workdir: Path, env: dict[str, str], *args: str) -> Iterator[tuple[Proc, str]]:
    base_url = f"http://{env['HOST']}:{env['PORT']}"
    proc = start(workdir, env, "serve", *args)
    try:
        wait_until_serving(proc, base_url)
        yield proc, base_url
    except BaseException:
        stop(proc)
        raise
    code = stop(proc)
    assert code == 0, f"SIGINT did not stop tollway serve cleanly (exit {code})\n{proc.output()}"


# ---- the flow every stack runs ------------------------------------------------------------------------

def setup_root(base_url: str, database_type: str) -> None:
    pending = httpx.get(f"{base_url}/api/setup").json()
    assert pending == {"success": True, "message": "",
                       "data": {"status": False, "root_init": False, "database_type": database_type}}
    response = httpx.post(f"{base_url}/api/setup", json={
        "username": "root", "password": ROOT_PASSWORD, "confirmPassword": ROOT_PASSWORD,
    })
    assert response.status_code == 200, response.text
    assert response.json()["success"] is True
    done = httpx.get(f"{base_url}/api/setup").json()["data"]
    assert done["status"] is True
    assert httpx.get(f"{base_url}/api/status").json()["data"]["setup"] is True


def login(client: httpx.Client, username: str = "root", password: str = ROOT_PASSWORD) -> int:
    response = client.post("/api/user/login", json={"username": username, "password": password})
    assert response.status_code == 200, response.text
    assert "session" in response.cookies
    user_id: int = response.json()["data"]["id"]
    return user_id


def self_with_session(client: httpx.Client, user_id: int) -> None:
    without_header = client.get("/api/user/self")
    assert without_header.status_code == 401
    response = client.get("/api/user/self", headers={"New-Api-User": str(user_id)})
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["id"] == user_id and data["username"] == "root" and data["role"] == 100
    assert "password" not in data


def access_token(client: httpx.Client, user_id: int) -> str:
    response = client.get("/api/user/token", headers={"New-Api-User": str(user_id)})
    assert response.status_code == 200, response.text
    token: str = response.json()["data"]
    assert isinstance(token, str) and len(token) >= 20
    return token


def self_with_token(base_url: str, user_id: int, token: str) -> int:
    """`GET /api/user/self` with `Authorization: Bearer` and no cookie; returns the status code."""
    response = httpx.get(f"{base_url}/api/user/self",
                         headers={"Authorization": f"Bearer {token}", "New-Api-User": str(user_id)})
    if response.status_code == 200:
        assert response.json()["data"]["id"] == user_id
    return response.status_code


def the_flow(base_url: str, database_type: str) -> tuple[int, str]:
    """Setup, login with the cookie, self, access token, self with the token; returns (root id, token)."""
    setup_root(base_url, database_type)
    with httpx.Client(base_url=base_url, timeout=20) as client:
        user_id = login(client)
        self_with_session(client, user_id)
        token = access_token(client, user_id)
    assert self_with_token(base_url, user_id, token) == 200
    return user_id, token


# ---- embedded mode ------------------------------------------------------------------------------------

def test_embedded_serve_setup_login_token_and_secret_reuse(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    port = free_port()
    env = clean_env(DATA_DIR=str(data_dir), HOST="127.0.0.1", PORT=str(port))

    with serving(tmp_path, env) as (proc, base_url):
        user_id, token = the_flow(base_url, "sqlite")
        assert f"http://127.0.0.1:{port}" in proc.stdout
        assert "embedded" in proc.stdout
        assert "Setup pending" in proc.stdout

    secret_path = data_dir / "secret_key"
    assert secret_path.is_file()
    assert stat.S_IMODE(secret_path.stat().st_mode) == 0o600
    assert (data_dir / "tollway.db").is_file()
    with sqlite3.connect(data_dir / "tollway.db") as conn:  # sessions live in SQL without Redis
        assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] >= 1
    secret = secret_path.read_text(encoding="utf-8")

    with serving(tmp_path, env) as (proc, base_url):
        assert "Setup complete" in proc.stdout
        # The token's digest is keyed by the secret: it still works only if the same secret was reused.
        assert self_with_token(base_url, user_id, token) == 200
        assert self_with_token(base_url, user_id, token + "x") == 401
    assert secret_path.read_text(encoding="utf-8") == secret


# ---- production shape: MariaDB + Redis, two workers ---------------------------------------------------

def _count_sql_sessions(url: str) -> int:
    async def count() -> int:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as conn:
                return int((await conn.execute(text("SELECT count(*) FROM sessions"))).scalar_one())
        finally:
            await engine.dispose()

    return run_blocking(count())


async def _redis_keys(prefix: str) -> list[str]:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        return [k async for k in client.scan_iter(match=f"{prefix}*", count=1000)]
    finally:
        await client.aclose()


async def _logins_then_self(base_url: str, n: int) -> list[tuple[int, int | None]]:
    """`n` concurrent callers, each logging in with its own cookie jar and then reading /api/user/self."""

    async def one() -> tuple[int, int | None]:
        async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
            response = await client.post("/api/user/login",
                                         json={"username": "root", "password": ROOT_PASSWORD})
            if response.status_code != 200:
                return response.status_code, None
            user_id = response.json()["data"]["id"]
            me = await client.get("/api/user/self", headers={"New-Api-User": str(user_id)})
            return response.status_code, me.status_code

    return list(await asyncio.gather(*(one() for _ in range(n))))


def test_two_workers_on_mariadb_and_redis(tmp_path: Path) -> None:
    try:
        run_blocking(redis_ping())
    except Exception as exc:
        unavailable("redis", exc)
    try:
        db_url = create_database("mariadb")
    except Exception as exc:
        unavailable("mariadb", exc)
        raise
    prefix = f"twtest:e2e:{secrets.token_hex(4)}:"
    critical_limit = 30
    env = clean_env(
        DATABASE_URL=db_url, REDIS_URL=REDIS_URL, REDIS_KEY_PREFIX=prefix,
        SECRET_KEY=secrets.token_hex(32), DATA_DIR=str(tmp_path / "data"), HOST="127.0.0.1",
        PORT=str(free_port()), GLOBAL_API_RATE_LIMIT="0",
        # An emission interval of 10^8 ms: nothing refills while the test runs, so counts are exact.
        CRITICAL_RATE_LIMIT=str(critical_limit), CRITICAL_RATE_LIMIT_DURATION="3000000",
    )
    try:
        with serving(tmp_path, env, "--workers", "2") as (proc, base_url):
            assert "2 worker(s)" in proc.stdout
            assert "Setup pending" in proc.stdout
            user_id, token = the_flow(base_url, "mysql")  # 2 critical requests: setup, login

            # 20 more: 22 of 30. In two waves of 10: at most 10 password checks per (account, client IP)
            # may be under way or failed at once (the lockout counts before it checks); a success clears it.
            results = [r for _ in range(2) for r in asyncio.run(_logins_then_self(base_url, 10))]
            assert results == [(200, 200)] * 20

            # Sessions are in Redis, not in SQL.
            keys = asyncio.run(_redis_keys(prefix))
            assert sum(1 for k in keys if k.startswith(f"{prefix}session:") and ":user:" not in k) >= 21
            assert _count_sql_sessions(db_url) == 0

            # Both workers count against one shared limit: exactly the 8 units left are admitted.
            statuses = sorted(status for status, _ in asyncio.run(_logins_then_self(base_url, 20)))
            assert statuses == [200] * (critical_limit - 22) + [429] * (20 - (critical_limit - 22))

            assert self_with_token(base_url, user_id, token) == 200
    finally:
        run_blocking(redis_purge(prefix))
        drop_database("mariadb", db_url)


# ---- start-up refusals and `tollway setup` --------------------------------------------------------------

def _one_line_refusal(proc: Proc, needle: str) -> None:
    assert proc.popen.returncode not in (0, None), proc.output()
    assert "Traceback" not in proc.stderr, proc.output()
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert any(needle in line for line in lines), proc.output()
    assert "listening" not in proc.stdout, proc.output()


def test_startup_refusals_and_cli_setup(tmp_path: Path) -> None:
    base = clean_env(DATA_DIR=str(tmp_path / "data"), HOST="127.0.0.1", PORT=str(free_port()))

    no_redis = run_to_end(tmp_path, base, "serve", "--workers", "2")
    _one_line_refusal(no_redis, "REDIS_URL")
    assert len([line for line in no_redis.stderr.splitlines() if line.strip()]) == 1, no_redis.output()

    unreachable = run_to_end(tmp_path, {
        **base, "DATABASE_URL": "mysql+aiomysql://root@127.0.0.1:1/x", "SECRET_KEY": secrets.token_hex(32),
    }, "serve")
    _one_line_refusal(unreachable, "cannot connect to the database")

    created = run_to_end(tmp_path, base, "setup", "--username", "root", "--password", ROOT_PASSWORD)
    assert created.popen.returncode == 0, created.output()
    with serving(tmp_path, base) as (proc, base_url):
        assert "Setup complete" in proc.stdout
        assert "Setup pending" not in proc.stdout
        assert httpx.get(f"{base_url}/api/setup").json()["data"]["status"] is True
        again = httpx.post(f"{base_url}/api/setup", json={
            "username": "other", "password": ROOT_PASSWORD, "confirmPassword": ROOT_PASSWORD,
        })
        assert again.status_code == 409
        with httpx.Client(base_url=base_url, timeout=20) as client:
            self_with_session(client, login(client))
