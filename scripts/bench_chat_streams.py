"""The chat side of `scripts/bench_chat.py`: what the fake upstreams answer, the paced upstream, the reading
of event delays, and the LiteLLM proxy set-up.

Why a module apart: the fixed replies are shared by nginx (written into its configuration, or into files
past nginx's 4 KiB string limit) and the Python fallback, the paced upstream runs as a process of its own
(`python -m scripts.bench_chat_streams --port P`, pinned like the other upstream), and the pure pieces
(the chunk builder, the percentile, the delay reader) are tested on their own (tests/test_bench_chat.py).
The figures and table rows of measures 1 and 2 are here too: `scripts/bench_chat_convert.py`'s modes
report them as the pass-through does.

The events look like OpenAI's: `chat.completion.chunk` objects of about 150 bytes with one content delta,
the last with `finish_reason: "stop"`, then the usage chunk (`choices: []`) and `data: [DONE]`. The paced
upstream writes the send time (`time.time()`) into each delta's content (`"t1733580000.123456"`), not
into a field of its own: LiteLLM re-encodes every chunk and would drop an unknown field.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import time
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from scripts.bench import BY_PROCESS
from scripts.bench_env import MODERATION, Proc, pinned, repo_env, spawn

TOLLWAYS = ("embedded", "redis-1w")
CONCURRENCY = 16
T = TypeVar("T")

CREATED = 1733580000
CHAT_ID = "chatcmpl-b7Yx0"
PLAIN, STREAM_1, STREAM_200, PACED = "bench-chat", "bench-chat-1", "bench-chat-200", "bench-chat-paced"
PREFIXES = {PLAIN: "/c-plain", STREAM_1: "/c-s1", STREAM_200: "/c-s200"}
"""The path each fixed-reply model's channel has on the shared upstream (its `base_url` = upstream + this):
Tollway builds the upstream path itself, so the reply is chosen by the channel."""
EVENTS = {STREAM_1: 1, STREAM_200: 200}
CHAT_PATH = "/v1/chat/completions"
STAMP = re.compile(rb'"content":\s*"t(\d+\.\d+)"')
EVENT_END = re.compile(rb"\r?\n\r?\n")


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def chunk(model: str, content: str, finish: str | None = None) -> bytes:
    """One `chat.completion.chunk` (the event's data) with one content delta."""
    return _json({"id": CHAT_ID, "object": "chat.completion.chunk", "created": CREATED, "model": model,
                  "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]})


def usage_chunk(model: str, completion: int, prompt: int = 12) -> bytes:
    return _json({"id": CHAT_ID, "object": "chat.completion.chunk", "created": CREATED, "model": model,
                  "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                           "total_tokens": prompt + completion}})


def event(data: bytes) -> bytes:
    return b"data: " + data + b"\n\n"


def stream_body(model: str, k: int) -> bytes:
    """A whole streamed reply: `k` content chunks, the usage chunk, `[DONE]`."""
    parts = [event(chunk(model, f" word{i % 10}", "stop" if i == k - 1 else None)) for i in range(k)]
    return b"".join([*parts, event(usage_chunk(model, k)), event(b"[DONE]")])


def plain_reply(model: str) -> bytes:
    return _json({"id": CHAT_ID, "object": "chat.completion", "created": CREATED, "model": model,
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello, everyone!"},
                               "logprobs": None, "finish_reason": "stop"}],
                  "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}})


def chat_replies() -> dict[str, tuple[str, bytes]]:
    """The fixed replies of the shared upstream: exact path → content type, body."""
    replies = {f"{PREFIXES[PLAIN]}{CHAT_PATH}": ("application/json", plain_reply(PLAIN))}
    for model, k in EVENTS.items():
        replies[f"{PREFIXES[model]}{CHAT_PATH}"] = ("text/event-stream", stream_body(model, k))
    return replies


def chat_request(model: str, *, stream: bool) -> str:
    """A caller's body; a streamed one asks for the usage chunk, as the openai SDK's users usually do."""
    messages = [{"role": "user", "content": "Say hello to everyone"}]
    body: dict[str, object] = {"model": model, "messages": messages}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return json.dumps(body)


# ---- figures -------------------------------------------------------------------------------------------

def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile: the smallest value with at least q % of the values at or below it."""
    if not values or not 0 <= q <= 100:
        raise ValueError("percentile: needs values and 0 ≤ q ≤ 100")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def per_chunk_us(cpu_small: float, cpu_large: float, k_small: int = 1, k_large: int = 200) -> float:
    """CPU µs per streamed chunk from the CPU µs per call at two chunk counts."""
    return (cpu_large - cpu_small) / (k_large - k_small)


def worker_us(cell: dict[str, Any], name: str) -> float:
    """CPU µs per call of the serving process alone (without `tollway serve`'s quota sync process)."""
    return float(cell.get(BY_PROCESS, {}).get(name, cell["cpu_us_per_call"]))


def ttfb_cell(samples: Sequence[float], direct: Sequence[float]) -> dict[str, Any]:
    """Measure 1's figures of a set-up: p50, p99 and their excess over direct's (calls are not paired)."""
    p50, p99 = percentile(samples, 50), percentile(samples, 99)
    return {"n": len(samples), "p50": round(p50, 3), "p99": round(p99, 3),
            "added_p50": round(p50 - percentile(direct, 50), 3),
            "added_p99": round(p99 - percentile(direct, 99), 3)}


def stream_cpu_cell(k1: dict[str, Any], k200: dict[str, Any], name: str) -> dict[str, Any]:
    """Measure 2's figures of a set-up from its median wrk cells at K = 1 and K = 200: the worker's and
    the process tree's CPU µs per chunk."""
    return {"k1": k1, "k200": k200,
            "us_per_chunk": round(per_chunk_us(worker_us(k1, name), worker_us(k200, name), 1, 200), 1),
            "us_per_chunk_tree": round(
                per_chunk_us(k1["cpu_us_per_call"], k200["cpu_us_per_call"], 1, 200), 1)}


def md_header(*names: str) -> list[str]:
    return ["", "| " + " | ".join(names) + " |", "|" + "---|" * len(names)]


def md_row(*cells: object) -> str:
    return "| " + " | ".join(f"{c:,}" if isinstance(c, int) else str(c) for c in cells) + " |"


TTFB_COLUMNS = ("TTFB p50 ms", "p99 ms", "added p50", "added p99", "calls")
CPU_COLUMNS = ("K=1 req/s", "K=1 CPU µs/call", "K=200 req/s", "K=200 CPU µs/call", "worker µs per chunk",
               "tree µs per chunk", "errors")


def ttfb_cells(c: dict[str, Any]) -> list[object]:
    return [f"{c['p50']:.2f}", f"{c['p99']:.2f}", f"{c['added_p50']:.2f}", f"{c['added_p99']:.2f}", c["n"]]


def cpu_cells(c: dict[str, Any]) -> list[object]:
    k1, k200 = c["k1"], c["k200"]
    return [f"{k1['rps']:,.0f}", k1.get("cpu_us_per_call", ""), f"{k200['rps']:,.0f}",
            k200.get("cpu_us_per_call", ""), c["us_per_chunk"], c["us_per_chunk_tree"],
            k1["errors"] + k200["errors"]]


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """On uvloop when it is there (a lighter client, as the server's workers)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


class Stamps:
    """Reads the send times out of a stream as it arrives: every whole event's stamp, against the time its
    last byte was read (an event split across reads is complete only at its blank line)."""

    __slots__ = ("_buf", "delays_ms")

    def __init__(self) -> None:
        self._buf = b""
        self.delays_ms: list[float] = []

    def feed(self, data: bytes, now: float) -> None:
        buf = self._buf + data
        ends = [m.end() for m in EVENT_END.finditer(buf)]
        if not ends:
            self._buf = buf
            return
        whole, self._buf = buf[:ends[-1]], buf[ends[-1]:]
        self.delays_ms.extend((now - float(m.group(1))) * 1000 for m in STAMP.finditer(whole))


# ---- the paced upstream ---------------------------------------------------------------------------------

async def _paced(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, events: int, interval: float
                 ) -> None:
    """HTTP/1.1 keep-alive: each POST gets `events` chunks, one every `interval` s, each stamped as sent."""
    loop = asyncio.get_running_loop()
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            model = json.loads(await reader.readexactly(length) or b"{}").get("model", PACED)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")
            start = loop.time()
            for i in range(events):
                await asyncio.sleep(max(0.0, start + i * interval - loop.time()))
                data = event(chunk(model, f"t{time.time():.6f}", "stop" if i == events - 1 else None))
                writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                await writer.drain()
            tail = event(usage_chunk(model, events)) + event(b"[DONE]")
            writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(tail), tail))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()


async def serve_paced(port: int, events: int, interval: float) -> None:
    server = await asyncio.start_server(lambda r, w: _paced(r, w, events, interval), "127.0.0.1", port,
                                        backlog=1024)
    await server.serve_forever()


def start_paced(workdir: Path, port: int, events: int, interval: float, python: str) -> Proc:
    """The paced upstream as a process of its own, pinned to CPU 1 with the load."""
    argv = [python, "-m", "scripts.bench_chat_streams", "--port", str(port), "--events", str(events),
            "--interval", str(interval)]
    return spawn(f"paced-{port}", pinned("1", argv), workdir, repo_env())


# ---- LiteLLM --------------------------------------------------------------------------------------------

LITELLM_VENV = "/tmp/litellm-venv"  # noqa: S108 (a venv of its own, made by hand: never the project's)
LITELLM_EXE = f"{LITELLM_VENV}/bin/litellm"
LITELLM_INSTALL = f"python3 -m venv {LITELLM_VENV} && {LITELLM_VENV}/bin/pip install 'litellm[proxy]'"
LITELLM_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True",  # else it fetches its price list at import
               "LITELLM_TELEMETRY": "False", "LITELLM_LOG": "ERROR"}
QUIET_ACCESS_LOG = {"version": 1, "disable_existing_loggers": False,
                    "loggers": {name: {"level": "WARNING"} for name in ("uvicorn.access", "uvicorn.error")}}


def litellm_config(upstream: str, paced: str, master_key: str) -> str:
    """A proxy config (JSON is YAML) with every bench model as `openai/…` on the fake upstreams."""
    bases = {**{model: f"{upstream}{prefix}/v1" for model, prefix in PREFIXES.items()},
             PACED: f"{paced}/v1", MODERATION: f"{upstream}/v1"}
    models = [{"model_name": name, "litellm_params": {"model": f"openai/{name}", "api_base": base,
                                                      "api_key": "k"}} for name, base in bases.items()]
    return json.dumps({"model_list": models, "general_settings": {"master_key": master_key},
                       "litellm_settings": {"telemetry": False}}, indent=1)


def start_litellm(workdir: Path, port: int, exe: str, upstream: str, paced: str, master_key: str) -> Proc:
    """`litellm --config` with one uvicorn worker, pinned to CPU 0 like a 1-worker Tollway, access log off
    (Tollway logs only warnings too). Raises FileNotFoundError when `exe` is not installed."""
    if not Path(exe).exists() and shutil.which(exe) is None:
        raise FileNotFoundError(f"{exe} not found (install: {LITELLM_INSTALL})")
    config, log_config = workdir / "litellm.yaml", workdir / "litellm-log.json"
    config.write_text(litellm_config(upstream, paced, master_key))
    log_config.write_text(json.dumps(QUIET_ACCESS_LOG))
    env = {**os.environ, **LITELLM_ENV}
    for name in ("DATABASE_URL", "REDIS_URL", "REDIS_HOST"):  # no database: keys from the config only
        env.pop(name, None)
    argv = [exe, "--config", str(config), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1",
            "--log_config", str(log_config)]
    return spawn("litellm", pinned("0", argv), workdir, env)


def litellm_version(exe: str) -> str:
    """The installed LiteLLM's version, read from its venv's metadata (importing litellm is slow)."""
    python = Path(exe).with_name("python")
    if not python.exists():
        return "not installed"
    code = "import importlib.metadata as m; print(m.version('litellm'))"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description="the paced chat upstream of scripts/bench_chat.py")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--interval", type=float, default=0.02)
    args = parser.parse_args()
    runner: asyncio.Runner
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    with runner, contextlib.suppress(KeyboardInterrupt):
        runner.run(serve_paced(args.port, args.events, args.interval))


if __name__ == "__main__":
    main()
