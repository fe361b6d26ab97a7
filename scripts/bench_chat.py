"""The chat completions benchmark: what Tollway adds to a streamed and a plain `POST /v1/chat/completions`,
one worker, against the same fast upstream as `scripts/bench.py`.

    python -m scripts.bench_chat [--duration 5] [--rounds 3] [--setups embedded,redis-1w,litellm]
                                 [--modes chat,messages-openai,chat-anthropic,messages]
                                 [--stream-calls 200] [--streams 64] [--events 50] [--interval 0.02]
                                 [--litellm /tmp/litellm-venv/bin/litellm] [--stalls] [--out F]

The set-ups are bench.py's (`scripts/bench_env.py` starts them): `direct` (the upstream itself, the floor),
`embedded` (SQLite, the in-process engine) and `redis-1w` (MariaDB + Redis, 1 worker, its quota sync
process beside it), every hot-path feature on, plus `litellm`: LiteLLM's proxy (`litellm --config`, one
uvicorn worker, no database, access log off) with every bench model as `openai/…` on the same upstreams.
LiteLLM is never a dependency of the project: it runs from a venv of its own (`python3 -m venv
/tmp/litellm-venv && /tmp/litellm-venv/bin/pip install 'litellm[proxy]'`); when that is missing or its
proxy does not answer, the set-up is skipped and the reason written into the results.

The fast upstream is nginx (`return 200` with fixed bodies; the 200-event stream, past nginx's 4 KiB
string limit, from a file), else bench_env's Python server. Tollway builds the upstream path itself, so
each model has a channel of its own whose `base_url` carries a path prefix choosing the reply:
`bench-chat` (a plain completion), `bench-chat-1` and `bench-chat-200` (streams of 1 and 200 content
chunks of ~180 bytes, then the usage chunk and `data: [DONE]`), priced with `ModelRatio`. The paced
upstream (`scripts/bench_chat_streams.py`, Python asyncio, pinned to CPU 1) sends `--events` chunks per
stream, one every `--interval` s, each stamped with its send time, to `bench-chat-paced`.

The measures (Tollway and LiteLLM pinned to CPU 0; wrk, this driver and the upstreams to CPU 1):

1. Time to first byte of a streamed call (`bench-chat-1`), `--stream-calls` sequential calls per set-up
   and round: p50 and p99, and their excess over direct's p50 and p99 (calls are not paired).
2. CPU per streamed chunk in pass-through: wrk (concurrency 16) on K = 1 and K = 200; the process tree's
   CPU µs per call for each, and (CPU(200) − CPU(1)) / 199 µs per chunk. The upstream's reply arrives in
   few reads, so this is a chunk's write and mapping, not an upstream read per chunk (measure 4's CPU per
   stream has that).
3. A plain chat call against a moderation call: wrk (concurrency 16), CPU µs per call and the ratio.
4. `--streams` concurrent paced streams through each set-up and direct: for every event, receive time −
   send time (the client notes the time of each read; an event counts once its blank line is read).
   p50, p99, max, and p99 − direct's p99; the set-up's CPU per stream.

`--modes` chooses what runs (default: all): `chat`, the four measures above, and the Anthropic Messages
modes of `scripts/bench_chat_convert.py` (measures 1 and 2 of `/v1/messages` converted for an OpenAI
channel, of chat converted for an Anthropic channel, and of `/v1/messages` passed through to one; on the
Tollway set-ups, LiteLLM not needed).

Each wrk figure is the median of `--rounds` interleaved runs, CPU µs per call the CPU time of the
set-up's process tree (from /proc) over the calls served; the percentiles of 1 and 4 are over all rounds'
samples. `--stalls` runs the Tollway set-ups under `scripts/stallwatch.py` and reports each paced run's
event-loop stalls over 5 ms (and whether the loop was mostly waiting for a CPU: another process). It ends
with bench.py's conservation check on each Tollway set-up. Prints the tables and writes
`bench-chat-results.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from scripts import bench_chat_convert as convert
from scripts.bench import Result, Target, environment, first_byte_ms, measure, median_cell, wrk
from scripts.bench_chat_streams import (
    CHAT_PATH,
    CONCURRENCY,
    CPU_COLUMNS,
    EVENTS,
    LITELLM_EXE,
    PACED,
    PLAIN,
    PREFIXES,
    STREAM_1,
    STREAM_200,
    TOLLWAYS,
    TTFB_COLUMNS,
    Stamps,
    chat_replies,
    chat_request,
    cpu_cells,
    litellm_version,
    md_header,
    md_row,
    percentile,
    run_async,
    start_litellm,
    start_paced,
    stream_cpu_cell,
    ttfb_cell,
    ttfb_cells,
)
from scripts.bench_env import (
    MODERATION_BODY,
    ChannelSpec,
    Fixture,
    Proc,
    conserved,
    cpu_used,
    free_port,
    wait_for,
)
from scripts.stallwatch import summarize

SETUPS = (*TOLLWAYS, "litellm")


def _load() -> list[float]:
    """The 1, 5 and 15-minute load averages: how busy the machine was (other work shares its cores)."""
    return [round(x, 2) for x in os.getloadavg()]


def chat_fixture(paced: str) -> Fixture:
    """The chat models' channels (one per reply, on OpenAI type 1), their price, the upstream replies."""
    channels = [ChannelSpec(f"chat-{model}", 1, model, prefix) for model, prefix in PREFIXES.items()]
    channels.append(ChannelSpec("chat-paced", 1, PACED, paced))
    ratios = dict.fromkeys([*PREFIXES, PACED], 0.5)
    return Fixture(chat_replies(), channels, {"ModelRatio": json.dumps(ratios)})


def chat_path(target: Target, model: str) -> str:
    return f"{PREFIXES[model]}{CHAT_PATH}" if target.name == "direct" else CHAT_PATH


def paced_url(target: Target, paced: str) -> str:
    return f"{paced}{CHAT_PATH}" if target.name == "direct" else target.base + CHAT_PATH


async def paced_streams(url: str, key: str, streams: int, seconds: float) -> tuple[list[float], int]:
    """`streams` concurrent streamed calls; every event's delay (ms) and the calls that failed."""
    body = chat_request(PACED, stream=True).encode()
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    async def one(session: aiohttp.ClientSession) -> list[float]:
        stamps = Stamps()
        async with session.post(url, data=body, headers=headers) as r:
            if r.status != 200:
                raise RuntimeError(f"{r.status}: {(await r.read())[:200]!r}")
            async for data in r.content.iter_any():
                stamps.feed(data, time.time())
        return stamps.delays_ms

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=seconds)) as s:
        done = await asyncio.gather(*(one(s) for _ in range(streams)), return_exceptions=True)
    delays = [d for result in done if isinstance(result, list) for d in result]
    failed = [result for result in done if isinstance(result, BaseException)]
    if failed:
        print(f"  {len(failed)} paced stream(s) failed, e.g. {failed[0]!r}", flush=True)
    return delays, len(failed)


def paced_run(target: Target, paced: str, args: argparse.Namespace) -> dict[str, Any]:
    log = target.stall_log
    mark = log.stat().st_size if log is not None and log.exists() else 0
    before = [proc.cpu_seconds() for proc in target.procs]
    seconds = 30 + args.events * args.interval * 3
    delays, failed = run_async(paced_streams(paced_url(target, paced), target.key, args.streams, seconds))
    cpu = sum(cpu_used(b, p.cpu_seconds()) for b, p in zip(before, target.procs, strict=True))
    run = {"delays": delays, "failed": failed, "cpu_s": cpu if target.procs else None}
    if log is not None:
        run["stalls"] = summarize(log, mark)
    return run


def add_litellm(targets: dict[str, Target], stack: contextlib.ExitStack, workdir: Path, paced: str,
                args: argparse.Namespace) -> str:
    """Starts LiteLLM's proxy as a target; returns "ok" or why it is not one."""
    port, key = free_port(), f"sk-bench-{secrets.token_hex(8)}"
    try:
        proc = start_litellm(workdir, port, args.litellm, targets["direct"].base, paced, key)
    except FileNotFoundError as exc:
        return f"not installed: {exc}"
    stack.callback(proc.stop)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{base}/health/liveliness", 180)
    except RuntimeError as exc:
        tail = proc.log.read_text(errors="replace")[-600:]
        return f"did not start: {exc}; log: {tail}"
    targets["litellm"] = Target("litellm", base, key, [proc])
    return "ok"


def warm_up(targets: dict[str, Target], paced: str, args: argparse.Namespace, workdir: Path) -> None:
    for t in targets.values():  # caches, pools, loaded balances; LiteLLM's first calls are slow
        for model, stream in ((PLAIN, False), (STREAM_1, True), (STREAM_200, True)):
            wrk(t.base + chat_path(t, model), t.key, chat_request(model, stream=stream), 4, 1, workdir)
        wrk(t.base + "/v1/moderations", t.key, MODERATION_BODY, 4, 1, workdir)
        run_async(paced_streams(paced_url(t, paced), t.key, 4, 30 + args.events * args.interval * 3))


class ChatRuns:
    """The pass-through's samples and wrk runs (measures 1–4), round after round."""

    def __init__(self) -> None:
        self.ttfb: dict[str, list[float]] = {}
        self.streamed: dict[tuple[str, int], list[Result]] = {}
        self.plain: dict[tuple[str, str], list[Result]] = {}
        self.paced: dict[str, list[dict[str, Any]]] = {}

    def round(self, targets: dict[str, Target], paced: str, args: argparse.Namespace, workdir: Path,
              round_no: int) -> None:
        stream_body = chat_request(STREAM_1, stream=True)
        for name, t in targets.items():
            self.ttfb.setdefault(name, []).extend(run_async(first_byte_ms(
                t.base + chat_path(t, STREAM_1), t.key, args.stream_calls, stream_body)))
        for name, t in targets.items():
            if name not in TOLLWAYS:
                continue
            for model in (STREAM_1, STREAM_200):
                label = f"{name}-k{EVENTS[model]}-r{round_no}"
                self.streamed.setdefault((name, EVENTS[model]), []).append(measure(
                    t, CHAT_PATH, chat_request(model, stream=True), CONCURRENCY, args, workdir, label))
        for name, t in targets.items():
            for scenario, path, body in (("chat", chat_path(t, PLAIN), chat_request(PLAIN, stream=False)),
                                         ("moderation", "/v1/moderations", MODERATION_BODY)):
                self.plain.setdefault((name, scenario), []).append(measure(
                    t, path, body, CONCURRENCY, args, workdir, f"{name}-{scenario}-r{round_no}"))
        for name, t in targets.items():
            self.paced.setdefault(name, []).append(paced_run(t, paced, args))


def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="tollway-bench-chat-"))
    results: dict[str, Any] = {"duration_s": args.duration, "rounds": args.rounds, "cpus": os.cpu_count(),
                               "concurrency": CONCURRENCY, "streams": args.streams, "events": args.events,
                               "interval_s": args.interval, "modes": args.modes, "loadavg_before": _load()}
    chat = convert.CHAT_MODE in args.modes
    with contextlib.ExitStack() as stack:
        paced_port = free_port()
        paced_proc: Proc = start_paced(workdir, paced_port, args.events, args.interval, sys.executable)
        stack.callback(paced_proc.stop)
        paced = f"http://127.0.0.1:{paced_port}"
        targets = stack.enter_context(environment(args, workdir, convert.with_claude(chat_fixture(paced))))
        results["litellm"] = (add_litellm(targets, stack, workdir, paced, args) if "litellm" in args.setups
                              else "not asked for")
        results["litellm_version"] = litellm_version(args.litellm)
        if (os.cpu_count() or 1) >= 2:
            os.sched_setaffinity(0, {1})  # the driver's clients beside wrk and the upstreams
        if chat:
            warm_up(targets, paced, args, workdir)
        convert.warm_up(targets, args.modes, workdir)
        runs = ChatRuns()
        ttfb: convert.Samples = {}
        streamed: convert.Streamed = {}
        for round_no in range(args.rounds):
            print(f"round {round_no + 1}/{args.rounds}", flush=True)
            if chat:
                runs.round(targets, paced, args, workdir, round_no)
            convert.one_round(targets, args.modes, args, workdir, round_no, ttfb, streamed)
        if chat:
            results |= figures(runs.ttfb, runs.streamed, runs.plain, runs.paced, args)
        results["convert"] = convert.figures(ttfb, streamed)
        results["conservation"] = {name: conserved(t.base, t.initial, t.sql_balance)
                                   for name, t in targets.items()
                                   if t.initial is not None and t.sql_balance is not None}
    shutil.rmtree(workdir, ignore_errors=True)
    results["loadavg_after"] = _load()
    return results


def figures(ttfb: dict[str, list[float]], streamed: dict[tuple[str, int], list[Result]],
            plain: dict[tuple[str, str], list[Result]], paced: dict[str, list[dict[str, Any]]],
            args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"ttfb_ms": {}, "stream_cpu": {}, "chat_vs_moderation": {}, "paced": {}}
    for name, samples in ttfb.items():
        out["ttfb_ms"][name] = ttfb_cell(samples, ttfb["direct"])
    for name in dict.fromkeys(n for n, _ in streamed):
        out["stream_cpu"][name] = stream_cpu_cell(median_cell(streamed[(name, 1)]),
                                                  median_cell(streamed[(name, 200)]), name)
    for name in dict.fromkeys(n for n, _ in plain):
        chat, moderation = median_cell(plain[(name, "chat")]), median_cell(plain[(name, "moderation")])
        row: dict[str, Any] = {"chat": chat, "moderation": moderation}
        if "cpu_us_per_call" in chat and "cpu_us_per_call" in moderation:
            row["ratio"] = round(chat["cpu_us_per_call"] / moderation["cpu_us_per_call"], 3)
        out["chat_vs_moderation"][name] = row
    direct_p99 = percentile([d for r in paced["direct"] for d in r["delays"]], 99)
    expected = args.streams * args.events * args.rounds
    for name, runs in paced.items():
        delays = [d for r in runs for d in r["delays"]]
        cell: dict[str, Any] = {"events": len(delays), "expected": expected,
                                "failed_streams": sum(r["failed"] for r in runs)}
        if delays:
            p99 = percentile(delays, 99)
            cell |= {"p50_ms": round(percentile(delays, 50), 2), "p99_ms": round(p99, 2),
                     "max_ms": round(max(delays), 2), "added_p99_ms": round(p99 - direct_p99, 2),
                     "p99_ms_by_round": [round(percentile(r["delays"], 99), 1) for r in runs if r["delays"]]}
        if all(r["cpu_s"] is not None for r in runs):
            cpu = sum(r["cpu_s"] for r in runs)
            cell["cpu_us_per_stream"] = round(1e6 * cpu / (args.streams * len(runs)))
        if any("stalls" in r for r in runs):
            cell["stalls"] = [r.get("stalls") for r in runs]
        out["paced"][name] = cell
    return out


def chat_table(results: dict[str, Any]) -> list[str]:
    """The pass-through's tables (measures 1–4), each opened by a blank line."""
    lines = md_header("streamed chat, sequential", *TTFB_COLUMNS)
    lines += [md_row(n, *ttfb_cells(c)) for n, c in results["ttfb_ms"].items()]
    lines += md_header(f"pass-through stream, c={CONCURRENCY}", *CPU_COLUMNS)
    lines += [md_row(n, *cpu_cells(c)) for n, c in results["stream_cpu"].items()]
    lines += md_header(f"plain call, c={CONCURRENCY}", "chat req/s", "chat CPU µs/call", "moderation req/s",
                     "moderation CPU µs/call", "chat ÷ moderation", "errors")
    for n, c in results["chat_vs_moderation"].items():
        chat, mod = c["chat"], c["moderation"]
        lines.append(md_row(n, f"{chat['rps']:,.0f}", chat.get("cpu_us_per_call", ""), f"{mod['rps']:,.0f}",
                          mod.get("cpu_us_per_call", ""), c.get("ratio", ""), chat["errors"] + mod["errors"]))
    lines += md_header(f"{results['streams']} paced streams × {results['events']} events", "events",
                     "delay p50 ms", "p99 ms", "max ms", "p99 − direct", "p99 by round", "CPU µs/stream",
                     "failed")
    lines += [md_row(n, f"{c['events']:,}/{c['expected']:,}", c.get("p50_ms", ""), c.get("p99_ms", ""),
                   c.get("max_ms", ""), c.get("added_p99_ms", ""),
                   " / ".join(str(p) for p in c.get("p99_ms_by_round", [])), c.get("cpu_us_per_stream", ""),
                   c["failed_streams"]) for n, c in results["paced"].items()]
    lines += [f"{n} paced, round {i + 1}: {st['stalls']} stalls over 5 ms, max {st['stall_ms_max']} ms, "
              f"{st['mostly_waiting_for_a_cpu']} mostly waiting for a CPU; {st['culprits']}"
              for n, c in results["paced"].items() for i, st in enumerate(c.get("stalls", [])) if st]
    return lines


def table(results: dict[str, Any]) -> str:
    lines = chat_table(results) if "ttfb_ms" in results else []
    if results.get("convert"):
        lines += ["", convert.table(results)]
    lines += ["", f"Modes: {', '.join(results['modes'])}. "
              f"LiteLLM {results['litellm_version']}: {results['litellm']}; "
              f"load average before and after: {results['loadavg_before']}, {results['loadavg_after']}"]
    checks = results.get("conservation", {})
    lines.append("Conservation (live = initial − Σ consume logs, user and key; SQL = live): " + "; ".join(
        f"{n}: {'ok' if c['ok'] else 'FAILED ' + json.dumps(c)} ({c['spent_logged']:,} charged)"
        for n, c in checks.items()))
    return "\n".join(lines[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per wrk run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--setups", default=",".join(SETUPS), help=f"any of {', '.join(SETUPS)}")
    parser.add_argument("--stream-calls", type=int, default=200, help="sequential TTFB calls per round")
    parser.add_argument("--streams", type=int, default=64, help="concurrent paced streams")
    parser.add_argument("--events", type=int, default=50, help="events per paced stream")
    parser.add_argument("--interval", type=float, default=0.02, help="seconds between paced events")
    parser.add_argument("--litellm", default=LITELLM_EXE, help="LiteLLM's CLI (its own venv)")
    parser.add_argument("--modes", default="all", help=f"all, or any of {', '.join(convert.ALL_MODES)}")
    parser.add_argument("--out", default="bench-chat-results.json")
    parser.add_argument("--stalls", action="store_true",
                        help="Tollway under scripts/stallwatch.py: its loop stalls over 5 ms per paced run")
    parser.set_defaults(profile=None, native=False, rate_limit=False)  # bench.py's
    args = parser.parse_args()
    args.setups = set(args.setups.split(","))
    if unknown := args.setups - set(SETUPS):
        sys.exit(f"bench_chat: unknown set-up: {', '.join(sorted(unknown))}")
    try:
        args.modes = convert.parse_modes(args.modes)
    except ValueError as exc:
        sys.exit(f"bench_chat: {exc}")
    if shutil.which("wrk") is None:
        sys.exit("bench_chat: wrk is needed (Debian: apt-get install wrk)")
    results = run(args)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(table(results))
    print(f"\nwritten: {args.out}")


if __name__ == "__main__":
    main()
