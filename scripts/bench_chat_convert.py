"""The Anthropic Messages modes of the chat benchmark (`scripts/bench_chat.py --modes`): what Tollway adds
when it converts between OpenAI chat and Anthropic Messages, and when it passes `/v1/messages` through.

    messages-openai   POST /v1/messages (Anthropic body, `stream: true`, `max_tokens`) on an OpenAI (type 1)
                      channel, against the pass-through's fixed OpenAI streams of 1 and 200 chunks
    chat-anthropic    POST /v1/chat/completions on an Anthropic (type 14) channel, against fixed Anthropic
                      streams of 1 and 200 text deltas
    messages          POST /v1/messages on a type 14 channel, against the same Anthropic streams

The fixed Anthropic streams are served by the same fast upstream (nginx or bench_env's Python server) at
a path prefix of their own: Tollway calls `{base_url}/v1/messages` for type 14, so the models
`bench-claude-1` and `bench-claude-200` each have a channel whose `base_url` ends in `/a-s1` or `/a-s200`.
A stream is Anthropic's shape: `message_start` (input 12 tokens, output 1), `content_block_start`, K
`text_delta` events of about 150 bytes each (event line included), `content_block_stop`, `message_delta`
(stop reason and the cumulative usage, output K) and `message_stop`.

Per mode, measures 1 and 2 of the pass-through (one worker; the set-ups `embedded` and `redis-1w`):
1. time to first byte of the 1-event stream, `--stream-calls` sequential calls per set-up and round, and
   direct's on the upstream path of the same stream; p50, p99 and their excess over direct's;
2. wrk (concurrency 16) on K = 1 and K = 200: CPU µs per call and (CPU(200) − CPU(1)) / 199 µs per chunk,
   the worker's alone and the process tree's.
The targets (issue 32): a converted stream adds ≤ 2 ms to the first byte (p50) and ≤ 60 µs of worker CPU
per chunk; a passed-through `/v1/messages` stream meets the chat pass-through's (≤ 1 ms, ≤ 20 µs).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from scripts.bench import Result, Target, first_byte_ms, measure, median_cell, wrk
from scripts.bench_chat_streams import (
    CHAT_PATH,
    CONCURRENCY,
    CPU_COLUMNS,
    PREFIXES,
    STREAM_1,
    STREAM_200,
    TOLLWAYS,
    TTFB_COLUMNS,
    chat_request,
    cpu_cells,
    md_header,
    md_row,
    run_async,
    stream_cpu_cell,
    ttfb_cell,
    ttfb_cells,
)
from scripts.bench_env import ChannelSpec, Fixture
from server.upstream.formats.sse import Events, data_of, name_of

CLAUDE_1, CLAUDE_200 = "bench-claude-1", "bench-claude-200"
CLAUDE_PREFIXES = {CLAUDE_1: "/a-s1", CLAUDE_200: "/a-s200"}
"""The path each Anthropic stream has on the shared upstream (its channel's `base_url` = upstream + this)."""
CLAUDE_EVENTS = {CLAUDE_1: 1, CLAUDE_200: 200}
MESSAGES_PATH = "/v1/messages"
MESSAGE_ID = "msg_01BenchFixedReply"
PROMPT_TOKENS = 12
DELTA_TEXT = " and word{n} of the fixed reply, once more"
"""A text delta's text: with its event line and JSON, an event of about 150 bytes."""
CHAT_MODE = "chat"
"""The pass-through's own measures (1–4 of `scripts/bench_chat.py`)."""


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def sse(name: str, value: object) -> bytes:
    """One Anthropic event: its `event:` line, then its data."""
    return b"event: " + name.encode() + b"\ndata: " + _json(value) + b"\n\n"


def anthropic_stream(model: str, k: int) -> bytes:
    """A whole streamed message of one text block of `k` deltas, as Anthropic sends it."""
    usage = {"input_tokens": PROMPT_TOKENS, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    start: dict[str, object] = {"id": MESSAGE_ID, "type": "message", "role": "assistant", "model": model,
                                "content": [], "stop_reason": None, "stop_sequence": None,
                                "usage": {**usage, "output_tokens": 1}}
    deltas = [sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
        "type": "text_delta", "text": DELTA_TEXT.format(n=i % 10)}}) for i in range(k)]
    return b"".join([
        sse("message_start", {"type": "message_start", "message": start}),
        sse("content_block_start", {"type": "content_block_start", "index": 0,
                                    "content_block": {"type": "text", "text": ""}}),
        *deltas,
        sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        sse("message_delta", {"type": "message_delta", "usage": {**usage, "output_tokens": k},
                              "delta": {"stop_reason": "end_turn", "stop_sequence": None}}),
        sse("message_stop", {"type": "message_stop"})])


def messages_request(model: str) -> str:
    """A caller's streamed Messages body."""
    return json.dumps({"model": model, "max_tokens": 1024, "stream": True,
                       "messages": [{"role": "user", "content": "Say hello to everyone"}]})


def with_claude(base: Fixture) -> Fixture:
    """`base` (the pass-through's fixture) with the Anthropic streams, their type 14 channels and prices."""
    replies = {**base.replies, **{f"{prefix}{MESSAGES_PATH}": ("text/event-stream", anthropic_stream(
        model, CLAUDE_EVENTS[model])) for model, prefix in CLAUDE_PREFIXES.items()}}
    channels = [*base.channels, *(ChannelSpec(f"claude-{model}", 14, model, prefix)
                                  for model, prefix in CLAUDE_PREFIXES.items())]
    ratios = json.loads(base.options.get("ModelRatio", "{}")) | dict.fromkeys(CLAUDE_PREFIXES, 0.5)
    return replace(base, replies=replies, channels=channels,
                   options={**base.options, "ModelRatio": json.dumps(ratios)})


def streamed_chat(model: str) -> str:
    return chat_request(model, stream=True)


@dataclass(frozen=True)
class Mode:
    label: str  # in the tables
    path: str  # the route Tollway serves
    models: tuple[str, str]  # the streams of 1 and 200 events
    direct: str  # the upstream path of the 1-event stream
    request: Callable[[str], str]  # the caller's body for a model


MODES = {
    "messages-openai": Mode("messages→openai", MESSAGES_PATH, (STREAM_1, STREAM_200),
                            f"{PREFIXES[STREAM_1]}{CHAT_PATH}", messages_request),
    "chat-anthropic": Mode("chat→anthropic", CHAT_PATH, (CLAUDE_1, CLAUDE_200),
                           f"{CLAUDE_PREFIXES[CLAUDE_1]}{MESSAGES_PATH}", streamed_chat),
    "messages": Mode("messages pass-through", MESSAGES_PATH, (CLAUDE_1, CLAUDE_200),
                     f"{CLAUDE_PREFIXES[CLAUDE_1]}{MESSAGES_PATH}", messages_request),
}
ALL_MODES = (CHAT_MODE, *MODES)
_ALIASES = {**{m.label: name for name, m in MODES.items()},
            **{m.label.replace("→", "->"): name for name, m in MODES.items()}}


def parse_modes(text: str) -> list[str]:
    """`--modes`: `all`, or names (or the tables' labels) separated by commas, in ALL_MODES's order."""
    asked = {_ALIASES.get(word.strip(), word.strip()) for word in text.split(",") if word.strip()}
    if "all" in asked:
        return list(ALL_MODES)
    if unknown := asked - set(ALL_MODES):
        raise ValueError(f"unknown mode: {', '.join(sorted(unknown))} (any of {', '.join(ALL_MODES)}, all)")
    return [m for m in ALL_MODES if m in asked]


def text_pieces(path: str, body: bytes) -> int:
    """How many text pieces a caller's stream on `path` delivered (chat: chunks with content; Messages:
    `content_block_delta` events). ValueError when it is not a whole stream of its wire: an error, or no
    `[DONE]` (chat) or `message_stop` (Messages) at its end. A converted stream that broke is still a 200."""
    events = Events().feed(body)
    if path == CHAT_PATH:
        datas = [data_of(e) for e in events]
        chunks = [json.loads(d) for d in datas[:-1]]
        if not datas or datas[-1] != b"[DONE]" or any("error" in c for c in chunks):
            raise ValueError(f"not a whole chat stream: {body[-300:]!r}")
        return sum(1 for c in chunks if c.get("choices") and c["choices"][0].get("delta", {}).get("content"))
    names = [name_of(e) for e in events]
    if not names or names[-1] != b"message_stop" or b"error" in names:
        raise ValueError(f"not a whole Messages stream: {body[-300:]!r}")
    return names.count(b"content_block_delta")


def warm_up(targets: dict[str, Target], modes: list[str], workdir: Path) -> None:
    """Each mode's calls once, checked (the stream whole, every event delivered), then a second of wrk."""
    for name, mode in MODES.items():
        if name not in modes:
            continue
        for t in targets.values():
            if t.name not in TOLLWAYS:
                continue
            headers = {"Authorization": f"Bearer {t.key}", "Content-Type": "application/json"}
            for model, k in zip(mode.models, (1, 200), strict=True):
                got = httpx.post(t.base + mode.path, content=mode.request(model), headers=headers, timeout=30)
                if got.status_code != 200 or text_pieces(mode.path, got.content) != k:
                    raise RuntimeError(f"{name} on {t.name}, {model}: {got.status_code} {got.text[-300:]}")
                wrk(t.base + mode.path, t.key, mode.request(model), 4, 1, workdir)


Samples = dict[tuple[str, str], list[float]]
Streamed = dict[tuple[str, str, int], list[Result]]


def one_round(targets: dict[str, Target], modes: list[str], args: argparse.Namespace, workdir: Path,
              round_no: int, ttfb: Samples, streamed: Streamed) -> None:
    """Measures 1 and 2 of every asked mode, once; each set-up's samples and wrk runs added."""
    for name, mode in MODES.items():
        if name not in modes:
            continue
        body = mode.request(mode.models[0])
        for t in targets.values():
            if t.name == "direct" or t.name in TOLLWAYS:
                url = t.base + (mode.direct if t.name == "direct" else mode.path)
                ttfb.setdefault((name, t.name), []).extend(
                    run_async(first_byte_ms(url, t.key, args.stream_calls, body)))
        for t in targets.values():
            if t.name not in TOLLWAYS:
                continue
            for model, k in zip(mode.models, (1, 200), strict=True):
                label = f"{name}-{t.name}-k{k}-r{round_no}"
                streamed.setdefault((name, t.name, k), []).append(
                    measure(t, mode.path, mode.request(model), CONCURRENCY, args, workdir, label))


def figures(ttfb: Samples, streamed: Streamed) -> dict[str, Any]:
    """Per mode: `ttfb_ms` (direct and each set-up) and `stream_cpu` (each Tollway set-up)."""
    out: dict[str, Any] = {}
    for name in MODES:
        if (name, "direct") not in ttfb:
            continue
        direct = ttfb[(name, "direct")]
        out[name] = {
            "ttfb_ms": {setup: ttfb_cell(samples, direct)
                        for (m, setup), samples in ttfb.items() if m == name},
            "stream_cpu": {setup: stream_cpu_cell(median_cell(runs), median_cell(streamed[(m, setup, 200)]),
                                                  setup)
                           for (m, setup, k), runs in streamed.items() if m == name and k == 1}}
    return out


def table(results: dict[str, Any]) -> str:
    """The modes' two tables (Markdown)."""
    cells = results.get("convert", {})
    lines = md_header("mode, sequential streams", "set-up", *TTFB_COLUMNS)
    lines += [md_row(MODES[name].label, setup, *ttfb_cells(c)) for name, mode in cells.items()
              for setup, c in mode["ttfb_ms"].items()]
    lines += md_header(f"mode, c={CONCURRENCY}", "set-up", *CPU_COLUMNS)
    lines += [md_row(MODES[name].label, setup, *cpu_cells(c)) for name, mode in cells.items()
              for setup, c in mode["stream_cpu"].items()]
    return "\n".join(lines[1:])
