"""The `tollway` command: `serve`, `migrate`, `setup`.

Start-up problems (bad configuration, database or Redis unreachable, the port taken) end the process with
one readable line on stderr and a non-zero status, never a traceback; with `LOG_FORMAT=json` that line is a
JSON log line, a configuration error's too (unless `LOG_FORMAT` itself is the invalid setting). `serve`
binds its port before it does anything else (a port in use is that one line, nothing before it), and hands
that socket to Sanic, so "listening on" is printed only once it is true.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import ipaddress
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.base import BackendUnavailable
from core import numerals
from models.db import Database, DatabaseUnavailable
from models.deployment import deployment_id
from models.migrate import upgrade
from quota.backends.redis_quota import RedisQuotaStore
from quota.store import SetupRefused
from server.clock import Clock
from server.config import Config, ConfigError, load
from server.logging_setup import announce
from server.redis_client import redis_backend

if TYPE_CHECKING:
    from sanic import Sanic

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


class StartupError(RuntimeError):
    """A readable reason the service cannot start."""


def _fail(message: str, code: int = 1, log_format: str = "text") -> None:
    """End the process with one line on stderr (a JSON log line once `LOG_FORMAT=json` is known)."""
    announce(log_format, f"tollway: {message}", error=True)
    raise SystemExit(code)


async def _migrate(config: Config) -> None:
    """The main database, and a separate log database (`LOG_DATABASE_URL`) with the `logs` table alone."""
    targets = [(config.database_url, False)]
    if config.separate_logs_url:
        targets.append((config.separate_logs_url, True))
    for url, logs in targets:
        db = Database(url, pool_size=1)
        try:
            await db.check()
            await upgrade(db.engine, logs=logs)
        except DatabaseUnavailable as exc:
            raise StartupError(str(exc)) from None
        finally:
            await db.dispose()


async def _check_redis(config: Config) -> None:
    """Redis reachable, and its quota store one this deployment may use (server/kind, version, the
    deployment id of the database, QUOTA_PARTITIONS), or refuse to start."""
    backend = redis_backend(config)
    if backend is None:
        return
    db = Database(config.database_url, pool_size=1)
    try:
        deployment = await deployment_id(db, Clock().now_s())
        await RedisQuotaStore(backend).setup(deployment)
    except DatabaseUnavailable as exc:
        raise StartupError(str(exc)) from None
    except BackendUnavailable:
        raise StartupError(f"cannot connect to Redis at {config.redis_setting} (is it running?)") from None
    except SetupRefused as exc:
        raise StartupError(str(exc)) from None
    finally:
        await backend.close()
        await db.dispose()


async def _setup_pending(config: Config) -> bool:
    from models.system import SetupRepository
    from models.users import UserRepository

    db = Database(config.database_url, pool_size=1)
    try:
        async with db.transaction() as tx:
            return not (await SetupRepository(tx).done() or await UserRepository(tx).root_exists())
    finally:
        await db.dispose()


async def _prepare(config: Config) -> bool:
    await _migrate(config)
    await _check_redis(config)
    return await _setup_pending(config)


LISTEN_BACKLOG = 100  # Sanic's default


def _bind(config: Config) -> socket.socket:
    """The socket of `tollway serve`, bound (not yet listening) before anything else is done or printed,
    with the options Sanic's own `bind_socket` sets."""
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(config.host).version == 6 else socket.AF_INET
    except ValueError:  # a host name
        family = socket.AF_INET
    sock = socket.socket(family)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((config.host, config.port))
    except OSError as exc:
        sock.close()
        raise StartupError(f"cannot listen on {config.host}:{config.port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)  # the workers serve on it
    return sock


def _settle_heap() -> None:
    """Once a worker has started: collect, then freeze what start-up left (modules, the app, the routing
    table, caches) out of the collector's sight. Without it every full collection walked that whole
    heap again and held the event loop for tens of milliseconds
    (docs/PERFORMANCE.md#figures-behind-the-code)."""
    gc.collect()
    gc.freeze()


def _serving_app(config: Config) -> Sanic[Any, Any]:
    """`create_app` for `tollway serve` (built in each worker process): plus `_settle_heap` once the
    worker serves, and the first stop signal only (`server/supervise.py` `stop_once`)."""
    from server.app import create_app
    from server.logging_setup import configure
    from server.supervise import stop_once

    app = create_app(config)
    stop_once(app)
    configure(config.log_level, config.log_format)  # after Sanic set up its own loggers in this worker

    @app.after_server_start
    async def settle_heap(app: Sanic[Any, Any]) -> None:
        _settle_heap()

    config.faults.delay_start(app)  # the stop test's slow start-up (server/faults.py); nothing otherwise

    return app


def _metrics_dir() -> Path:
    """A fresh multiprocess directory for prometheus-client, in this process's environment before anything
    imports it: the workers and the quota-sync process inherit it (server/metrics/)."""
    directory = Path(tempfile.mkdtemp(prefix="tollway-metrics-"))
    os.environ[MULTIPROC_ENV] = str(directory)
    return directory


def _serve(config: Config) -> None:
    metrics_dir = _metrics_dir()
    try:
        _serve_with(replace(config, metrics_dir=metrics_dir))
    finally:
        shutil.rmtree(metrics_dir, ignore_errors=True)


def _serve_with(config: Config) -> None:
    from sanic import Sanic

    from server import metrics
    from server.supervise import Helper, install, protect_state_manager
    from server.web.connections import Connection
    from server.web.sanic_internals import AppLoader

    listener = _bind(config)
    try:
        pending = asyncio.run(_prepare(config))
    except BaseException:
        listener.close()
        raise
    listener.listen(LISTEN_BACKLOG)
    mode = "embedded (SQLite, in-process engine)" if config.embedded else "Redis + " + config.database_kind
    url = f"http://{config.host}:{listener.getsockname()[1]}"  # the port bound (PORT=0: a free one)
    announce(config.log_format, f"Tollway listening on {url} — {mode}, {config.workers} worker(s)")
    announce(config.log_format, "Setup pending: open the URL or POST /api/setup to create the root user."
             if pending else "Setup complete.")

    sync: Helper | None = None
    if not config.embedded and config.quota_sync_in_server and config.quota_sync_process:
        config = replace(config, quota_sync_in_server=False)  # the workers leave it to the process below
        sync = Helper("quota sync", [sys.executable, "-m", "server.cli", "quota-sync"],
                      gone=partial(metrics.process_gone, directory=config.metrics_dir))
    loader = AppLoader(factory=partial(_serving_app, config))
    app = loader.load()
    single = config.workers == 1
    app.prepare(sock=listener, workers=config.workers, single_process=single, protocol=Connection,
                motd=False, access_log=False)
    if sync is not None:
        app.main_process_stop(lambda app: sync.stop())  # before Sanic's own exit on a killed server
        sync.start()  # the quota sync in its own process, restarted if it dies (server/supervise.py)
    try:
        if single:
            Sanic.serve_single(primary=app)
        else:
            install(app)  # a worker that dies is restarted (Sanic's manager would leave it dead)
            protect_state_manager()  # a SIGTERM to the whole process group must not kill it
            Sanic.serve(primary=app, app_loader=loader)
    finally:
        if sync is not None:
            sync.stop()


async def _run_setup(config: Config, username: str, password: str) -> None:
    from server.container import build_services
    from server.context import State

    await _migrate(config)
    state = await State.open(config)
    try:
        await build_services(state).system.run_setup(username.strip(), password, password, self_use=False,
                                                     demo=False)
    finally:
        await state.close()


def _whole(text: str) -> int:
    """A whole-number argument, in ASCII digits only (core/numerals.py), as the settings are read."""
    try:
        return numerals.whole(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tollway", description="Tollway AI gateway")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--workers", type=_whole,
                       help="worker processes (more than 1 needs REDIS_URL or REDIS_CLUSTER_NODES)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=_whole)
    sub.add_parser("migrate", help="bring the database schema up to date")
    sync = sub.add_parser("quota-sync", help="run the quota sync worker (Redis → SQL) as its own process")
    sync.add_argument("--once", action="store_true", help="sync what is queued, then exit")
    setup = sub.add_parser("setup", help="create the root user without the web UI")
    setup.add_argument("--username", required=True)
    setup.add_argument("--password", required=True)
    args = parser.parse_args(argv)

    try:
        config = load()
        if args.command == "serve":
            if args.workers is not None and args.workers > 1 and config.embedded:
                _fail("--workers > 1 needs REDIS_URL or REDIS_CLUSTER_NODES: embedded mode runs exactly one "
                      "process", 2, config.log_format)
            config = replace(config, workers=args.workers or config.workers,
                             host=args.host or config.host,
                             port=args.port if args.port is not None else config.port)
    except ConfigError as exc:
        _fail(str(exc), 2, exc.log_format)  # LOG_FORMAT=json: one JSON line, even for a broken setting
        return
    from server.logging_setup import configure

    configure(config.log_level, config.log_format)

    try:
        if args.command == "serve":
            _serve(config)
        elif args.command == "quota-sync":
            from server.quota_sync import run

            try:
                asyncio.run(run(config, once=args.once))
            except (ConfigError, DatabaseUnavailable) as exc:
                _fail(str(exc), 2, config.log_format)
        elif args.command == "migrate":
            asyncio.run(_migrate(config))
            print("database is up to date")
        elif args.command == "setup":
            asyncio.run(_run_setup(config, args.username, args.password))
            print(f"root user {args.username.strip()!r} created")
    except StartupError as exc:
        _fail(str(exc), 1, config.log_format)
    except Exception as exc:
        from server.errors import TollwayError

        if isinstance(exc, TollwayError):
            _fail(exc.message, 1, config.log_format)
        raise


if __name__ == "__main__":
    main()
