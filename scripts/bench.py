"""The end-to-end benchmark of the model-call hot path: Tollway against the floor any proxy can reach.

    python -m scripts.bench [--duration 5] [--rounds 3] [--concurrency 1,16,64] [--setups …] [--out F]

One fast upstream serves every set-up: nginx answering fixed moderation, generateContent and streaming
replies with `return 200` (the project's Python fake when nginx is not installed). Against it, side by
side and with every hot-path feature on (key auth, reservation, channel pick, settlement, usage record,
the quota sync running):

    direct          the upstream itself
    nginx           nginx `proxy_pass` with upstream keep-alive, 1 worker (the floor of any proxy)
    embedded        `tollway serve`, SQLite and the in-process engine
    redis-1w        `tollway serve`, MariaDB + Redis, 1 worker
    redis-2w        the same with 2 workers

Load comes from `wrk` with a Lua POST script (the Debian package), one connection per concurrent caller.
On this 2-core machine the set-up under test is pinned to CPU 0 and wrk plus the upstream to CPU 1 with
`taskset` (the 2-worker set-up is not pinned: it needs both cores, and shares them with wrk). Each figure
is the median of `--rounds` interleaved runs. The streamed G1 call is measured apart: time to first byte
through each set-up, sequentially, minus the direct one.

Prints a table and writes `bench-results.json` (ratios Tollway/direct and Tollway/nginx included).
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
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

TTS = "gemini-2.5-flash-preview-tts"
MODERATION = "omni-moderation-latest"
CATEGORIES = ("harassment", "harassment/threatening", "hate", "hate/threatening", "illicit",
              "illicit/violent", "self-harm", "self-harm/intent", "self-harm/instructions", "sexual",
              "sexual/minors", "violence", "violence/graphic")
MODERATION_REPLY = json.dumps({
    "id": "modr-bench", "model": MODERATION,
    "results": [{"flagged": False, "categories": dict.fromkeys(CATEGORIES, False),
                 "category_scores": dict.fromkeys(CATEGORIES, 0.001),
                 "category_applied_input_types": {c: ["text"] for c in CATEGORIES}}]}, separators=(",", ":"))
AUDIO = "AAAA" * 128  # 384 bytes of PCM, base64 (nginx caps a config string at 4 KiB; 3 of these stream)
GENERATE_REPLY = json.dumps({
    "candidates": [{"content": {"role": "model", "parts": [{"inlineData": {
        "mimeType": "audio/L16;codec=pcm;rate=24000", "data": AUDIO}}]}, "finishReason": "STOP", "index": 0}],
    "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 500, "totalTokenCount": 504,
                      "candidatesTokensDetails": [{"modality": "AUDIO", "tokenCount": 500}]},
    "modelVersion": TTS}, separators=(",", ":"))
STREAM_REPLY = "".join(f"data: {GENERATE_REPLY}\n\n" for _ in range(3))
MODERATION_BODY = json.dumps({"input": "Is this sentence fine to post?", "model": MODERATION})
GENERATE_BODY = json.dumps({"contents": [{"parts": [{"text": "Say hello to everyone"}]}],
                            "generationConfig": {"responseModalities": ["AUDIO"], "speechConfig": {
                                "voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "Kore"}}}}})
SETUPS = ("direct", "nginx", "embedded", "redis-1w", "redis-2w")
SCENARIOS = {"moderation": ("/v1/moderations", MODERATION_BODY),
             "g1": (f"/v1beta/models/{TTS}:generateContent", GENERATE_BODY)}
ROOT_PASSWORD = "bench-root-password"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pinned(cpu: str | None, argv: list[str]) -> list[str]:
    if cpu is None or shutil.which("taskset") is None or (os.cpu_count() or 1) < 2:
        return argv
    return ["taskset", "-c", cpu, *argv]


def wait_for(url: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {seconds:.0f} s")


# ---- processes ----------------------------------------------------------------------------------------

@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def pids(self) -> list[int]:
        """This process and all its descendants (Sanic's workers are children of `tollway serve`)."""
        found, queue = [], [self.popen.pid]
        while queue:
            pid = queue.pop()
            found.append(pid)
            with contextlib.suppress(OSError):
                for task in Path(f"/proc/{pid}/task").iterdir():
                    children = (task / "children").read_text().split()
                    queue.extend(int(c) for c in children)
        return found

    def stop(self) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGINT)
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()


def spawn(name: str, argv: list[str], workdir: Path, env: dict[str, str] | None = None) -> Proc:
    log = workdir / f"{name}.log"
    popen = subprocess.Popen(argv, cwd=workdir, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                             start_new_session=True)
    return Proc(name, popen, log)


def rss_mb(pid: int) -> float:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


# ---- the upstream and the nginx proxy -------------------------------------------------------------------

def nginx_conf(workdir: Path, port: int, body: str) -> Path:
    conf = workdir / f"nginx-{port}.conf"
    conf.write_text(f"""
worker_processes 1;
daemon off;
pid {workdir}/nginx-{port}.pid;
error_log {workdir}/nginx-{port}.error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {workdir}/body-{port};
    proxy_temp_path {workdir}/proxy-{port};
    fastcgi_temp_path {workdir}/fastcgi-{port};
    uwsgi_temp_path {workdir}/uwsgi-{port};
    scgi_temp_path {workdir}/scgi-{port};
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port};
{body}
    }}
}}
""")
    return conf


def upstream_locations() -> str:
    return f"""
        location = /v1/moderations {{ default_type application/json; return 200 '{MODERATION_REPLY}'; }}
        location ~ :streamGenerateContent$ {{ default_type text/event-stream; return 200 '{STREAM_REPLY}'; }}
        location ~ :generateContent$ {{ default_type application/json; return 200 '{GENERATE_REPLY}'; }}
"""


def proxy_locations(upstream_port: int) -> str:
    return f"""
        location / {{
            proxy_pass http://bench_upstream;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
    upstream bench_upstream {{
        server 127.0.0.1:{upstream_port};
        keepalive 256;
"""


def start_nginx(workdir: Path, port: int, body: str, cpu: str | None) -> Proc:
    conf = nginx_conf(workdir, port, body)
    proc = spawn(f"nginx-{port}", pinned(cpu, ["nginx", "-p", str(workdir), "-c", str(conf)]), workdir)
    return proc


def start_python_upstream(workdir: Path, port: int) -> Proc:
    """The fallback upstream: the project's fake servers are for tests; here a minimal keep-alive server."""
    code = f"""
import asyncio
REPLIES = {{b"/v1/moderations": (b"application/json", {MODERATION_REPLY.encode()!r}),
           b":generateContent": (b"application/json", {GENERATE_REPLY.encode()!r}),
           b":streamGenerateContent": (b"text/event-stream", {STREAM_REPLY.encode()!r})}}
async def handle(r, w):
    try:
        while True:
            head = await r.readuntil(b"\\r\\n\\r\\n")
            length = 0
            for line in head.split(b"\\r\\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await r.readexactly(length)
            path = head.split(b" ", 2)[1].split(b"?")[0]
            kind, body = next(v for k, v in REPLIES.items() if path.endswith(k))
            w.write(b"HTTP/1.1 200 OK\\r\\nContent-Type: " + kind + b"\\r\\nContent-Length: "
                    + str(len(body)).encode() + b"\\r\\n\\r\\n" + body)
    except (asyncio.IncompleteReadError, ConnectionError):
        w.close()
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", {port})
    await server.serve_forever()
asyncio.run(main())
"""
    return spawn(f"upstream-{port}", pinned("1", [sys.executable, "-c", code]), workdir)


# ---- Tollway -----------------------------------------------------------------------------------------

def tollway_env(workdir: Path, port: int, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DATA_DIR", "WORKERS")}
    env.update(HOST="127.0.0.1", PORT=str(port), DATA_DIR=str(workdir / f"data-{port}"), LOG_LEVEL="WARNING",
               GLOBAL_API_RATE_LIMIT="0", CRITICAL_RATE_LIMIT="0",
               UPSTREAM_ALLOW_PRIVATE="127.0.0.1/32",  # the upstream (nginx or the fallback) is on loopback
               **extra)
    return env


def prepare_tollway(base: str, upstream: str) -> str:
    """Setup, a balance, a Gemini and an OpenAI channel on the upstream, an API key; returns the key."""
    with httpx.Client(base_url=base, timeout=30) as c:
        c.post("/api/setup", json={"username": "root", "password": ROOT_PASSWORD,
                                   "confirmPassword": ROOT_PASSWORD}).raise_for_status()
        login = c.post("/api/user/login", json={"username": "root", "password": ROOT_PASSWORD})
        login.raise_for_status()
        c.headers["New-Api-User"] = str(login.json()["data"]["id"])
        for name, kind, model in (("gemini", 24, TTS), ("openai", 1, MODERATION)):
            channel = {"name": name, "type": kind, "key": "k", "base_url": upstream, "models": model}
            c.post("/api/channel/", json={"mode": "single", "channel": {**channel, "group": "default"}}
                   ).raise_for_status()
        c.post("/api/user/manage", json={"id": login.json()["data"]["id"], "action": "add_quota",
                                          "mode": "add", "value": 10**14}).raise_for_status()
        made = c.post("/api/token/", json={"name": "bench", "remain_quota": 10**14})
        made.raise_for_status()
        return str(made.json()["data"]["key"])


def mariadb(sql: str, *, check: bool = True) -> None:
    subprocess.run(["mariadb", "-uroot", "-h127.0.0.1", "-e", sql], check=check)


def mariadb_database() -> tuple[str, str]:
    name = f"tollway_bench_{secrets.token_hex(3)}"
    mariadb(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    return name, f"mysql://root@127.0.0.1:3306/{name}"


def purge_redis(prefix: str) -> None:
    subprocess.run(["sh", "-c", f"redis-cli --scan --pattern '{prefix}*' | xargs -r redis-cli del"],
                   check=False, capture_output=True)


# ---- load ------------------------------------------------------------------------------------------------

@dataclass
class Result:
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int


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
    errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    return Result(rps, p50, p99, errors + (int(non2xx.group(1)) if non2xx else 0))


async def first_byte_ms(url: str, key: str, n: int) -> list[float]:
    """Sequential streamed G1 calls; time from sending to the first body byte."""
    out = []
    async with httpx.AsyncClient(timeout=30) as client:
        for _ in range(n):
            start = time.perf_counter()
            headers = {"x-goog-api-key": key, "Content-Type": "application/json"}
            async with client.stream("POST", url, content=GENERATE_BODY, headers=headers) as r:
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


@contextlib.contextmanager
def environment(args: argparse.Namespace, workdir: Path) -> Iterator[dict[str, Target]]:
    procs: list[Proc] = []
    cleanups: list[Any] = []
    targets: dict[str, Target] = {}
    try:
        up_port = free_port()
        if shutil.which("nginx"):
            procs.append(start_nginx(workdir, up_port, upstream_locations(), "1"))
            upstream_kind = "nginx"
        else:
            procs.append(start_python_upstream(workdir, up_port))
            upstream_kind = "python"
        upstream = f"http://127.0.0.1:{up_port}"
        time.sleep(0.3)
        targets["direct"] = Target("direct", upstream)
        if "nginx" in args.setups and shutil.which("nginx"):
            port = free_port()
            proc = start_nginx(workdir, port, proxy_locations(up_port), "0")
            procs.append(proc)
            targets["nginx"] = Target("nginx", f"http://127.0.0.1:{port}", procs=[proc])
        tollways: list[tuple[str, dict[str, str], list[str], str | None]] = []
        if "embedded" in args.setups:
            tollways.append(("embedded", {}, [], "0"))
        secret = secrets.token_hex(32)
        for setup, workers, cpu in (("redis-1w", "1", "0"), ("redis-2w", "2", None)):
            if setup not in args.setups:
                continue
            db_name, db_url = mariadb_database()
            prefix = f"bench:{secrets.token_hex(3)}:"
            cleanups += [lambda n=db_name: mariadb(f"DROP DATABASE IF EXISTS {n}", check=False),
                         lambda p=prefix: purge_redis(p)]
            tollways.append((setup, {"DATABASE_URL": db_url, "REDIS_URL": "redis://127.0.0.1:6379/0",
                                     "REDIS_KEY_PREFIX": prefix, "SECRET_KEY": secret},
                             ["--workers", workers], cpu))
        for setup, extra, flags, cpu in tollways:
            port = free_port()
            env = tollway_env(workdir, port, extra)
            argv = [sys.executable, "-m", "server.cli", "serve", *flags]
            proc = spawn(setup, pinned(cpu, argv), workdir, env)
            procs.append(proc)
            base = f"http://127.0.0.1:{port}"
            wait_for(f"{base}/api/status")
            targets[setup] = Target(setup, base, prepare_tollway(base, upstream), [proc])
        print(f"upstream: {upstream_kind} on {upstream}; set-ups: {', '.join(targets)}", flush=True)
        yield targets
    finally:
        for proc in reversed(procs):
            proc.stop()
        for cleanup in cleanups:
            cleanup()


def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="tollway-bench-"))
    results: dict[str, Any] = {"concurrency": args.concurrency, "duration_s": args.duration,
                               "rounds": args.rounds, "cpus": os.cpu_count(), "runs": {}}
    with environment(args, workdir) as targets:
        for target in targets.values():  # warm-up: caches, pools, loaded balances
            for path, body in SCENARIOS.values():
                wrk(target.base + path, target.key, body, 4, 1, workdir)
        raw: dict[tuple[str, str, int], list[Result]] = {}
        for _ in range(args.rounds):
            for scenario, (path, body) in SCENARIOS.items():
                for concurrency in args.concurrency:
                    for target in targets.values():  # interleaved: one run of each set-up per round
                        raw.setdefault((scenario, target.name, concurrency), []).append(
                            wrk(target.base + path, target.key, body, concurrency, args.duration, workdir))
        for (scenario, name, concurrency), runs in raw.items():
            results["runs"].setdefault(scenario, {}).setdefault(str(concurrency), {})[name] = {
                "rps": statistics.median(r.rps for r in runs),
                "p50_ms": statistics.median(r.p50_ms for r in runs),
                "p99_ms": statistics.median(r.p99_ms for r in runs),
                "errors": sum(r.errors for r in runs),
            }
        stream_path = f"/v1beta/models/{TTS}:streamGenerateContent?alt=sse"
        ttfb = {name: asyncio.run(first_byte_ms(t.base + stream_path, t.key, args.stream_calls))
                for name, t in targets.items()}
        results["stream_ttfb_ms"] = {name: {"p50": statistics.median(v),
                                            "p99": sorted(v)[max(0, int(len(v) * 0.99) - 1)]}
                                     for name, v in ttfb.items()}
        results["rss_mb"] = {name: worker_rss(t.procs[0]) for name, t in targets.items()
                             if t.procs and name not in ("direct", "nginx")}
    shutil.rmtree(workdir, ignore_errors=True)
    add_ratios(results)
    return results


def worker_rss(proc: Proc) -> list[float]:
    """RSS of each serving process: the workers Sanic spawned, or the one process serving alone (the
    manager and the multiprocessing helper of a multi-worker start are left out)."""
    pids = proc.pids()
    workers = [pid for pid in pids[1:] if "spawn_main" in _cmdline(pid) and "resource_tracker" not in
               _cmdline(pid)]
    return [round(rss_mb(pid), 1) for pid in (workers or pids[:1])]


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    return ""


def add_ratios(results: dict[str, Any]) -> None:
    for per_conc in results["runs"].values():
        for row in per_conc.values():
            direct, nginx = row.get("direct"), row.get("nginx")
            for name, cell in row.items():
                if name in ("direct", "nginx"):
                    continue
                if direct:
                    cell["vs_direct_rps"] = round(cell["rps"] / direct["rps"], 3)
                    cell["added_p50_ms"] = round(cell["p50_ms"] - direct["p50_ms"], 3)
                    cell["added_p99_ms"] = round(cell["p99_ms"] - direct["p99_ms"], 3)
                if nginx:
                    cell["vs_nginx_rps"] = round(cell["rps"] / nginx["rps"], 3)


def table(results: dict[str, Any]) -> str:
    lines = ["| scenario | conc | set-up | req/s | p50 ms | p99 ms | added p50 | added p99 | ×direct "
             "| ×nginx | errors |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for scenario, per_conc in results["runs"].items():
        for conc, row in per_conc.items():
            for name, c in row.items():
                lines.append(f"| {scenario} | {conc} | {name} | {c['rps']:,.0f} | {c['p50_ms']:.2f} | "
                             f"{c['p99_ms']:.2f} | {c.get('added_p50_ms', '')} | "
                             f"{c.get('added_p99_ms', '')} | {c.get('vs_direct_rps', '')} | "
                             f"{c.get('vs_nginx_rps', '')} | {c['errors']} |")
    ttfb = results.get("stream_ttfb_ms", {})
    direct = ttfb.get("direct", {}).get("p50", 0.0)
    lines.append("")
    lines.append("| streamed G1 | TTFB p50 ms | TTFB p99 ms | added p50 |")
    lines.append("|---|---|---|---|")
    for name, v in ttfb.items():
        lines.append(f"| {name} | {v['p50']:.2f} | {v['p99']:.2f} | {v['p50'] - direct:.2f} |")
    lines.append("")
    lines.append("RSS per worker after the run (MB): " + "; ".join(
        f"{name}: {', '.join(map(str, mbs))}" for name, mbs in results.get("rss_mb", {}).items()))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--setups", default=",".join(SETUPS))
    parser.add_argument("--stream-calls", type=int, default=200)
    parser.add_argument("--out", default="bench-results.json")
    args = parser.parse_args()
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    args.setups = set(args.setups.split(","))
    if shutil.which("wrk") is None:
        sys.exit("bench: wrk is needed (Debian: apt-get install wrk)")
    results = run(args)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(table(results))
    print(f"\nwritten: {args.out}")


if __name__ == "__main__":
    main()
