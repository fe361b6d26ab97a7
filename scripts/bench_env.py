"""The set-ups of the end-to-end benchmark (`scripts/bench.py`): processes, the upstream, the proxies.

Starting and stopping what is measured, one function per kind: nginx as the upstream (fixed moderation,
generateContent and streaming replies) or its Python stand-in, nginx as a reverse proxy, the bare relay
(`scripts/bare_relay.py`), and `tollway serve` with its database, channels, balance and key. `Proc` also
reads what a process tree costs: CPU time (utime + stime of the process and every descendant, from
/proc) and resident memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

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
SETUPS = ("direct", "nginx", "bare", "embedded", "redis-1w", "redis-2w", "redis-1w-sync")
BASELINES = ("direct", "nginx", "bare")  # what Tollway is compared with
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

    def cpu_seconds(self) -> dict[int, float]:
        """CPU time (user + system) used so far by this process and each descendant, by pid."""
        return {pid: cpu_seconds(pid) for pid in self.pids()}

    def stop(self) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGINT)
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()


REPO = Path(__file__).resolve().parent.parent


def repo_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a Python process started from this checkout (its modules first on the path)."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


def spawn(name: str, argv: list[str], workdir: Path, env: dict[str, str] | None = None) -> Proc:
    log = workdir / f"{name}.log"
    popen = subprocess.Popen(argv, cwd=workdir, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                             start_new_session=True)
    return Proc(name, popen, log)


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (fields 14 and 15 of /proc/<pid>/stat; 0 once it is gone)."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()  # the name in parentheses may hold spaces
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return 0.0


def cpu_used(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds a process tree used between two readings (a process born meanwhile counts in full)."""
    return sum(max(0.0, t - before.get(pid, 0.0)) for pid, t in after.items())


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


CONFIG_STRING_MAX = 3500
"""The longest reply an nginx location returns inline (`return 200 '…'`): nginx refuses a configuration
token over 4 KiB, so a longer reply is served from a file."""


def fixed_locations(workdir: Path, replies: Mapping[str, tuple[str, bytes]]) -> str:
    """nginx locations answering each exact path of `replies` (path → content type, body) with its fixed
    body: inline when short, else from a file (the static module refuses a POST with 405, which
    `error_page` turns into the file's 200). Started as root, nginx's workers run as an unprivileged user:
    the files' directory is readable by all, and `workdir` may be passed through (not listed)."""
    out = []
    files = workdir / "replies"
    for n, (path, (kind, body)) in enumerate(replies.items()):
        text = body.decode()
        if len(body) <= CONFIG_STRING_MAX and "'" not in text and "\\" not in text and "$" not in text:
            out.append(f"        location = {path} {{ default_type {kind}; return 200 '{text}'; }}")
        else:
            files.mkdir(mode=0o755, exist_ok=True)
            workdir.chmod(workdir.stat().st_mode | 0o111)
            file = files / f"reply-{n}"
            file.write_bytes(body)
            file.chmod(0o644)
            out.append(f"        location = {path} {{ default_type {kind}; alias {file}; "
                       "error_page 405 =200 $uri; }")
    return "\n".join(out) + "\n"


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


def start_python_upstream(workdir: Path, port: int, replies: Mapping[str, tuple[str, bytes]] | None = None
                          ) -> Proc:
    """The fallback upstream: the project's fake servers are for tests; here a minimal keep-alive server.
    `replies` adds fixed replies (path → content type, body), chosen by the end of the request's path."""
    extra = {path.encode(): (kind.encode(), body) for path, (kind, body) in (replies or {}).items()}
    code = f"""
import asyncio
REPLIES = {{b"/v1/moderations": (b"application/json", {MODERATION_REPLY.encode()!r}),
           b":generateContent": (b"application/json", {GENERATE_REPLY.encode()!r}),
           b":streamGenerateContent": (b"text/event-stream", {STREAM_REPLY.encode()!r}),
           **{extra!r}}}
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


def start_bare(workdir: Path, port: int, upstream: str, key: str) -> Proc:
    """The bare relay (`scripts/bare_relay.py`), pinned like a 1-worker Tollway."""
    argv = [sys.executable, "-m", "scripts.bare_relay", "--port", str(port), "--upstream", upstream,
            "--key", key]
    return spawn("bare", pinned("0", argv), workdir, repo_env())


# ---- Tollway -----------------------------------------------------------------------------------------

def tollway_env(workdir: Path, port: int, extra: dict[str, str]) -> dict[str, str]:
    env = repo_env({k: v for k, v in os.environ.items()
                    if k not in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DATA_DIR", "WORKERS")})
    env.update(HOST="127.0.0.1", PORT=str(port), DATA_DIR=str(workdir / f"data-{port}"), LOG_LEVEL="WARNING",
               GLOBAL_API_RATE_LIMIT="0", CRITICAL_RATE_LIMIT="0",
               UPSTREAM_ALLOW_PRIVATE="127.0.0.1/32",  # the upstream (nginx or the fallback) is on loopback
               QUOTA_HOLD_TIMEOUT=str(HOLD_LEASE), **extra)
    return env


HOLD_LEASE = 20
"""QUOTA_HOLD_TIMEOUT of the measured set-ups: a call that wrk cuts off at the end of a run while its
reservation is on the wire leaves a hold that only the sweeper returns, after this lease; the conservation
check waits for it (calls here last milliseconds, far inside any lease)."""

RATE_LIMITED = {  # --rate-limit: the per-user model request limit on, far above what the load reaches
    "ModelRequestRateLimitEnabled": "true", "ModelRequestRateLimitCount": "100000000",
    "ModelRequestRateLimitSuccessCount": "100000000"}


def _root(c: httpx.Client) -> int:
    login = c.post("/api/user/login", json={"username": "root", "password": ROOT_PASSWORD})
    login.raise_for_status()
    user_id = int(login.json()["data"]["id"])
    c.headers["New-Api-User"] = str(user_id)
    return user_id


@dataclass(frozen=True)
class ChannelSpec:
    """A channel `prepare_tollway` adds: `base_url` is absolute (http…) or a path on the shared upstream."""

    name: str
    type: int
    models: str
    base_url: str = ""


@dataclass(frozen=True)
class Fixture:
    """What a benchmark adds to `scripts/bench.py`'s set-up (`scripts/bench_chat.py`): fixed upstream
    replies (exact path → content type, body), channels and options."""

    replies: Mapping[str, tuple[str, bytes]] = field(default_factory=dict)
    channels: Sequence[ChannelSpec] = ()
    options: Mapping[str, str] = field(default_factory=dict)


def prepare_tollway(base: str, upstream: str, options: Mapping[str, str] | None = None,
                    channels: Sequence[ChannelSpec] = ()) -> str:
    """Setup, a balance, a Gemini and an OpenAI channel on the upstream (and `channels`), an API key, the
    `options`; returns the key."""
    with httpx.Client(base_url=base, timeout=30) as c:
        c.post("/api/setup", json={"username": "root", "password": ROOT_PASSWORD,
                                   "confirmPassword": ROOT_PASSWORD}).raise_for_status()
        login = c.post("/api/user/login", json={"username": "root", "password": ROOT_PASSWORD})
        login.raise_for_status()
        c.headers["New-Api-User"] = str(login.json()["data"]["id"])
        specs = [ChannelSpec("gemini", 24, TTS), ChannelSpec("openai", 1, MODERATION), *channels]
        for spec in specs:
            url = spec.base_url if spec.base_url.startswith("http") else upstream + spec.base_url
            channel = {"name": spec.name, "type": spec.type, "key": "k", "base_url": url,
                       "models": spec.models}
            c.post("/api/channel/", json={"mode": "single", "channel": {**channel, "group": "default"}}
                   ).raise_for_status()
        c.post("/api/user/manage", json={"id": login.json()["data"]["id"], "action": "add_quota",
                                          "mode": "add", "value": 10**14}).raise_for_status()
        for name, value in (options or {}).items():
            c.put("/api/option/", json={"key": name, "value": value}).raise_for_status()
        made = c.post("/api/token/", json={"name": "bench", "remain_quota": 10**14})
        made.raise_for_status()
        return str(made.json()["data"]["key"])


@dataclass(frozen=True)
class Ledger:
    """The root user's and the bench key's live balances, the consume logs' sum in SQL and the user's
    durable (SQL) balance, read through the API and `sql_balance`."""

    user: int
    key: int
    logged: int
    durable: int


def ledger(base: str, sql_balance: Callable[[int], int]) -> Ledger:
    with httpx.Client(base_url=base, timeout=30) as c:
        user_id = _root(c)
        user = c.get("/api/user/self").json()["data"]["quota"]
        keys = c.get("/api/token/", params={"p": 1, "page_size": 100}).json()["data"]
        rows = keys["items"] if isinstance(keys, dict) else keys
        key = next(k["remain_quota"] for k in rows if k["name"] == "bench")
        logged = c.get("/api/log/stat", params={"type": 2}).json()["data"]["quota"]
        return Ledger(int(user), int(key), int(logged), sql_balance(user_id))


def conserved(base: str, before: Ledger, sql_balance: Callable[[int], int], wait: float = HOLD_LEASE + 60
              ) -> dict[str, int | bool]:
    """Once the sync has moved every settled call and the sweeper has returned the holds of calls cut off
    mid-reservation: live balance = initial − Σ consume logs, for the user and the key, and the durable
    balance = the live one. Polls up to `wait` seconds."""
    deadline = time.monotonic() + wait
    while True:
        now = ledger(base, sql_balance)
        spent = now.logged - before.logged
        ok = (now.user == before.user - spent and now.key == before.key - spent and now.durable == now.user)
        if ok or time.monotonic() > deadline:
            return {"ok": ok, "spent_logged": spent, "user_drop": before.user - now.user,
                    "key_drop": before.key - now.key, "durable_minus_live": now.durable - now.user}
        time.sleep(1.0)


def sqlite_balance(path: Path) -> Callable[[int], int]:
    def read(user_id: int) -> int:
        import sqlite3

        with contextlib.closing(sqlite3.connect(path)) as db:
            return int(db.execute("SELECT quota FROM users WHERE id = ?", (user_id,)).fetchone()[0])
    return read


def mariadb_balance(name: str) -> Callable[[int], int]:
    def read(user_id: int) -> int:
        out = subprocess.run(["mariadb", "-uroot", "-h127.0.0.1", "-N", "-B", name, "-e",
                              f"SELECT quota FROM users WHERE id = {int(user_id)}"],  # noqa: S608 (an int)
                             capture_output=True, text=True, check=True).stdout
        return int(out.strip())
    return read


def mariadb(sql: str, *, check: bool = True) -> None:
    subprocess.run(["mariadb", "-uroot", "-h127.0.0.1", "-e", sql], check=check)


def mariadb_database() -> tuple[str, str]:
    name = f"tollway_bench_{secrets.token_hex(3)}"
    mariadb(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    return name, f"mysql://root@127.0.0.1:3306/{name}"


def purge_redis(prefix: str) -> None:
    subprocess.run(["sh", "-c", f"redis-cli --scan --pattern '{prefix}*' | xargs -r redis-cli del"],
                   check=False, capture_output=True)



def worker_rss(proc: Proc) -> list[float]:
    """RSS of each serving process: the workers Sanic spawned, or the one process serving alone (the
    manager and the multiprocessing helper of a multi-worker start are left out)."""
    pids = proc.pids()
    workers = [pid for pid in pids[1:] if "spawn_main" in cmdline(pid) and "resource_tracker" not in
               cmdline(pid)]
    return [round(rss_mb(pid), 1) for pid in (workers or pids[:1])]


def cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    return ""

