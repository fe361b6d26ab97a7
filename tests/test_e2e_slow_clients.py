"""End to end: clients that send their request slowly are cut at the request deadlines of the real
`tollway serve` (embedded, and MariaDB + Redis with two workers), and long answers are not.

    trickled head     a request line, then one header line every half second: 408 once
                      REQUEST_HEAD_TIMEOUT has passed since the connection opened
    trickled body     a whole head, then the body one byte every half second (an `/api` route and a model
                      call): 408 once REQUEST_BODY_TIMEOUT has passed since the head
                      (either way the client goes on sending: the connection is closed all the same)
    silent            a connection that sends nothing is closed
    meanwhile         a normal request is answered, during the trickles and after them
    long answers      a streamed model call that lasts longer than both deadlines together completes; a
                      model call whose upstream answers after 9 s, and a stream whose upstream pauses 9 s,
                      are answered in full although Sanic's own timers are set to 3 s (its 60 s cut both)
    nothing counted   logins whose body trickles, more of them than the critical rate limit allows, are each
                      answered 408 (Sanic ran the guard before the error answer: the limit was counted, and
                      past it the answer was a 429) and leave the whole limit to the logins that follow, and
                      the global limit to the requests that follow; their access lines say 408, not 500

Each trickle could go on for 30 s (60 pieces), fifteen times the deadlines set here (2 s): it passes when
the server ends it before it is over, so nothing here measures time.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from tests.fakes.gemini import FakeGemini
from tests.test_e2e_serve import Proc, clean_env, free_port, start, stop, wait_until_serving
from tests.test_e2e_stop import FAKES_NETWORK, SPEECH, TTS, open_gateway, stack_env, stream_speech

pytestmark = pytest.mark.slow

DEADLINE = "2"  # seconds, for the head and for the body
PIECES = 60
EVERY = 0.5  # seconds between two pieces: a trickle lasts PIECES * EVERY = 30 s unless the server ends it
SANIC_TIMEOUT = "3"  # seconds: Sanic's own timers, in the test of long answers


async def trickle(port: int, head: bytes, pieces: list[bytes]) -> tuple[str, bool]:
    """Send `head`, then `pieces` one every EVERY seconds, whatever the server answers meanwhile (as a
    client that ignores a 408 would). Returns (the status the server answered, "none" without an answer;
    whether the server closed the connection before every piece was sent)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer = "none"
    try:
        writer.write(head)
        await writer.drain()
        for piece in pieces:
            try:
                received = await asyncio.wait_for(reader.read(4096), EVERY)
            except TimeoutError:
                writer.write(piece)
                await writer.drain()
                continue
            if not received:
                return answer, True
            if answer == "none":
                answer = received.split(b" ", 2)[1].decode()
        return answer, False
    except ConnectionError:
        return answer, True
    finally:
        writer.close()


def slow_head(path: str) -> tuple[bytes, list[bytes]]:
    return (f"GET {path} HTTP/1.1\r\nHost: t\r\n".encode(),
            [f"X-Slow-{i}: {i}\r\n".encode() for i in range(PIECES)])


def slow_body(path: str, headers: str = "") -> tuple[bytes, list[bytes]]:
    head = (f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n{headers}"
            f"Content-Length: {PIECES}\r\n\r\n")
    return head.encode(), [b" "] * PIECES


@pytest.mark.parametrize("stack", ["embedded", "mariadb+redis"])
async def test_trickled_requests_are_cut_at_their_deadlines_and_long_answers_are_not(tmp_path: Path,
                                                                                     stack: str) -> None:
    async with FakeGemini(stream_chunks=6, chunk_delay=1.0) as gemini:  # 5 s: longer than both deadlines
        with stack_env(tmp_path, stack, UPSTREAM_ALLOW_PRIVATE=FAKES_NETWORK, REQUEST_HEAD_TIMEOUT=DEADLINE,
                       REQUEST_BODY_TIMEOUT=DEADLINE) as (env, _, args):
            proc = start(tmp_path, env, "serve", *args)
            try:
                port = int(env["PORT"])
                base_url = f"http://127.0.0.1:{port}"
                await asyncio.to_thread(wait_until_serving, proc, base_url)
                gateway = await open_gateway(base_url, "mysql" if stack == "mariadb+redis" else "sqlite",
                                             gemini)
                slow = {
                    "head": [slow_head("/api/status") for _ in range(20)],
                    "api body": [slow_body("/api/user/login") for _ in range(20)],
                    "model body": [slow_body(f"/v1beta/models/{TTS}:generateContent",
                                             "x-goog-api-key: sk-nothing\r\n") for _ in range(5)],
                    "silent": [(b"", [b""] * PIECES) for _ in range(10)],
                }
                trickles = {kind: [asyncio.ensure_future(trickle(port, *job)) for job in jobs]
                            for kind, jobs in slow.items()}
                async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
                    assert (await client.get("/api/status")).status_code == 200  # while they trickle
                    ended = {kind: await asyncio.gather(*tasks) for kind, tasks in trickles.items()}
                    assert (await client.get("/api/status")).status_code == 200
                cut = ("408", True)  # answered 408, and the connection closed although the client went on
                assert ended == {"head": [cut] * 20, "api body": [cut] * 20, "model body": [cut] * 5,
                                 "silent": [("none", True)] * 10}

                _, events = await stream_speech(gateway)
                assert len(events) == 6 and events[-1]["candidates"][0]["finishReason"] == "STOP"
            finally:
                await asyncio.to_thread(stop, proc)
    assert "Traceback" not in proc.stderr, proc.output()


async def test_model_calls_longer_than_a_minute_are_answered_in_full(tmp_path: Path) -> None:
    """Sanic's RESPONSE_TIMEOUT (60 s since the last byte) answered a slow model call with a 503 and cut a
    stream whose upstream paused: the handler's own deadlines (UPSTREAM_TIMEOUT, STREAM_IDLE_TIMEOUT) are
    the ones that apply. Sanic's own timers are set to `SANIC_TIMEOUT` seconds here through its own
    environment variables, so that a pause of three times that proves what a pause of 100 s past its
    default of 60 s proved, in a tenth of the time."""
    pause = 3 * float(SANIC_TIMEOUT)  # Sanic checks its timers every half of the shortest: the cut is certain
    sanic_timers = {f"SANIC_{name}_TIMEOUT": SANIC_TIMEOUT for name in ("REQUEST", "RESPONSE", "KEEP_ALIVE")}
    async with FakeGemini(stream_chunks=2, chunk_delay=pause, slow_seconds=pause) as gemini:
        with stack_env(tmp_path, "embedded", UPSTREAM_ALLOW_PRIVATE=FAKES_NETWORK, **sanic_timers
                       ) as (env, _, args):
            proc = start(tmp_path, env, "serve", *args)
            try:
                base_url = f"http://127.0.0.1:{env['PORT']}"
                await asyncio.to_thread(wait_until_serving, proc, base_url)
                gateway = await open_gateway(base_url, "sqlite", gemini)
                gemini.fail("slow", times=1)  # the plain call below: answered after `pause` seconds
                async with httpx.AsyncClient(base_url=base_url, timeout=3 * pause) as client:
                    plain = asyncio.ensure_future(client.post(f"/v1beta/models/{TTS}:generateContent",
                                                              json=SPEECH,
                                                              headers={"x-goog-api-key": gateway.key}))
                    while not gemini.requests_to(":generateContent"):  # it took the slow answer
                        await asyncio.sleep(0.05)
                    _, events = await stream_speech(gateway, timeout=3 * pause)  # 2nd event: after `pause` s
                    answered = await plain
                assert answered.status_code == 200, answered.text
                assert answered.json()["candidates"][0]["finishReason"] == "STOP"
                assert len(events) == 2 and events[-1]["candidates"][0]["finishReason"] == "STOP"
            finally:
                await asyncio.to_thread(stop, proc)
    assert "Traceback" not in proc.stderr, proc.output()



async def until_serving(proc: Proc, client: httpx.AsyncClient) -> int:
    """Wait for the first answer of `GET /api/status`; the number of requests the server answered (each
    counts against the global rate limit; a refused connection does not)."""
    answered = 0
    for _ in range(900):  # 0.1 s apart: a bound on a hang
        if proc.popen.poll() is not None:
            pytest.fail(f"tollway serve ended\n{proc.output()}")
        try:
            status = (await client.get("/api/status")).status_code
        except httpx.TransportError:
            await asyncio.sleep(0.1)
            continue
        answered += 1
        if status == 200:
            return answered
    pytest.fail(f"tollway serve did not answer\n{proc.output()}")


async def test_a_trickled_login_is_a_408_and_costs_no_rate_limit(tmp_path: Path) -> None:
    critical, overall = 3, 40
    port = free_port()
    env = clean_env(DATA_DIR=str(tmp_path / "data"), HOST="127.0.0.1", PORT=str(port), ACCESS_LOG="true",
                    REQUEST_HEAD_TIMEOUT=DEADLINE, REQUEST_BODY_TIMEOUT=DEADLINE,
                    CRITICAL_RATE_LIMIT=str(critical), CRITICAL_RATE_LIMIT_DURATION="3600",
                    GLOBAL_API_RATE_LIMIT=str(overall), GLOBAL_API_RATE_LIMIT_DURATION="3600")
    proc = start(tmp_path, env, "serve")
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            used = await until_serving(proc, client)
            jobs = [slow_body("/api/user/login") for _ in range(2 * critical)]
            ended = await asyncio.gather(*(trickle(port, *job) for job in jobs))
            assert ended == [("408", True)] * len(jobs)  # none answered 429

            wrong = {"username": "root", "password": "not-the-password"}
            logins = [(await client.post("/api/user/login", json=wrong)).status_code
                      for _ in range(critical + 1)]
            assert all(status != 429 for status in logins[:critical]) and logins[critical] == 429, logins
            used += critical  # the refused one charged neither limit (server/auth/guard.py: both or neither)
            left = 0
            while (await client.get("/api/status")).status_code == 200 and left <= overall:
                left += 1
        assert left == overall - used  # the trickled logins used none of the global limit either
    finally:
        await asyncio.to_thread(stop, proc)
    access = [line for line in proc.stderr.splitlines() if " tollway.access: " in line]
    assert sum(" POST /api/user/login 408 " in line for line in access) == 2 * critical, proc.output()
    assert "Traceback" not in proc.stderr, proc.output()
