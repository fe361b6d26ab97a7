"""Upstream client benchmark: the gateway's `server.upstream.client.Upstream` on each transport (aiohttp,
httpx's own), as the model calls use it (`open`, `read`, `close`) and as the administrative calls do
(`UpstreamAdmin.models`: `open(call, seconds=)`, the body read by `next_chunk()` under its byte cap and
deadline), with a plain `httpx.AsyncClient` as the reference, against a minimal keep-alive HTTP server in
another process (a moderation answer to a POST, a one-model list to a GET).

    python -m scripts.bench_transport [--requests 5000] [--concurrency 1,16,64] [--rounds 3]

Prints requests/s, p50/p99 latency and the client process's CPU time per request (what a gateway worker
pays for the call; steadier than the rate on a shared machine) per variant and concurrency (rounds
interleaved, medians).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import socket
import statistics
import time
from collections.abc import Awaitable, Callable
from ipaddress import ip_network

import httpx
import uvloop

from core.enums import ChannelType
from server.upstream.admin import UpstreamAdmin
from server.upstream.client import Upstream
from server.upstream.providers import PROVIDERS
from server.upstream.providers.base import UpstreamCall


def _response(reply: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(reply)).encode() + b"\r\n\r\n" + reply)


MODERATION = _response(b'{"id":"modr-1","model":"omni-moderation-latest","results":[{"flagged":false,'
                       b'"categories":{},"category_scores":{},"category_applied_input_types":{}}]}')
MODEL_LIST = _response(b'{"object":"list","data":[{"id":"omni-moderation-latest","object":"model",'
                       b'"created":1700000000,"owned_by":"openai"}]}')
LOOPBACK = (ip_network("127.0.0.1/32"),)
BODY = b'{"input":"hello world, is this fine?","model":"omni-moderation-latest"}'


def _serve(sock: socket.socket) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                if length:
                    await reader.readexactly(length)
                writer.write(MODEL_LIST if head.startswith(b"GET ") else MODERATION)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, sock=sock)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


VARIANTS = ("client+httpx", "upstream+aiohttp", "upstream+httpx", "admin+aiohttp", "admin+httpx")


async def run(variant: str, base: str, total: int, concurrency: int) -> tuple[float, float, float, float]:
    kind, _, transport = variant.partition("+")
    url = f"{base}/v1/moderations"
    latencies: list[float] = []
    remaining = total
    headers = {"Content-Type": "application/json"}
    call: Callable[[], Awaitable[None]]
    close: Callable[[], Awaitable[None]]
    if kind == "client":
        client = httpx.AsyncClient(limits=httpx.Limits(max_connections=1000, max_keepalive_connections=1000),
                                   timeout=30.0)

        async def via_client() -> None:
            await (await client.post(url, content=BODY, headers=headers)).aread()

        call, close = via_client, client.aclose
    else:
        upstream = Upstream(30.0, transport=transport, allow_private=LOOPBACK)  # the upstream is local
        close = upstream.aclose
        if kind == "upstream":
            async def via_upstream() -> None:  # a model call
                response = await upstream.open(UpstreamCall("POST", url, headers, BODY))
                try:
                    await response.read()
                finally:
                    await response.close()

            call = via_upstream
        else:
            admin = UpstreamAdmin(upstream, PROVIDERS)
            target = admin.target(ChannelType.OPENAI, base)

            async def via_admin() -> None:  # an administrative call: the upstream's model list
                await admin.models(target, "sk-bench")

            call = via_admin

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            start = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - start)

    for _ in range(200):  # warm the pool
        await call()
    began, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
    await close()
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    count = len(latencies)
    return count / elapsed, statistics.median(latencies) * 1000, p99 * 1000, cpu / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="a comma-separated subset of "
                        + ", ".join(VARIANTS))
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variants: {', '.join(sorted(unknown))}")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    proc = multiprocessing.Process(target=_serve, args=(sock,), daemon=True)
    proc.start()
    try:
        print(f"{'variant':17} {'conc':>5} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'cpu µs':>8}"
              f"  (median of {args.rounds})")
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            results: dict[str, list[tuple[float, float, float, float]]] = {v: [] for v in variants}
            for _ in range(args.rounds):  # interleaved
                for variant in results:
                    results[variant].append(uvloop.run(run(variant, base, args.requests, concurrency)))
            for variant, runs in results.items():
                rps, p50, p99, cpu = (statistics.median(r[i] for r in runs) for i in range(4))
                print(f"{variant:17} {concurrency:>5} {rps:>9.0f} {p50:>8.2f} {p99:>8.2f} {cpu:>8.0f}")
    finally:
        proc.terminate()


if __name__ == "__main__":
    main()
