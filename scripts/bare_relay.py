"""The `bare` set-up of the benchmark: the least a Python relay on our stack does per call.

    python -m scripts.bare_relay --port P --upstream http://127.0.0.1:U --key K

One Sanic process (no workers, no access log) with one catch-all POST route: it checks a fixed bearer key
(`Authorization: Bearer K` or `x-goog-api-key: K`), POSTs the body to the same path on the upstream over
one pooled keep-alive `aiohttp.ClientSession`, and answers the upstream's status, content type and bytes
(a `streamGenerateContent` reply is passed through chunk by chunk). No database, no quota, no logs, no
validation: what is left of a Tollway call once every gateway step is removed — the same HTTP server, the
same HTTP client library, the same event loop. `scripts/bench.py` reports each Tollway set-up against it
(×bare), which is the fair ceiling for the gateway's own work, where ×nginx is the ceiling of any proxy.
"""

from __future__ import annotations

import argparse
from typing import Any

import aiohttp
from sanic import Request, Sanic
from sanic.response import HTTPResponse, empty, raw


def create_app(upstream: str, key: str) -> Sanic[Any, Any]:
    app: Sanic[Any, Any] = Sanic("bare_relay")
    app.config.ACCESS_LOG = False
    app.config.NOISY_EXCEPTIONS = False
    app.config.KEEP_ALIVE_TIMEOUT = 75
    bearer = f"Bearer {key}"
    session: dict[str, aiohttp.ClientSession] = {}

    @app.before_server_start
    async def open_session(app: Sanic[Any, Any]) -> None:
        connector = aiohttp.TCPConnector(limit=512, keepalive_timeout=60)
        session["s"] = aiohttp.ClientSession(upstream, connector=connector)

    @app.after_server_stop
    async def close_session(app: Sanic[Any, Any]) -> None:
        await session["s"].close()

    @app.get("/api/status")
    async def status(request: Request) -> HTTPResponse:
        return empty(200)

    @app.post("/<path:path>")
    async def relay(request: Request, path: str) -> HTTPResponse | None:
        headers = request.headers
        if headers.get("authorization") != bearer and headers.get("x-goog-api-key") != key:
            return raw(b'{"error":"invalid key"}', status=401, content_type="application/json")
        target = request.path + (f"?{request.query_string}" if request.query_string else "")
        async with session["s"].post(target, data=request.body,
                                     headers={"Content-Type": "application/json"}) as reply:
            kind = reply.headers.get("content-type", "application/json")
            if not path.endswith(":streamGenerateContent"):
                return raw(await reply.read(), status=reply.status, content_type=kind)
            response = await request.respond(status=reply.status, content_type=kind)
            async for chunk in reply.content.iter_any():
                await response.send(chunk)
            await response.eof()
            return None

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="base URL of the upstream")
    parser.add_argument("--key", required=True, help="the bearer key callers must send")
    args = parser.parse_args()
    app = create_app(args.upstream, args.key)
    app.prepare(host=args.host, port=args.port, single_process=True, motd=False, access_log=False)
    Sanic.serve_single(primary=app)


if __name__ == "__main__":
    main()
