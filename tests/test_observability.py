"""Operators' view: `/metrics`, `/healthz`, `/readyz` and `LOG_FORMAT=json`.

    declared list     the metrics the process registers are exactly `server.metrics.DECLARED`
    relay in process  attempts by channel and result (a 4xx that disables, a dropped connection, a 2xx),
                      retries, the disable's reason, tokens and quota charged, attempt and first-byte times
                      (a stream's timed at its end)
    embedded serve    a real `tollway serve` (SQLite, one worker) with two fake Gemini upstreams, one of
                      them (of higher priority) answering every call with a 500: M calls refused for quota,
                      then N charged ones, each tried on the failing channel first; one scrape shows exactly
                      M and N, N failed and N good attempts, N retries, the tokens and the quota charged;
                      `/metrics` is a 404 without the token and with a wrong one; every stderr log line is
                      JSON
    two workers       the same workload on MariaDB + Redis, `--workers 2`: one worker's scrape shows the sum
                      over both workers and the quota-sync process (its batches: no worker syncs there);
                      then one worker is killed (SIGKILL), the supervisor restarts it, more calls come, and
                      the next scrape shows the earlier counts plus the new calls, exactly

Readiness (`/readyz`) has its own tests: tests/test_readiness.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from server import metrics
from tests.fakes.gemini import FakeGemini, prompt_tokens
from tests.gateway import seed_channel
from tests.harness import Running
from tests.test_e2e_serve import (
    ROOT_PASSWORD,
    Proc,
    clean_env,
    free_port,
    mariadb_redis_env,
    serving,
    setup_root,
)
from tests.test_gateway_routing import caller, logs, speak
from tests.workers import server_workers, wait_for

TTS = "gemini-2.5-flash-preview-tts"
TOKEN = "metrics-" + "a1" * 16
FAKES_NETWORK = "127.0.0.1/32"
REFUSED, CHARGED, MORE = 3, 5, 4
AUDIO_TOKENS = 320
TOP_UP = 10_000_000
RESTART_DEADLINE = 90.0  # seconds; bounds a hang only (a worker needs a few seconds to start)
PATH = f"/v1beta/models/{TTS}:generateContent"
CLOSE = {"Connection": "close"}
SPEECH = {"contents": [{"parts": [{"text": "Say hi"}]}],
          "generationConfig": {
              "responseModalities": ["AUDIO"],
              "speechConfig": {"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "Kore"}}}}}


def test_the_registered_metrics_are_the_declared_list() -> None:
    families = {family.name: family.type for family in REGISTRY.collect()
                if family.name.startswith("tollway_")}
    assert families == {name: kind for name, (kind, _) in metrics.DECLARED.items()}
    labels = {metric._name: tuple(metric._labelnames) for metric in metrics.METRICS}
    assert labels == {name: names for name, (_, names) in metrics.DECLARED.items()}


Series = dict[tuple[tuple[str, str], ...], float]
"""A metric's samples in one scrape: its sorted labels → its value."""


def in_process(name: str, **labels: str) -> float:
    """A sample of this process's registry (the in-process app's figures, written out of their buffers
    first), 0 when not counted yet."""
    metrics.flush()
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_the_relay_counts_attempts_retries_disables_and_charges(embedded_app: Running,
                                                                      gemini_fake: FakeGemini) -> None:
    app = embedded_app
    async with FakeGemini() as refusing, FakeGemini() as dropping:
        bad = await seed_channel(app.state, type=24, base_url=refusing.url, models=TTS, priority=10)
        drop = await seed_channel(app.state, type=24, base_url=dropping.url, models=TTS, priority=5)
        good = await seed_channel(app.state, type=24, base_url=gemini_fake.url, models=TTS)
        refusing.fail("bad_key")  # Gemini's 400 API_KEY_INVALID counts as a 401: the channel is disabled
        dropping.fail("drop")  # the connection closes before any answer: retried elsewhere
        timed = ("tollway_upstream_duration_seconds_count", "tollway_upstream_ttfb_seconds_count")
        before = {name: in_process(name, provider="gemini") for name in timed}
        disabled = in_process("tollway_channel_auto_disables_total", reason="upstream_status")
        retries = in_process("tollway_model_call_retries_total", model=TTS)
        charged = {direction: in_process("tollway_tokens_total", model=TTS, direction=direction)
                   for direction in ("input", "output")}
        quota = in_process("tollway_quota_charged_total", model=TTS)
        _, client = await caller(app)
        async with client:
            assert (await speak(client)).status_code == 200  # bad (disabled), drop, good
            assert (await speak(client)).status_code == 200  # drop, good
            streamed = await client.post(f"/v1beta/models/{TTS}:streamGenerateContent",
                                         params={"alt": "sse"}, json=SPEECH)  # drop, good
            assert streamed.status_code == 200 and streamed.text.startswith("data: ")

        rows = await logs(app)
        for _ in range(200):  # the stream is timed, then settled, after its last byte: until its log is

            if len(rows) == 3:
                break
            await asyncio.sleep(0.05)
            rows = await logs(app)
        assert len(rows) == 3
    attempts = {(channel, result): in_process("tollway_upstream_requests_total", provider="gemini",
                                              channel=str(channel), result=result)
                for channel in (bad, drop, good) for result in ("ok", "http_4xx", "connect_error")}
    assert {key: value for key, value in attempts.items() if value} == {
        (bad, "http_4xx"): 1, (drop, "connect_error"): 3, (good, "ok"): 3}
    assert in_process("tollway_model_calls_total", model=TTS, route="generate", provider="gemini",
                      channel=str(good), outcome="success") == 3
    assert in_process("tollway_model_call_retries_total", model=TTS) - retries == 2 + 1 + 1
    assert in_process("tollway_channel_auto_disables_total", reason="upstream_status") - disabled == 1
    assert {direction: in_process("tollway_tokens_total", model=TTS, direction=direction) - charged[direction]
            for direction in ("input", "output")} == {"input": sum(r.prompt_tokens for r in rows),
                                                      "output": sum(r.completion_tokens for r in rows)}
    assert in_process("tollway_quota_charged_total", model=TTS) - quota == sum(r.quota for r in rows) > 0
    # every attempt timed (the stream's at its end); a first byte for those that got an answer
    assert {name: in_process(name, provider="gemini") - before[name] for name in timed} == {
        timed[0]: 7, timed[1]: 4}


def samples(body: str, name: str) -> Series:
    found: Series = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


@dataclass
class Workload:
    """What the workload set up: its API key, the caller's user, the two channels."""

    key: str
    user_id: int
    good: int  # the channel that answers
    failing: int  # the channel of higher priority that answers every call with a 500


def counters(workload: Workload, charged: int, quota: float) -> dict[str, Series]:
    """The relay's counters one scrape must show after `charged` calls went through and the refused ones,
    exactly (every series of each family), with `quota` units charged in all."""
    good, failing = str(workload.good), str(workload.failing)
    return {
        "tollway_model_calls_total": {
            (("channel", good), ("model", TTS), ("outcome", "success"), ("provider", "gemini"),
             ("route", "generate")): charged,
            (("channel", ""), ("model", TTS), ("outcome", "insufficient_quota"), ("provider", ""),
             ("route", "generate")): REFUSED},
        "tollway_upstream_requests_total": {  # every charged call: the failing channel first, then the good
            (("channel", failing), ("provider", "gemini"), ("result", "http_5xx")): charged,
            (("channel", good), ("provider", "gemini"), ("result", "ok")): charged},
        "tollway_model_call_retries_total": {(("model", TTS),): charged},
        "tollway_tokens_total": {(("direction", "input"), ("model", TTS)): charged * prompt_tokens(SPEECH),
                                 (("direction", "output"), ("model", TTS)): charged * AUDIO_TOKENS},
        "tollway_quota_charged_total": {(("model", TTS),): quota},
        "tollway_upstream_duration_seconds_count": {(("provider", "gemini"),): 2 * charged},
        "tollway_upstream_ttfb_seconds_count": {(("provider", "gemini"),): 2 * charged},
    }


def assert_counted(body: str, workload: Workload, charged: int, quota: float) -> None:
    """One scrape shows exactly the workload's calls, attempts and requests."""
    for name, expected in counters(workload, charged, quota).items():
        assert samples(body, name) == expected, name
    assert not samples(body, "tollway_channel_auto_disables_total")  # a 500 never disables
    http = samples(body, "tollway_http_requests_total")
    route = "/v1beta/models/<target:path>"
    assert http[(("method", "POST"), ("route", route), ("status", "200"))] == charged
    assert http[(("method", "POST"), ("route", route), ("status", "429"))] == REFUSED
    assert not any(dict(labels)["route"].startswith("/v1beta/models/gemini") for labels in http)
    info = samples(body, "tollway_build_info")
    assert list(info.values()) == [1.0]
    assert samples(body, "tollway_quota_sync_backlog")


async def charged_calls(base_url: str, workload: Workload, count: int) -> None:
    """`count` charged calls, each on a connection of its own (so that with several workers they land on
    more than one)."""
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        for _ in range(count):
            answered = await client.post(PATH, json=SPEECH, headers={"x-goog-api-key": workload.key, **CLOSE})
            assert answered.status_code == 200, answered.text


async def charged_so_far(base_url: str, workload: Workload) -> int:
    """The quota charged since the top-up: what the live balance lacks."""
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as admin:
        await admin.post("/api/user/login", json={"username": "root", "password": ROOT_PASSWORD})
        admin.headers["New-Api-User"] = str(workload.user_id)
        balance: int = (await admin.get("/api/user/self")).json()["data"]["quota"]
    return TOP_UP - balance


async def workload(base_url: str, upstream: str, failing: str, database_type: str = "sqlite") -> Workload:
    """Two channels — `failing` (priority 10, answering 500s) and `upstream` —, M calls refused for quota,
    then N charged ones (each tried on the failing channel, then on the good one)."""
    await asyncio.to_thread(setup_root, base_url, database_type)
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as admin:
        login = await admin.post("/api/user/login", json={"username": "root", "password": ROOT_PASSWORD})
        uid = login.json()["data"]["id"]
        admin.headers["New-Api-User"] = str(uid)
        ids = []
        for name, url, priority in (("failing", failing, 10), ("gemini", upstream, 0)):
            channel = {"name": name, "type": 24, "key": "g-key", "base_url": url, "models": TTS,
                       "group": "default", "priority": priority}
            created = await admin.post("/api/channel/", json={"mode": "single", "channel": channel})
            assert created.status_code == 200, created.text
            ids += created.json()["data"]
        balance = (await admin.get("/api/user/self")).json()["data"]["quota"]
        if balance:
            emptied = await admin.post("/api/user/manage", json={"id": uid, "action": "add_quota",
                                                                 "mode": "subtract", "value": balance})
            assert emptied.status_code == 200, emptied.text
        made = await admin.post("/api/token/", json={"name": "m", "unlimited_quota": True})
        key = made.json()["data"]["key"]
        for _ in range(REFUSED):
            refused = await admin.post(PATH, json=SPEECH, headers={"x-goog-api-key": key, **CLOSE})
            assert refused.status_code == 429, refused.text
        topped = await admin.post("/api/user/manage", json={"id": uid, "action": "add_quota", "mode": "add",
                                                            "value": TOP_UP})
        assert topped.status_code == 200, topped.text
    done = Workload(key, uid, good=ids[1], failing=ids[0])
    await charged_calls(base_url, done, CHARGED)
    return done


@pytest.mark.slow
async def test_embedded_serve_counts_a_known_workload(tmp_path: Path) -> None:
    env = clean_env(DATA_DIR=str(tmp_path / "data"), HOST="127.0.0.1", PORT=str(free_port()),
                    UPSTREAM_ALLOW_PRIVATE=FAKES_NETWORK, METRICS_TOKEN=TOKEN, LOG_FORMAT="json")
    async with FakeGemini(audio_tokens=AUDIO_TOKENS) as gemini, FakeGemini() as failing:
        failing.fail("500")
        with serving(tmp_path, env) as (proc, base_url):
            async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
                assert (await client.get("/metrics")).status_code == 404
                wrong = await client.get("/metrics", headers={"Authorization": "Bearer " + "x" * 40})
                assert wrong.status_code == 404
                assert wrong.json()["message"] == (await client.get("/no-such-route")).json()["message"]
                health = await client.get("/healthz")
                assert (health.status_code, health.text) == (200, "ok")
                done = await workload(base_url, gemini.url, failing.url)
                quota = await charged_so_far(base_url, done)
                ready = await client.get("/readyz")
                assert (ready.status_code, ready.text) == (200, "ok")
                scrape = await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
                assert scrape.status_code == 200
    assert len(failing.received) == CHARGED and len(gemini.received) == CHARGED
    assert_counted(scrape.text, done, CHARGED, quota)
    http = samples(scrape.text, "tollway_http_requests_total")
    assert http[(("method", "GET"), ("route", "/metrics"), ("status", "404"))] == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines, proc.output()
    for line in lines:
        assert isinstance(json.loads(line), dict), line


async def scrape_of(client: httpx.AsyncClient) -> str:
    scrape = await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert scrape.status_code == 200
    return scrape.text


async def scrape_when_counted(client: httpx.AsyncClient, workload: Workload, charged: int, quota: float
                              ) -> str:
    """Scrape until the figures of `charged` calls are in from every worker (each writes its buffered
    counts once a second: server/metrics/tally.py), or after a deadline the last scrape, for the
    assertions to name what differs (an excess never settles: a double count fails too)."""
    expected = counters(workload, charged, quota)
    for _ in range(50):
        body = await scrape_of(client)
        if all(samples(body, name) == series for name, series in expected.items()):
            return body
        await asyncio.sleep(0.2)
    return body


@pytest.mark.slow
async def test_two_workers_and_the_sync_process_on_mariadb_and_redis(tmp_path: Path) -> None:
    """The workload's counts, summed over both workers and the sync process; then one worker is killed
    (SIGKILL) and restarted by the supervisor, more calls come, and the next scrape shows the earlier
    counts plus the new calls exactly: nothing already counted is lost or counted twice."""
    with mariadb_redis_env(tmp_path, "metrics", METRICS_TOKEN=TOKEN, UPSTREAM_ALLOW_PRIVATE=FAKES_NETWORK
                           ) as (env, _db_url, _prefix):
        async with FakeGemini(audio_tokens=AUDIO_TOKENS) as gemini, FakeGemini() as failing:
            failing.fail("500")
            with serving(tmp_path, env, "--workers", "2") as (proc, base_url):
                async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
                    done = await workload(base_url, gemini.url, failing.url, "mysql")
                    quota = await charged_so_far(base_url, done)
                    ready = await client.get("/readyz")
                    assert (ready.status_code, ready.text) == (200, "ok")
                    for _ in range(100):  # until the sync process (not a worker) has committed a batch
                        scrape = await scrape_when_counted(client, done, CHARGED, quota)
                        if sum(samples(scrape, "tollway_quota_sync_batch_seconds_count").values()):
                            break
                        await asyncio.sleep(0.2)
                    served_by = await asyncio.to_thread(both_workers_ready, proc)
                    assert_counted(scrape, done, CHARGED, quota)  # the workers' figures, summed
                    # the workers run no sync here: these figures come from the quota-sync process
                    assert sum(samples(scrape, "tollway_quota_sync_batch_seconds_count").values()) >= 1
                    assert samples(scrape, "tollway_quota_sync_lag_seconds")

                    victim_name, victim = sorted(served_by.items())[0]
                    os.kill(victim, signal.SIGKILL)
                    await asyncio.to_thread(replaced, proc, victim_name, victim)
                    await charged_calls(base_url, done, MORE)
                    more_quota = await charged_so_far(base_url, done)
                    later = await scrape_when_counted(client, done, CHARGED + MORE, more_quota)
    assert len(failing.received) == CHARGED + MORE and len(gemini.received) == CHARGED + MORE
    assert more_quota > quota
    for name, expected in counters(done, CHARGED + MORE, more_quota).items():
        assert samples(later, name) == expected, name
    route = (("method", "POST"), ("route", "/v1beta/models/<target:path>"), ("status", "200"))
    assert samples(later, "tollway_http_requests_total")[route] == CHARGED + MORE


def both_workers_ready(proc: Proc) -> dict[str, int]:
    """{name: pid} of the server's two workers, once both serve (Sanic prints it)."""
    found: dict[str, int] = {}

    def ready() -> bool:
        found.clear()
        found.update(server_workers(proc.popen.pid))
        return len(found) == 2 and all(f"Worker ready [{pid}]" in proc.stdout for pid in found.values())

    wait_for(ready, RESTART_DEADLINE, "two ready workers")
    return dict(found)


def replaced(proc: Proc, name: str, pid: int) -> None:
    """Wait until the worker `name` (once `pid`) serves again under a new pid."""
    def back() -> bool:
        now = server_workers(proc.popen.pid)
        return (len(now) == 2 and now.get(name, pid) != pid
                and all(f"Worker ready [{p}]" in proc.stdout for p in now.values()))

    wait_for(back, RESTART_DEADLINE, f"a new {name}\n{proc.output()}")
