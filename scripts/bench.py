"""The end-to-end benchmark of the model-call hot path: Tollway against the floors it is measured by.

    python -m scripts.bench [--duration 5] [--rounds 3] [--concurrency 1,16,64] [--setups …]
                            [--scenarios moderation,g1] [--profile DIR] [--stalls] [--out F]

One fast upstream serves every set-up: nginx answering fixed moderation, generateContent and streaming
replies with `return 200` (a minimal Python server when nginx is not installed). Against it, side by
side and with every hot-path feature on (key auth, reservation, channel pick, settlement, usage record,
the quota sync running):

    direct          the upstream itself
    nginx           nginx `proxy_pass` with upstream keep-alive, 1 worker (the floor of any proxy)
    bare            scripts/bare_relay.py: Sanic + one pooled aiohttp session, a fixed key check and
                    nothing else (the floor of a Python relay on our stack)
    embedded        `tollway serve`, SQLite and the in-process engine
    redis-1w        `tollway serve`, MariaDB + Redis, 1 worker (the quota sync in the worker)
    redis-1w-sync   the same with QUOTA_SYNC_IN_SERVER=false and `tollway quota-sync` as its own process
                    (not in the default list)
    redis-2w        MariaDB + Redis, 2 workers

Load comes from `wrk` with a Lua POST script (the Debian package), one connection per concurrent caller.
On this 2-core machine the set-up under test is pinned to CPU 0 and wrk plus the upstream (and the
separate sync process) to CPU 1 with `taskset` (the 2-worker set-up is not pinned: it needs both cores,
and shares them with wrk). Each figure is the median of `--rounds` interleaved runs. For every set-up that
is a process of ours, the CPU time its whole process tree used during the run (utime + stime from /proc)
is divided by the calls served: CPU µs per call, the figure that noise from other load on the machine
disturbs least. The streamed G1 call is measured apart: time to first byte, sequentially.

`--profile DIR` records each Tollway (and bare relay) run with py-spy (speedscope files, one per set-up,
scenario, concurrency and round, 250 Hz; needs `py-spy`, the `bench` extra); `python -m
scripts.profile_budget FILE` turns one into CPU µs per step of a call. `--stalls` starts the
single-process set-ups under `scripts/stallwatch.py` and reports, per run, the event-loop stalls over
5 ms and what was running. With more than one process per set-up (the separate quota sync) the CPU is
also reported per process.

It ends by checking conservation on every Tollway set-up: once the quota sync has moved everything, the
live balance of the user and of the key equals the initial one minus the sum of the consume logs in SQL,
and the user's SQL balance equals the live one (the 2-worker set-up included).

Prints a table and writes `bench-results.json` (ratios to direct, nginx and bare included).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from scripts.bench_env import (
    BASELINES,
    GENERATE_BODY,
    RATE_LIMITED,
    SCENARIOS,
    SETUPS,
    TTS,
    Fixture,
    Ledger,
    Proc,
    cmdline,
    conserved,
    cpu_used,
    fixed_locations,
    free_port,
    ledger,
    mariadb,
    mariadb_balance,
    mariadb_database,
    pinned,
    prepare_tollway,
    proxy_locations,
    purge_redis,
    spawn,
    sqlite_balance,
    start_bare,
    start_nginx,
    start_python_upstream,
    tollway_env,
    upstream_locations,
    wait_for,
    worker_rss,
)

DEFAULT_SETUPS = tuple(s for s in SETUPS if s != "redis-1w-sync")
BY_PROCESS = "cpu_us_per_call_by_process"



# ---- load ------------------------------------------------------------------------------------------------

@dataclass
class Result:
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    calls: int
    cpu_s: float | None = None  # CPU time the set-up's processes used during the run
    cpu_by_proc: dict[str, float] = field(default_factory=dict)  # the same per started process (tree)
    stalls: dict[str, Any] | None = None


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text.strip())
    if not m:
        raise ValueError(f"cannot read wrk latency {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def wrk(url: str, key: str, body: str, concurrency: int, duration: float, workdir: Path) -> Result:
    script = workdir / f"post-{abs(hash(body)) % 10**8}.lua"
    script.write_text(f'wrk.method = "POST"\nwrk.body = {json.dumps(body)}\n'
                      f'wrk.headers["Content-Type"] = "application/json"\n'
                      f'wrk.headers["Authorization"] = "Bearer {key}"\n'
                      f'wrk.headers["x-goog-api-key"] = "{key}"\n')
    threads = 1 if concurrency < 16 else 2 if (os.cpu_count() or 1) > 2 else 1
    argv = pinned("1", ["wrk", "-t", str(threads), "-c", str(concurrency), "-d", f"{duration:g}s",
                        "--latency", "-s", str(script), url])
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = _ms(re.search(r"\s50%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    p99 = _ms(re.search(r"\s99%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    calls = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    return Result(rps, p50, p99, errors + (int(non2xx.group(1)) if non2xx else 0), calls)


async def first_byte_ms(url: str, key: str, n: int, body: str = GENERATE_BODY) -> list[float]:
    """Sequential streamed calls (G1 by default); time from sending to the first body byte. The key goes in
    both a Gemini and an OpenAI header, as with wrk."""
    out = []
    async with httpx.AsyncClient(timeout=30) as client:
        for _ in range(n):
            start = time.perf_counter()
            headers = {"x-goog-api-key": key, "Authorization": f"Bearer {key}",
                       "Content-Type": "application/json"}
            async with client.stream("POST", url, content=body, headers=headers) as r:
                assert r.status_code == 200, r.status_code
                first: float | None = None
                async for _chunk in r.aiter_raw():
                    if first is None:
                        first = (time.perf_counter() - start) * 1000
                out.append(first or 0.0)
    return out


# ---- orchestration ----------------------------------------------------------------------------------------

@dataclass
class Target:
    name: str
    base: str
    key: str = "bench"
    procs: list[Proc] = field(default_factory=list)
    stall_log: Path | None = None
    sql_balance: Callable[[int], int] | None = None  # the root user's durable balance
    initial: Ledger | None = None  # balances and Σ logs before any call

    @property
    def tollway(self) -> bool:
        return self.name not in BASELINES


def py_spy() -> str:
    """py-spy on the PATH, else the one installed beside this Python (the `bench` extra)."""
    return shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))


def measure(target: Target, path: str, body: str, concurrency: int, args: argparse.Namespace,
            workdir: Path, label: str) -> Result:
    """One wrk run against `target`, with the CPU its processes used (and a profile, stalls if asked)."""
    profiler: subprocess.Popen[bytes] | None = None
    if args.profile and target.procs and target.name != "nginx":
        out = Path(args.profile) / f"{label}.speedscope.json"
        pids = [str(pid) for pid in target.procs[0].pids()]
        profiler = subprocess.Popen(
            [py_spy(), "record", "-r", "250", *(["--native"] if args.native else []),
             "--format", "speedscope", "-o", str(out), "-d", str(int(args.duration + 1)), "--subprocesses",
             "-p", pids[0]],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)  # let it attach
    mark = target.stall_log.stat().st_size if target.stall_log and target.stall_log.exists() else 0
    before = {proc.name: proc.cpu_seconds() for proc in target.procs}
    result = wrk(target.base + path, target.key, body, concurrency, args.duration, workdir)
    if target.procs:
        for proc in target.procs:
            after = proc.cpu_seconds()
            sync = {pid for pid in after if "quota-sync" in cmdline(pid)} if proc.name != "nginx" else set()
            if sync and not proc.name.endswith("quota-sync"):  # `tollway serve`'s own sync process
                result.cpu_by_proc[proc.name] = cpu_used(
                    before[proc.name], {pid: t for pid, t in after.items() if pid not in sync})
                result.cpu_by_proc[f"{proc.name} (its quota sync)"] = cpu_used(
                    before[proc.name], {pid: t for pid, t in after.items() if pid in sync})
            else:
                result.cpu_by_proc[proc.name] = cpu_used(before[proc.name], after)
        result.cpu_s = sum(result.cpu_by_proc.values())
    if target.stall_log is not None:
        from scripts.stallwatch import summarize

        result.stalls = summarize(target.stall_log, mark)
    if profiler is not None:
        profiler.wait(timeout=args.duration + 30)
        runs = Path(args.profile) / "runs.json"
        known = json.loads(runs.read_text()) if runs.exists() else {}
        known[label] = {"calls": result.calls, "rps": result.rps, "p99_ms": result.p99_ms,
                        "cpu_us_per_call": round(1e6 * (result.cpu_s or 0.0) / max(1, result.calls))}
        runs.write_text(json.dumps(known, indent=1))
    return result


@contextlib.contextmanager
def environment(args: argparse.Namespace, workdir: Path, fixture: Fixture | None = None
                ) -> Iterator[dict[str, Target]]:
    """The set-ups of `args.setups` (and `direct`), started and prepared; `fixture` adds upstream replies,
    channels and options (`scripts/bench_chat.py`)."""
    fixture = fixture or Fixture()
    procs: list[Proc] = []
    cleanups: list[Any] = []
    targets: dict[str, Target] = {}
    try:
        up_port = free_port()
        if shutil.which("nginx"):
            locations = upstream_locations() + fixed_locations(workdir, fixture.replies)
            procs.append(start_nginx(workdir, up_port, locations, "1"))
            upstream_kind = "nginx"
        else:
            procs.append(start_python_upstream(workdir, up_port, fixture.replies))
            upstream_kind = "python"
        upstream = f"http://127.0.0.1:{up_port}"
        time.sleep(0.3)
        targets["direct"] = Target("direct", upstream)
        if "nginx" in args.setups and shutil.which("nginx"):
            port = free_port()
            proc = start_nginx(workdir, port, proxy_locations(up_port), "0")
            procs.append(proc)
            targets["nginx"] = Target("nginx", f"http://127.0.0.1:{port}", procs=[proc])
        if "bare" in args.setups:
            port, key = free_port(), secrets.token_hex(16)
            proc = start_bare(workdir, port, upstream, key)
            procs.append(proc)
            wait_for(f"http://127.0.0.1:{port}/api/status")
            targets["bare"] = Target("bare", f"http://127.0.0.1:{port}", key, [proc])
        tollways: list[tuple[str, dict[str, str], list[str], str | None, Callable[[int], int]]] = []
        if "embedded" in args.setups:
            embedded_db = workdir / "data-embedded" / "tollway.db"
            tollways.append(("embedded", {}, [], "0", sqlite_balance(embedded_db)))
        secret = secrets.token_hex(32)
        redis_setups = (("redis-1w", "1", "0"), ("redis-1w-sync", "1", "0"), ("redis-2w", "2", None))
        for setup, workers, cpu in redis_setups:
            if setup not in args.setups:
                continue
            db_name, db_url = mariadb_database()
            prefix = f"bench:{secrets.token_hex(3)}:"
            cleanups += [lambda n=db_name: mariadb(f"DROP DATABASE IF EXISTS {n}", check=False),
                         lambda p=prefix: purge_redis(p)]
            extra = {"DATABASE_URL": db_url, "REDIS_URL": "redis://127.0.0.1:6379/0",
                     "REDIS_KEY_PREFIX": prefix, "SECRET_KEY": secret}
            if setup == "redis-1w-sync":
                extra["QUOTA_SYNC_IN_SERVER"] = "false"
            tollways.append((setup, extra, ["--workers", workers], cpu, mariadb_balance(db_name)))
        for setup, extra, flags, cpu, sql_balance in tollways:
            port = free_port()
            env = tollway_env(workdir, port, extra)
            if setup == "embedded":
                env["DATA_DIR"] = str(workdir / "data-embedded")
            stall_log: Path | None = None
            entry = ["-m", "server.cli"]
            if args.stalls and cpu is not None:
                stall_log = workdir / f"stalls-{setup}.jsonl"
                entry = ["-m", "scripts.stallwatch", "--out", str(stall_log), "--"]
            proc = spawn(setup, pinned(cpu, [sys.executable, *entry, "serve", *flags]), workdir, env)
            procs.append(proc)
            target_procs = [proc]
            if setup == "redis-1w-sync":
                argv = pinned("1", [sys.executable, "-m", "server.cli", "quota-sync"])
                sync = spawn(f"{setup}-quota-sync", argv, workdir, env)
                procs.append(sync)
                target_procs.append(sync)
            base = f"http://127.0.0.1:{port}"
            wait_for(f"{base}/api/status")
            options = {**(RATE_LIMITED if args.rate_limit else {}), **fixture.options}
            key = prepare_tollway(base, upstream, options, fixture.channels)
            targets[setup] = Target(setup, base, key, target_procs, stall_log, sql_balance,
                                    ledger(base, sql_balance))
        print(f"upstream: {upstream_kind} on {upstream}; set-ups: {', '.join(targets)}", flush=True)
        yield targets
    finally:
        for proc in reversed(procs):
            proc.stop()
        for cleanup in cleanups:
            cleanup()


def median_cell(runs: list[Result]) -> dict[str, Any]:
    cell: dict[str, Any] = {
        "rps": statistics.median(r.rps for r in runs),
        "p50_ms": statistics.median(r.p50_ms for r in runs),
        "p99_ms": statistics.median(r.p99_ms for r in runs),
        "errors": sum(r.errors for r in runs),
    }
    calls = sum(r.calls for r in runs)
    if all(r.cpu_s is not None for r in runs) and calls:
        cell["cpu_us_per_call"] = round(1e6 * sum(r.cpu_s or 0.0 for r in runs) / calls)
        names = {name for r in runs for name in r.cpu_by_proc}
        if len(names) > 1:  # e.g. the worker and the quota sync process
            cell["cpu_us_per_call_by_process"] = {
                name: round(1e6 * sum(r.cpu_by_proc.get(name, 0.0) for r in runs) / calls)
                for name in sorted(names)}
    if any(r.stalls for r in runs):
        cell["stalls"] = [r.stalls for r in runs]
    return cell


def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="tollway-bench-"))
    results: dict[str, Any] = {"concurrency": args.concurrency, "duration_s": args.duration,
                               "rounds": args.rounds, "cpus": os.cpu_count(), "runs": {}}
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    scenarios = {name: SCENARIOS[name] for name in args.scenarios}
    with environment(args, workdir) as targets:
        for target in targets.values():  # warm-up: caches, pools, loaded balances
            for path, body in scenarios.values():
                wrk(target.base + path, target.key, body, 4, 1, workdir)
        raw: dict[tuple[str, str, int], list[Result]] = {}
        for round_no in range(args.rounds):
            for scenario, (path, body) in scenarios.items():
                for concurrency in args.concurrency:
                    for target in targets.values():  # interleaved: one run of each set-up per round
                        label = f"{target.name}-{scenario}-c{concurrency}-r{round_no}"
                        raw.setdefault((scenario, target.name, concurrency), []).append(
                            measure(target, path, body, concurrency, args, workdir, label))
        for (scenario, name, concurrency), runs in raw.items():
            per_conc = results["runs"].setdefault(scenario, {}).setdefault(str(concurrency), {})
            per_conc[name] = median_cell(runs)
        if args.stream_calls:
            stream_path = f"/v1beta/models/{TTS}:streamGenerateContent?alt=sse"
            ttfb = {name: asyncio.run(first_byte_ms(t.base + stream_path, t.key, args.stream_calls))
                    for name, t in targets.items()}
            results["stream_ttfb_ms"] = {name: {"p50": statistics.median(v),
                                                "p99": sorted(v)[max(0, int(len(v) * 0.99) - 1)]}
                                         for name, v in ttfb.items()}
        results["rss_mb"] = {name: worker_rss(t.procs[0]) for name, t in targets.items()
                             if t.procs and t.tollway}
        results["conservation"] = {name: conserved(t.base, t.initial, t.sql_balance)
                                   for name, t in targets.items()
                                   if t.initial is not None and t.sql_balance is not None}
        for t in targets.values():  # keep the raw stall logs beside the results
            if t.stall_log is not None and t.stall_log.exists():
                shutil.copy(t.stall_log, Path(args.out).with_suffix(f".stalls-{t.name}.jsonl"))
    shutil.rmtree(workdir, ignore_errors=True)
    add_ratios(results)
    return results


def add_ratios(results: dict[str, Any]) -> None:
    for per_conc in results["runs"].values():
        for row in per_conc.values():
            direct, nginx, bare = row.get("direct"), row.get("nginx"), row.get("bare")
            for name, cell in row.items():
                if name in ("direct", "nginx"):
                    continue
                if direct:
                    cell["vs_direct_rps"] = round(cell["rps"] / direct["rps"], 3)
                    cell["added_p50_ms"] = round(cell["p50_ms"] - direct["p50_ms"], 3)
                    cell["added_p99_ms"] = round(cell["p99_ms"] - direct["p99_ms"], 3)
                if nginx:
                    cell["vs_nginx_rps"] = round(cell["rps"] / nginx["rps"], 3)
                if bare and name != "bare":
                    cell["vs_bare_rps"] = round(cell["rps"] / bare["rps"], 3)
                    cell["p99_over_bare_ms"] = round(cell["p99_ms"] - bare["p99_ms"], 2)


def table(results: dict[str, Any]) -> str:
    lines = ["| scenario | conc | set-up | req/s | p50 ms | p99 ms | added p50 | added p99 | ×direct "
             "| ×nginx | ×bare | p99 − bare | CPU µs/call | errors |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for scenario, per_conc in results["runs"].items():
        for conc, row in per_conc.items():
            for name, c in row.items():
                lines.append(f"| {scenario} | {conc} | {name} | {c['rps']:,.0f} | {c['p50_ms']:.2f} | "
                             f"{c['p99_ms']:.2f} | {c.get('added_p50_ms', '')} | "
                             f"{c.get('added_p99_ms', '')} | {c.get('vs_direct_rps', '')} | "
                             f"{c.get('vs_nginx_rps', '')} | {c.get('vs_bare_rps', '')} | "
                             f"{c.get('p99_over_bare_ms', '')} | {c.get('cpu_us_per_call', '')} | "
                             f"{c['errors']} |")
    split = [f"{scenario} c={conc} " + ", ".join(f"{n} {us}" for n, us in c[BY_PROCESS].items())
             for scenario, per_conc in results["runs"].items() for conc, row in per_conc.items()
             for c in row.values() if BY_PROCESS in c]
    if split:
        lines += ["", "CPU µs/call by process: " + "; ".join(split)]
    ttfb = results.get("stream_ttfb_ms", {})
    if ttfb:
        direct = ttfb.get("direct", {}).get("p50", 0.0)
        lines += ["", "| streamed G1 | TTFB p50 ms | TTFB p99 ms | added p50 |", "|---|---|---|---|"]
        for name, v in ttfb.items():
            lines.append(f"| {name} | {v['p50']:.2f} | {v['p99']:.2f} | {v['p50'] - direct:.2f} |")
    lines.append("")
    lines.append("RSS per worker after the run (MB): " + "; ".join(
        f"{name}: {', '.join(map(str, mbs))}" for name, mbs in results.get("rss_mb", {}).items()))
    checks = results.get("conservation", {})
    if checks:
        lines.append("Conservation (live = initial − Σ consume logs, user and key; SQL = live): " + "; ".join(
            f"{name}: {'ok' if c['ok'] else 'FAILED ' + json.dumps(c)} ({c['spent_logged']:,} charged)"
            for name, c in checks.items()))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--setups", default=",".join(DEFAULT_SETUPS), help=f"any of {', '.join(SETUPS)}")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--stream-calls", type=int, default=200, help="0 skips the streamed G1 figure")
    parser.add_argument("--profile", metavar="DIR", help="record each Tollway run with py-spy into DIR")
    parser.add_argument("--native", action="store_true",
                        help="with --profile: C frames too (py-spy pauses the process: far slower)")
    parser.add_argument("--stalls", action="store_true", help="log event-loop stalls of 1-process set-ups")
    parser.add_argument("--rate-limit", action="store_true",
                        help="turn the per-user model request limit on (two more Redis calls per call)")
    parser.add_argument("--out", default="bench-results.json")
    args = parser.parse_args()
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    args.setups = set(args.setups.split(","))
    args.scenarios = args.scenarios.split(",")
    if unknown := (args.setups - set(SETUPS)) | (set(args.scenarios) - set(SCENARIOS)):
        sys.exit(f"bench: unknown set-up or scenario: {', '.join(sorted(unknown))}")
    if shutil.which("wrk") is None:
        sys.exit("bench: wrk is needed (Debian: apt-get install wrk)")
    if args.profile and not Path(py_spy()).exists():
        sys.exit("bench: --profile needs py-spy (pip install -e '.[bench]')")
    results = run(args)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(table(results))
    print(f"\nwritten: {args.out}")


if __name__ == "__main__":
    main()
