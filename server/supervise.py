"""Worker supervision for `tollway serve --workers N`: a worker that dies is started again.

Sanic's worker manager notices that a worker process died (its state becomes FAILED, or COMPLETED for a
zero exit status) but never replaces it, so after a `kill -9` or an out-of-memory kill the server went
on with one worker fewer, silently. `install(app)` runs a small supervisor thread in the main process:

- it watches the server workers' states as the manager records them; the manager marks a worker dead
  only once every worker has started (a worker that fails during the very first start-up still stops
  the whole server, as Sanic decides);
- a worker that died while the server is not stopping is logged (a warning with its pid and how it
  ended: exit status or signal) and restarted after a back-off — 0.5 s, doubling on each death up to 30 s,
  back to 0.5 s once the worker stayed up for 60 s — so a worker that cannot start (say the database is
  down) is retried without spinning;
- the restart itself is done by the manager's own loop (the worker's name is sent to its monitor pipe,
  as Sanic's reloader does), never from this thread, so the manager's state is touched by one thread only.

Nothing is supervised with one worker (`--workers 1` serves in a single process; run it under systemd,
Docker's restart policy or similar).

A stop is one signal's work, wherever it lands. A terminal's Ctrl-C, and systemd's default stop, signal
every process of the server at once, not only the main one:

- `protect_state_manager()`: Sanic keeps its workers' states in a `multiprocessing` manager process; a
  SIGTERM sent to the whole group killed it, and the main process then failed on its next state update
  (tracebacks, exit status 1). Its process now ignores SIGINT and SIGTERM; Sanic ends it after the workers;
- `stop_once(app)`, in every worker: the first SIGINT or SIGTERM starts the graceful stop, later ones are
  ignored. A worker got the group's signal and, a moment later, the main process's own SIGTERM; Sanic had
  by then put the default handlers back, so the second signal killed the worker in the middle of its
  grace (a SIGINT: a KeyboardInterrupt inside the shutdown, and aiosqlite's "Event loop is closed"). A
  second signal to the main process still kills the workers at once (Sanic's "Shutdown interrupted").

`Helper` supervises a helper process that `tollway serve` starts beside its workers, with one worker or
many: the quota sync in Redis mode (`tollway quota-sync`, so that its SQL work never runs on a serving
event loop). It is started in its own session (a terminal's Ctrl-C goes to the server, which stops it),
restarted with the same back-off when it dies, asked to stop with SIGTERM (the sync drains what is queued
first), and it exits by itself when the server's main process is gone (`TOLLWAY_PARENT_PID`).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from multiprocessing.managers import SyncManager
from types import FrameType
from typing import Any

from sanic import Sanic

from server import metrics
from server.web.sanic_internals import (
    SERVER_WORKER_PREFIX,
    ProcessState,
    WorkerManager,
    WorkerProcess,
    replace_state_manager,
)

log = logging.getLogger("tollway.supervisor")

FIRST_DELAY = 0.5
MAX_DELAY = 30.0
STABLE_AFTER = 60.0  # a worker up this long counts as healthy again: its next restart waits FIRST_DELAY
POLL = 0.25
DEAD = (ProcessState.FAILED, ProcessState.COMPLETED)


def next_delay(previous: float, up_for: float) -> float:
    """The wait before restarting a worker that died after `up_for` seconds; `previous` was the last one."""
    if previous <= 0 or up_for >= STABLE_AFTER:
        return FIRST_DELAY
    return min(previous * 2, MAX_DELAY)


def describe_exit(code: int | None) -> str:
    if code is None:
        return "ended"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


@dataclass
class _Watch:
    up_since: float
    delay: float = 0.0
    due: float | None = None  # when a restart is scheduled
    dead_pid: int | None = None  # the pid that died; ignored until the manager has replaced it


class Supervisor:
    def __init__(self, manager: WorkerManager, clock: Callable[[], float] = time.monotonic,
                 gone: Callable[[int], None] | None = None) -> None:
        self.manager = manager
        self.clock = clock
        self.gone = gone  # told the pid of a worker that died (its live metrics are dropped)
        self.stopping = threading.Event()
        self._watches: dict[str, _Watch] = {}
        self._thread: threading.Thread | None = None
        self._shutdown: Callable[[], Any] | None = None  # the manager's signal handler, run by `_run`

    def _servers(self) -> list[WorkerProcess]:
        return [process for worker in list(self.manager.transient.values())
                for process in list(worker.processes)
                if process.name.startswith(SERVER_WORKER_PREFIX)]

    def check(self) -> None:
        """One pass: note started workers, schedule the restart of dead ones, ask for those that are due."""
        now = self.clock()
        for process in self._servers():
            if self.stopping.is_set():
                return
            watch = self._watches.setdefault(process.name, _Watch(up_since=now))
            state = process.state
            if watch.dead_pid is not None:
                if process.pid == watch.dead_pid:
                    continue  # the manager has not handled the restart yet
                watch.dead_pid = None
                watch.up_since = now
                log.info("worker %s restarted (pid %s)", process.name, process.pid)
            if state not in DEAD:
                continue
            if watch.due is None:
                if self.gone is not None and process.pid is not None:
                    self.gone(process.pid)
                watch.delay = next_delay(watch.delay, now - watch.up_since)
                watch.due = now + watch.delay
                log.warning("worker %s (pid %s) %s; restarting it in %.1f s", process.name, process.pid,
                            describe_exit(process.exitcode), watch.delay)
            if now >= watch.due:
                watch.due = None
                watch.dead_pid = process.pid
                self.manager.monitor_publisher.send(process.name)

    def _run(self) -> None:
        while not self.stopping.wait(POLL):
            try:
                self.check()
            except Exception:  # the supervisor must outlive any one bad pass
                log.exception("worker supervision pass failed")
        if self._shutdown is not None:
            self._shutdown()

    def shut_down_here(self, shutdown: Callable[[], Any]) -> bool:
        """Stop supervising and have this thread run `shutdown` (the manager's handler of a shutdown
        signal); False when the thread is not running, and the caller must run it itself."""
        if self._thread is None or not self._thread.is_alive() or self.stopping.is_set():
            self.stopping.set()
            return False
        self._shutdown = shutdown
        self.stopping.set()
        return True

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tollway-supervisor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _stop_first(supervisor: Supervisor, signum: int) -> None:
    """Stop supervising, then let the manager's own handler of `signum` shut the workers down — run by the
    supervisor's thread, not inside the signal handler.

    Sanic's manager polls its workers' states through a multiprocessing proxy many times a second, on the
    main thread. Its handler run inside the signal handler, while the main thread waited for such a reply,
    made its own proxy call on the same connection: it read the pending reply, both calls failed, and
    `tollway serve` exited 1 on SIGINT (seen once in about ten test runs). From the supervisor's thread the
    handler's proxy calls use that thread's own connection, and its stop message reaches the main thread's
    loop through the manager's pipe as before."""
    previous = signal.getsignal(signum)

    def handler(sig: int, frame: FrameType | None) -> Any:
        if not callable(previous):
            supervisor.stopping.set()
            return None
        if supervisor.shut_down_here(lambda: previous(sig, None)):
            return None
        return previous(sig, frame)  # a second signal (or no supervisor thread): as the manager does

    signal.signal(signum, handler)


def install(app: Sanic[Any, Any]) -> None:
    """Supervise the workers of `app` while Sanic's multi-process manager runs (main process only)."""
    running: list[Supervisor] = []

    @app.main_process_ready
    def start(app: Sanic[Any, Any]) -> None:
        directory = app.ctx.config.metrics_dir
        supervisor = Supervisor(app.manager, gone=partial(metrics.process_gone, directory=directory))
        for signum in (signal.SIGINT, signal.SIGTERM):
            _stop_first(supervisor, signum)
        supervisor.start()
        running.append(supervisor)

    @app.main_process_stop
    def stop(app: Sanic[Any, Any]) -> None:
        while running:
            running.pop().stop()


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _ignore_stop_signals() -> None:
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def _state_manager() -> SyncManager:
    """`multiprocessing.Manager()`, whose process ignores SIGINT and SIGTERM."""
    manager = SyncManager(ctx=multiprocessing.get_context())
    manager.start(_ignore_stop_signals)
    return manager


def protect_state_manager() -> None:
    """Have Sanic's multi-process server keep its workers' states in `_state_manager()` (main process,
    before `Sanic.serve`)."""
    replace_state_manager(_state_manager)


def _stop_now(app: Sanic[Any, Any], loop: asyncio.AbstractEventLoop) -> None:
    for signum in STOP_SIGNALS:
        _ignore_from_now(loop, signum)
    _stop_when_serving(app, loop)


def _ignore_from_now(loop: asyncio.AbstractEventLoop, signum: int) -> None:
    """Take `signum` from the loop and ignore it (Sanic's later removal then finds nothing to reset).
    Removing the loop's handler puts Python's default back for an instant, and for SIGINT that default
    raises `KeyboardInterrupt`: a second Ctrl-C landing in that instant (the terminal signals the whole
    process group, and the main process forwards its own) broke the worker's stop with a traceback. Once
    the signal is ignored none can be raised, so the step is done again until it ends that way."""
    while True:
        try:
            loop.remove_signal_handler(signum)
            signal.signal(signum, signal.SIG_IGN)
            return
        except KeyboardInterrupt:
            continue


def _stop_when_serving(app: Sanic[Any, Any], loop: asyncio.AbstractEventLoop) -> None:
    """`app.stop()` stops the event loop. Before the worker serves, its start-up steps run the loop until
    each step is done (`run_until_complete`), and a stop then ended that step instead and was lost: the
    worker went on to serve for ever. So the stop waits until the worker serves (`is_running`: the loop's
    last run, `run_forever`)."""
    if app.state.is_running:
        app.stop(terminate=False)
    else:
        loop.call_later(0.01, _stop_when_serving, app, loop)


def _is_server_worker() -> bool:
    """Whether this process is one of Sanic's server workers (not the main process, not a single one)."""
    return os.environ.get("SANIC_WORKER_NAME", "").startswith(SERVER_WORKER_PREFIX)


def stop_once(app: Sanic[Any, Any]) -> None:
    """In each worker of `app`: the first SIGINT or SIGTERM stops it gracefully, later ones are ignored.

    A worker installs its signal handlers only once its start-up listeners ran (Sanic's, then ours, in
    `after_server_start`); a stop signal that came while it was still starting (a group's SIGTERM while
    the supervisor restarted a worker, or the very first start) was lost, and the worker then served on
    while the main process waited for it for ever. So the worker records such a signal from the moment
    its app is built, and stops as soon as it serves (`_stop_when_serving`: a stop during the start-up
    steps themselves was lost too)."""
    early = threading.Event()
    if _is_server_worker():
        for signum in STOP_SIGNALS:
            signal.signal(signum, lambda _signum, _frame: early.set())

    @app.after_server_start
    async def own_stop_signals(app: Sanic[Any, Any]) -> None:
        loop = asyncio.get_running_loop()
        for signum in STOP_SIGNALS:
            loop.add_signal_handler(signum, partial(_stop_now, app, loop))  # replaces Sanic's handler
        if early.is_set():
            _stop_now(app, loop)


PARENT_ENV = "TOLLWAY_PARENT_PID"
"""Set in a helper's environment: the pid of the `tollway serve` process it belongs to."""


class Helper:
    """One helper process (`argv`), restarted after the back-off of `next_delay` whenever it dies."""

    def __init__(self, name: str, argv: Sequence[str], *, grace: float = 30.0,
                 clock: Callable[[], float] = time.monotonic, gone: Callable[[int], None] | None = None
                 ) -> None:
        self.name = name
        self.gone = gone  # told the pid of a helper that died
        self.argv = list(argv)
        self.grace = grace
        self.clock = clock
        self.stopping = threading.Event()
        self.process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def _spawn(self) -> None:
        env = {**os.environ, PARENT_ENV: str(os.getpid())}
        with self._lock:
            if not self.stopping.is_set():
                self.process = subprocess.Popen(self.argv, env=env, start_new_session=True)  # noqa: S603 (our own argv)

    def _run(self) -> None:
        delay, up_since = 0.0, self.clock()
        while not self.stopping.is_set():
            process = self.process
            if process is None or process.poll() is None:
                self.stopping.wait(POLL)
                continue
            if self.stopping.is_set():
                return
            if self.gone is not None:
                self.gone(process.pid)
            delay = next_delay(delay, self.clock() - up_since)
            log.warning("%s (pid %s) %s; restarting it in %.1f s", self.name, process.pid,
                        describe_exit(process.returncode), delay)
            if self.stopping.wait(delay):
                return
            try:
                self._spawn()
            except OSError:
                log.exception("could not start %s", self.name)
            up_since = self.clock()
            if self.process is not None and self.process is not process:
                log.info("%s restarted (pid %s)", self.name, self.process.pid)

    def start(self) -> None:
        self._spawn()
        self._thread = threading.Thread(target=self._run, name=f"tollway-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; idempotent."""
        with self._lock:
            self.stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(self.grace)
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop within %.0f s; killing it", self.name, self.grace)
            process.kill()
            process.wait()
