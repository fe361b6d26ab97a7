"""Find out what stalls a worker's event loop: `tollway` under a watchdog (a diagnostic, never in production).

    python -m scripts.stallwatch --out stalls.jsonl [--threshold-ms 5] -- serve [--port …]

Runs `server.cli.main` with the rest of the arguments in this process (so `serve` with one worker:
`serve_single` serves from this very process) after installing:

- a heartbeat on the worker's event loop (a callback every millisecond), and a thread that watches it:
  when the heartbeat is older than the threshold the loop is stalled, and the thread samples the main
  thread's Python stack every millisecond until the heartbeat comes back; each stall is written with
  its length, the distinct stacks seen (a GIL-holding stall shows the code holding it), and how long
  the main thread was on a CPU and waiting for one meanwhile (/proc schedstat: a stall that is mostly
  run-queue wait is another process taking the core, not our code);
- `gc.callbacks` timing of every collection (generation, ms, objects collected) over half a millisecond,
  and once a second the count and total time of all collections per generation;
- timing of each quota sync batch (`QuotaSync.run_once`: wall ms, entries) and of its SQL transaction
  (`SqlQuotaSink.apply`), so stalls can be put next to them (their `cpu_ms` is the loop thread's CPU
  over that wall time: it includes the calls served meanwhile; `scripts/bench_sync.py` measures the
  sync alone).

Each event is one JSON line with a wall-clock `t`. `summarize(path, offset)` digests the lines written
after `offset` (what `scripts/bench.py --stalls` prints per run). The heartbeat and the watchdog cost
about 1 % CPU; do not read throughput from a watched run.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import gc
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = str(Path(__file__).resolve().parent.parent)
BEAT = 0.001


class Watch:
    def __init__(self, out: Path, threshold_ms: float) -> None:
        self.out = out.open("a", buffering=1)
        self.threshold = threshold_ms / 1000
        self.beat = time.perf_counter()
        self.lock = threading.Lock()
        self.main = threading.main_thread().ident
        self._gc_start = 0.0
        self._gc_written = 0.0
        self._gc_totals: dict[int, list[float]] = {}

    def write(self, kind: str, **fields: Any) -> None:
        with self.lock:
            self.out.write(json.dumps({"t": round(time.time(), 4), "kind": kind, **fields}) + "\n")

    # ---- the heartbeat and the watchdog ---------------------------------------------------------------

    def start_heartbeat(self, loop: asyncio.AbstractEventLoop) -> None:
        def tick() -> None:
            self.beat = time.perf_counter()
            loop.call_later(BEAT, tick)

        tick()
        threading.Thread(target=self._watch, name="stallwatch", daemon=True).start()

    def _schedstat(self) -> tuple[int, int]:
        """(ns on a CPU, ns runnable but waiting for one) of the main thread, from the kernel."""
        try:
            with open(f"/proc/self/task/{threading.main_thread().native_id}/schedstat") as f:
                ran, waited, _ = f.read().split()
            return int(ran), int(waited)
        except (OSError, ValueError):
            return 0, 0

    def _stack(self) -> tuple[str, ...]:
        frame = sys._current_frames().get(self.main or 0)
        out: list[str] = []
        while frame is not None and len(out) < 40:
            code = frame.f_code
            name = code.co_filename.replace(REPO + "/", "")
            out.append(f"{name}:{frame.f_lineno} {code.co_name}")
            frame = frame.f_back
        return tuple(out)

    def _watch(self) -> None:
        on_cpu, waiting = self._schedstat()  # as of the last fresh heartbeat seen (≤ 1 ms before it)
        while True:
            time.sleep(BEAT)
            beat = self.beat
            if time.perf_counter() - beat < self.threshold:
                on_cpu, waiting = self._schedstat()
                continue
            stacks: collections.Counter[tuple[str, ...]] = collections.Counter()
            while self.beat == beat:
                stacks[self._stack()] += 1
                time.sleep(BEAT)
            gap_ms = (self.beat - beat - BEAT) * 1000
            on_cpu_after, waiting_after = self._schedstat()
            self.write("stall", ms=round(gap_ms, 2),
                       # how long the main thread ran, and waited for a CPU, during the stall
                       cpu_ms=round((on_cpu_after - on_cpu) / 1e6, 2),
                       runqueue_ms=round((waiting_after - waiting) / 1e6, 2),
                       stacks=[{"n": n, "frames": list(s)} for s, n in stacks.most_common(4)])

    # ---- gc and the quota sync ---------------------------------------------------------------------------

    def on_gc(self, phase: str, info: dict[str, Any]) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._gc_start = now
            return
        ms = (now - self._gc_start) * 1000
        totals = self._gc_totals.setdefault(info["generation"], [0, 0.0])
        totals[0] += 1
        totals[1] += ms
        if ms >= 0.5:
            self.write("gc", gen=info["generation"], ms=round(ms, 2), collected=info["collected"])
        if now - self._gc_written >= 1.0:  # every collection, however short, once a second
            self._gc_written = now
            self.write("gc-totals", per_gen={g: [n, round(t, 2)] for g, (n, t) in self._gc_totals.items()})
            self._gc_totals.clear()

    def timed(self, kind: str, fn: Callable[..., Any], count: Callable[[Any, tuple[Any, ...]], int]
              ) -> Callable[..., Any]:
        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            start, cpu = time.perf_counter(), time.thread_time()
            result = await fn(*args, **kwargs)
            self.write(kind, ms=round((time.perf_counter() - start) * 1000, 2),
                       cpu_ms=round((time.thread_time() - cpu) * 1000, 2), entries=count(result, args))
            return result

        return wrapper


def install(watch: Watch) -> None:
    import models.quota
    import quota.sync
    import server.app

    gc.callbacks.append(watch.on_gc)
    sync, sink = quota.sync.QuotaSync, models.quota.SqlQuotaSink
    sync.run_once = watch.timed("sync", sync.run_once, lambda r, a: int(r))  # type: ignore[method-assign]
    # the wrapper replaces the class's function: its args are (the sink, partition, entries, …)
    sink.apply = watch.timed("sync-sql", sink.apply, lambda r, a: len(a[2]))  # type: ignore[method-assign]
    create_app = server.app.create_app

    def watched(*args: Any, **kwargs: Any) -> Any:
        app = create_app(*args, **kwargs)

        @app.after_server_start
        async def heartbeat(app: Any) -> None:
            watch.start_heartbeat(asyncio.get_running_loop())

        return app

    server.app.create_app = watched


def summarize(path: Path, offset: int = 0) -> dict[str, Any]:
    """Stalls, collections and sync batches logged after byte `offset` of `path`."""
    stalls: list[float] = []
    culprits: collections.Counter[str] = collections.Counter()
    gcs: dict[int, list[float]] = collections.defaultdict(list)
    syncs: list[tuple[float, float, int]] = []
    all_gc: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    preempted = 0
    with path.open() as f:
        f.seek(offset)
        for line in f:
            event = json.loads(line)
            if event["kind"] == "stall":
                stalls.append(event["ms"])
                preempted += event.get("runqueue_ms", 0.0) > event.get("cpu_ms", 0.0)
                top = event["stacks"][0]["frames"] if event["stacks"] else []
                culprits[_culprit(top)] += 1
            elif event["kind"] == "gc":
                gcs[event["gen"]].append(event["ms"])
            elif event["kind"] == "gc-totals":
                for gen, (n, ms) in event["per_gen"].items():
                    all_gc[gen][0] += n
                    all_gc[gen][1] += ms
            elif event["kind"] == "sync" and event["entries"]:
                syncs.append((event["ms"], event["cpu_ms"], event["entries"]))
    return {
        "stalls": len(stalls), "stall_ms_total": round(sum(stalls), 1),
        "stall_ms_max": max(stalls, default=0.0),
        "over_10ms": sum(s > 10 for s in stalls), "culprits": dict(culprits.most_common(5)),
        "mostly_waiting_for_a_cpu": preempted,
        "gc_over_half_ms": {str(g): {"n": len(v), "ms_max": max(v), "ms_total": round(sum(v), 1)}
                            for g, v in gcs.items()},
        "gc_all": {g: {"n": int(n), "ms_total": round(ms, 1)} for g, (n, ms) in sorted(all_gc.items())},
        "sync_batches": len(syncs),
        "sync_ms_max": max((s[0] for s in syncs), default=0.0),
        "sync_cpu_ms_total": round(sum(s[1] for s in syncs), 1),
        "sync_entries": sum(s[2] for s in syncs),
    }


def _culprit(frames: list[str]) -> str:
    """The innermost frame of our own code, and the innermost frame overall."""
    packages = ("server", "backend", "quota", "models", "core")
    ours = next((f for f in frames if f.split("/", 1)[0] in packages), "?")
    return f"{ours} | {frames[0] if frames else '?'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--threshold-ms", type=float, default=5.0)
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="-- then the tollway arguments")
    args = parser.parse_args()
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    install(Watch(args.out, args.threshold_ms))
    from server.cli import main as tollway

    tollway(rest)


if __name__ == "__main__":
    main()
