"""Every part of Sanic Tollway uses that is not Sanic's public API, in one place.

Sanic's documented API does not cover three things Tollway needs, so these reach into its internals:

- **connection deadlines** (server/web/connections.py): `Connection` subclasses `HttpProtocol` and reads its
  `_http` (the connection's `Http`: its `stage`, a `Stage`, and `request_body`) and `_task` (the handler's
  task) to set a deadline on each stage of a request;
- **restarting a dead worker** (server/supervise.py): the supervisor reads the `WorkerManager`'s `transient`
  processes (`WorkerProcess`: `name`, `state`, a `ProcessState`), asks for a restart through its
  `monitor_publisher`, and tells a server worker by its name (`Worker.WORKER_PREFIX`,
  `WorkerProcess.SERVER_LABEL`);
- **the workers' shared state** (server/supervise.py): Sanic's multi-process server keeps its workers'
  states in a `multiprocessing.Manager()` made by `sanic.mixins.startup.Manager`; `replace_state_manager`
  swaps that factory for one whose process survives a SIGTERM sent to the whole process group;
- **serving** (server/cli.py): `AppLoader` builds the app in each worker;
- **TouchUp, once per process** (tests/harness.py): at an app's start Sanic's TouchUp rewrites `Http`'s
  methods for the app's signals and marks the class `__touched__`; `http_touched_up` tells whether that has
  happened in this process (the test harness then skips redoing it for every app it builds).

They were read against the Sanic release `CHECKED` names: `pyproject.toml` pins Sanic to that minor
version, and tests/test_sanic_internals.py fails when the installed one is another, and when a module other
than this one imports a private part of Sanic. Before moving the pin, read these parts again in the new
release (the attributes above, and `Http.stage`'s values), then change `CHECKED`.
"""

from __future__ import annotations

from collections.abc import Callable
from multiprocessing.managers import SyncManager

import sanic.mixins.startup
from sanic.http import Http, Stage
from sanic.server.protocols.http_protocol import HttpProtocol
from sanic.worker.constants import ProcessState
from sanic.worker.loader import AppLoader
from sanic.worker.manager import WorkerManager
from sanic.worker.process import Worker, WorkerProcess

CHECKED = "25.12"
"""The Sanic release (major.minor) whose internals this module was read against."""

SERVER_WORKER_PREFIX = f"{Worker.WORKER_PREFIX}-{WorkerProcess.SERVER_LABEL}"
"""How the name of a server worker's process starts (`SANIC_WORKER_NAME`, `WorkerProcess.name`)."""

__all__ = ["CHECKED", "SERVER_WORKER_PREFIX", "AppLoader", "HttpProtocol", "ProcessState", "Stage",
           "WorkerManager", "WorkerProcess", "http_touched_up", "replace_state_manager"]


def replace_state_manager(factory: Callable[[], SyncManager]) -> None:
    """Have Sanic's multi-process server keep its workers' states in the manager `factory` makes (call it
    in the main process, before `Sanic.serve`)."""
    sanic.mixins.startup.Manager = factory  # type: ignore[attr-defined]


def http_touched_up() -> bool:
    """Whether Sanic's TouchUp has rewritten `Http`'s methods in this process (it does so on the class)."""
    return bool(getattr(Http, "__touched__", False))
