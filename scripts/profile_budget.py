"""Turn a py-spy profile of a Tollway worker into the per-call budget: µs of CPU per step of a model call.

    python -m scripts.profile_budget FILE.speedscope.json [--calls N] [--cpu-us U]

Reads the main thread of a speedscope file written by `py-spy record --format speedscope` (as
`scripts/bench.py --profile DIR` does: it also writes `DIR/runs.json` with the calls and the CPU µs per
call of each profiled run, used here when `--calls`/`--cpu-us` are not given). Each sample goes to the
step of the highest-priority rule any of its frames matches (so the Redis round trip inside a
reservation counts as the reservation, and the HTTP client inside a settlement would count as the
settlement). Each step gets its share of the measured CPU per call (samples are wall time, and a thread
waiting for the CPU still counts; without a measured figure, the sampled time over the calls). Samples
with no Python frame inside the event loop — uvloop's own C code, and idle time the profiler did not
recognise as idle — are "event loop, C, gc" (the garbage collector runs inside whatever frame allocated,
so it is spread over the steps); at concurrency 1 that row overstates, read the steps at 16.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Frame = tuple[str, str]  # (function, file)


@dataclass(frozen=True)
class Rule:
    step: str
    match: Callable[[str, str], bool]


def _funcs(*names: str, file: str = "") -> Callable[[str, str], bool]:
    return lambda name, path: name in names and file in path


def _files(*parts: str) -> Callable[[str, str], bool]:
    return lambda name, path: any(p in path for p in parts)


# highest priority first
RULES = (
    Rule("log insert (quota sync)", _funcs("QuotaSync.run_forever", "QuotaSync.run_once", "QuotaSync.drain")),
    Rule("settlement", _funcs("QuotaEngine.settle")),
    Rule("reservation", _funcs("QuotaEngine.reserve")),
    Rule("rate limit", lambda n, p: n in ("rate_limit", "Relay.limit_rate", "Relay._admit_rate")
         or n.startswith("ModelRateLimiter.")),
    Rule("auth", lambda n, p: (n == "authenticate" and "server/relay/caller.py" in p)
         or n == "Relay.authenticate"),
    Rule("pick", lambda n, p: n in ("ChannelTable.pick", "choose_key", "map_model")),
    Rule("upstream client", lambda n, p: n.startswith(("Upstream.", "_AiohttpResponse.", "_HttpxResponse."))
         or n.endswith(".upstream_call")
         or any(s in p for s in ("/aiohttp/", "/httpx/", "/httpcore/", "/yarl/", "/multidict/",
                                 "server/upstream/transports.py", "server/upstream/client.py"))),
    Rule("body", lambda n, p: n in ("parse_moderation", "parse_generate", "count_all", "Relay.read_body")
         or n.endswith((".ask", ".read_body"))),
    Rule("log record (consume log)", _funcs("Relay._settle")),
    Rule("admission (price, group, versions)",
         lambda n, p: n in ("admit", "open_ticket", "Relay.admit", "Relay.decide", "Relay.reserve")
         or "backend/versions.py" in p),
    Rule("HTTP out", lambda n, p: n in ("http1_response_header", "send", "raw")
         or "sanic/response/" in p),
    Rule("HTTP in (server, routing, middleware)", _files("/sanic/", "server/app.py", "server/web/",
                                                          "server/auth/guard.py", "server/relay/routes.py")),
)
LOOP = "event loop, C, gc"
REDIS = "Redis client (stack cut short)"
OTHER = "other Python"
ROOT = ("_run_server_forever", "serve_forever", "run_until_complete", "process ")


def classify(stack: list[Frame]) -> str:
    inner = next((len(stack) - i for i, (name, _) in enumerate(reversed(stack)) if name.startswith(ROOT)), 0)
    stack = stack[inner:]  # what runs inside the event loop
    best: int | None = None
    for name, path in stack:
        for i, rule in enumerate(RULES):
            if (best is None or i < best) and rule.match(name, path):
                best = i
                break
    if best is not None:
        return RULES[best].step
    if not stack:
        return LOOP
    if any(p in path for _, path in stack for p in ("/redis/", "/hiredis")):
        return REDIS
    return OTHER


def budget(profile_file: Path) -> tuple[dict[str, float], float]:
    """Seconds of main-thread samples per step, and their total."""
    data: dict[str, Any] = json.loads(profile_file.read_text())
    frames = [(f["name"], f.get("file", "")) for f in data["shared"]["frames"]]
    main = next(p for p in data["profiles"] if "MainThread" in p["name"])
    steps: dict[str, float] = {}
    for sample, weight in zip(main["samples"], main["weights"], strict=True):
        step = classify([frames[i] for i in sample])
        steps[step] = steps.get(step, 0.0) + weight
    return steps, sum(steps.values())


def table(steps: dict[str, float], calls: int, cpu_us: float | None) -> list[tuple[str, float]]:
    """(step, µs per call) in call order. With the measured CPU per call, each step gets its share of
    it (samples are wall time: a thread waiting for the CPU still counts); else its sampled time."""
    order = [r.step for r in RULES[1:]] + [RULES[0].step, REDIS, OTHER, LOOP]
    total = sum(steps.values())
    def us(step: str) -> float:
        if cpu_us is not None:
            return cpu_us * steps[step] / total
        return 1e6 * steps[step] / calls
    return [(step, us(step)) for step in order if step in steps]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--calls", type=int, help="calls served while the profile ran")
    parser.add_argument("--cpu-us", type=float, help="measured CPU µs per call (for the rest row)")
    args = parser.parse_args()
    calls, cpu_us = args.calls, args.cpu_us
    runs = args.file.parent / "runs.json"
    label = args.file.name.removesuffix(".speedscope.json")
    if (calls is None or cpu_us is None) and runs.exists():
        known = json.loads(runs.read_text()).get(label, {})
        calls = calls if calls is not None else known.get("calls")
        cpu_us = cpu_us if cpu_us is not None else known.get("cpu_us_per_call")
    if not calls:
        raise SystemExit("profile_budget: how many calls? (--calls, or runs.json beside the file)")
    steps, _total = budget(args.file)
    rows = table(steps, calls, cpu_us)
    print(f"| step | µs per call |  ({label}: {calls} calls, measured CPU {cpu_us or '?'} µs/call)")
    print("|---|---|")
    for step, us in rows:
        print(f"| {step} | {us:.0f} |")
    print(f"| total | {sum(us for _, us in rows):.0f} |")


if __name__ == "__main__":
    main()
