"""Upstream client benchmark: httpx's default transport against httpx-aiohttp's, each through a plain
`httpx.AsyncClient` and through the gateway's own `server.upstream.client.Upstream` (requests straight to
the transport), POSTing a moderation-sized body to a minimal keep-alive HTTP server in another process.

    python -m scripts.bench_transport [--requests 5000] [--concurrency 1,16,64]

Prints requests/s and p50/p99 latency per transport and concurrency. Needs the `aiohttp` extra.
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

from server.upstream.client import Upstream
from server.upstream.providers.base import UpstreamCall

REPLY = (b'{"id":"modr-1","model":"omni-moderation-latest","results":[{"flagged":false,"categories":{},'
         b'"category_scores":{},"category_applied_input_types":{}}]}')
RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(REPLY)).encode() + b"\r\n\r\n" + REPLY)
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
                writer.write(RESPONSE)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, sock=sock)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


VARIANTS = ("client+httpx", "client+aiohttp", "upstream+httpx", "upstream+aiohttp")


async def run(variant: str, url: str, total: int, concurrency: int) -> tuple[float, float, float]:
    kind, _, transport = variant.partition("+")
    latencies: list[float] = []
    remaining = total
    headers = {"Content-Type": "application/json"}
    call: Callable[[], Awaitable[None]]
    if kind == "upstream":
        upstream = Upstream(30.0, transport=transport, allow_private=LOOPBACK)  # the upstream is local

        async def via_upstream() -> None:
            response = await upstream.send(UpstreamCall("POST", url, headers, BODY))
            await response.aread()
            await response.aclose()

        call, close = via_upstream, upstream.aclose
    else:
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
        if transport == "aiohttp":
            from httpx_aiohttp import AiohttpTransport

            client = httpx.AsyncClient(transport=AiohttpTransport(limits=limits), timeout=30.0)
        else:
            client = httpx.AsyncClient(limits=limits, timeout=30.0)

        async def via_client() -> None:
            await (await client.post(url, content=BODY, headers=headers)).aread()

        call, close = via_client, client.aclose

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            start = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - start)

    for _ in range(200):  # warm the pool
        await call()
    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - began
    await close()
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    return len(latencies) / elapsed, statistics.median(latencies) * 1000, p99 * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1/moderations"
    proc = multiprocessing.Process(target=_serve, args=(sock,), daemon=True)
    proc.start()
    try:
        print(f"{'variant':17} {'conc':>5} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8}"
              f"  (median of {args.rounds})")
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            results: dict[str, list[tuple[float, float, float]]] = {v: [] for v in VARIANTS}
            for _ in range(args.rounds):  # interleaved
                for transport in results:
                    results[transport].append(uvloop.run(run(transport, url, args.requests, concurrency)))
            for transport, runs in results.items():
                rps, p50, p99 = (statistics.median(r[i] for r in runs) for i in range(3))
                print(f"{transport:17} {concurrency:>5} {rps:>9.0f} {p50:>8.2f} {p99:>8.2f}")
    finally:
        proc.terminate()


if __name__ == "__main__":
    main()
