"""Operators' view: `/metrics`, `/healthz`, `/readyz` and `LOG_FORMAT=json`.

    declared list     the metrics the process registers are exactly `server.metrics.DECLARED`
    embedded serve    a real `tollway serve` (SQLite, one worker) with a fake Gemini upstream: M calls
                      refused for quota, then N charged ones; one scrape shows exactly M and N; `/metrics`
                      is a 404 without the token and with a wrong one; every stderr log line is JSON
    two workers       the same workload on MariaDB + Redis, `--workers 2`: one worker's scrape shows the sum
                      over both workers and the quota-sync process (its batches: no worker syncs there)
    readiness         `/readyz` on a Redis the test started: 200, 503 naming Redis while it is stopped,
                      200 once it is back
"""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path

import httpx
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from models.db import Database
from models.migrate import upgrade
from server import metrics
from tests.fakes.gemini import FakeGemini
from tests.harness import make_config, serve
from tests.redis_server import own_redis
from tests.test_e2e_serve import ROOT_PASSWORD, clean_env, free_port, mariadb_redis_env, serving, setup_root

TTS = "gemini-2.5-flash-preview-tts"
TOKEN = "metrics-" + "a1" * 16
FAKES_NETWORK = "127.0.0.1/32"
REFUSED, CHARGED = 3, 5
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


def samples(body: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    found: dict[tuple[tuple[str, str], ...], float] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def assert_counted(body: str) -> None:
    """One scrape shows exactly the workload's calls and requests."""
    calls = samples(body, "tollway_model_calls_total")
    assert calls == {(("model", TTS), ("outcome", "success")): CHARGED,
                     (("model", TTS), ("outcome", "insufficient_quota")): REFUSED}
    http = samples(body, "tollway_http_requests_total")
    route = "/v1beta/models/<target:path>"
    assert http[(("method", "POST"), ("route", route), ("status", "200"))] == CHARGED
    assert http[(("method", "POST"), ("route", route), ("status", "429"))] == REFUSED
    assert not any(dict(labels)["route"].startswith("/v1beta/models/gemini") for labels in http)
    info = samples(body, "tollway_build_info")
    assert list(info.values()) == [1.0]
    assert samples(body, "tollway_quota_sync_backlog")


async def workload(base_url: str, upstream: str, database_type: str = "sqlite") -> None:
    """M calls refused for quota, then N charged ones, each on a connection of its own (so that with
    several workers they land on more than one)."""
    await asyncio.to_thread(setup_root, base_url, database_type)
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as admin:
        login = await admin.post("/api/user/login", json={"username": "root", "password": ROOT_PASSWORD})
        uid = login.json()["data"]["id"]
        admin.headers["New-Api-User"] = str(uid)
        channel = {"name": "gemini", "type": 24, "key": "g-key", "base_url": upstream, "models": TTS,
                   "group": "default"}
        created = await admin.post("/api/channel/", json={"mode": "single", "channel": channel})
        assert created.status_code == 200, created.text
        balance = (await admin.get("/api/user/self")).json()["data"]["quota"]
        if balance:
            emptied = await admin.post("/api/user/manage", json={"id": uid, "action": "add_quota",
                                                                 "mode": "subtract", "value": balance})
            assert emptied.status_code == 200, emptied.text
        made = await admin.post("/api/token/", json={"name": "m", "unlimited_quota": True})
        key = made.json()["data"]["key"]
        path = f"/v1beta/models/{TTS}:generateContent"
        for _ in range(REFUSED):
            refused = await admin.post(path, json=SPEECH, headers={"x-goog-api-key": key, **CLOSE})
            assert refused.status_code == 429, refused.text
        topped = await admin.post("/api/user/manage", json={"id": uid, "action": "add_quota", "mode": "add",
                                                            "value": 10_000_000})
        assert topped.status_code == 200, topped.text
        for _ in range(CHARGED):
            answered = await admin.post(path, json=SPEECH, headers={"x-goog-api-key": key, **CLOSE})
            assert answered.status_code == 200, answered.text


@pytest.mark.slow
async def test_embedded_serve_counts_a_known_workload(tmp_path: Path) -> None:
    env = clean_env(DATA_DIR=str(tmp_path / "data"), HOST="127.0.0.1", PORT=str(free_port()),
                    UPSTREAM_ALLOW_PRIVATE=FAKES_NETWORK, METRICS_TOKEN=TOKEN, LOG_FORMAT="json")
    async with FakeGemini() as gemini:
        with serving(tmp_path, env) as (proc, base_url):
            async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
                assert (await client.get("/metrics")).status_code == 404
                wrong = await client.get("/metrics", headers={"Authorization": "Bearer " + "x" * 40})
                assert wrong.status_code == 404
                assert wrong.json()["message"] == (await client.get("/no-such-route")).json()["message"]
                health = await client.get("/healthz")
                assert (health.status_code, health.text) == (200, "ok")
                await workload(base_url, gemini.url)
                ready = await client.get("/readyz")
                assert (ready.status_code, ready.text) == (200, "ok")
                scrape = await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
                assert scrape.status_code == 200
    assert_counted(scrape.text)
    http = samples(scrape.text, "tollway_http_requests_total")
    assert http[(("method", "GET"), ("route", "/metrics"), ("status", "404"))] == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines, proc.output()
    for line in lines:
        assert isinstance(json.loads(line), dict), line


async def test_readyz_follows_redis(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'ready.db'}"
    db = Database(url, pool_size=1)
    await upgrade(db.engine)
    await db.dispose()
    with own_redis(tmp_path / "redis") as redis:
        config = make_config(url, tmp_path / "data", redis_url=redis.url, prefix=f"t:{secrets.token_hex(4)}:",
                             redis_timeout=0.5, ready_timeout=0.5)
        async with serve(config) as running, httpx.AsyncClient(base_url=running.url, timeout=30) as client:
            assert (await client.get("/readyz")).status_code == 200
            await asyncio.to_thread(redis.stop)
            down = await client.get("/readyz")
            assert (down.status_code, down.text) == (503, "not ready: redis")
            assert (await client.get("/healthz")).status_code == 200
            await asyncio.to_thread(redis.start)
            up = await client.get("/readyz")
            assert (up.status_code, up.text) == (200, "ok")


@pytest.mark.slow
async def test_two_workers_and_the_sync_process_on_mariadb_and_redis(tmp_path: Path) -> None:
    with mariadb_redis_env(tmp_path, "metrics", METRICS_TOKEN=TOKEN, UPSTREAM_ALLOW_PRIVATE=FAKES_NETWORK
                           ) as (env, _db_url, _prefix):
        async with FakeGemini() as gemini:
            with serving(tmp_path, env, "--workers", "2") as (_proc, base_url):
                async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
                    await workload(base_url, gemini.url, "mysql")
                    ready = await client.get("/readyz")
                    assert (ready.status_code, ready.text) == (200, "ok")
                    for _ in range(100):  # until the sync process (not a worker) has committed a batch
                        scrape = await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
                        assert scrape.status_code == 200
                        if sum(samples(scrape.text, "tollway_quota_sync_batch_seconds_count").values()):
                            break
                        await asyncio.sleep(0.2)
    assert_counted(scrape.text)  # the workers' figures, summed
    # the workers run no sync here: these figures come from the quota-sync process, in a worker's scrape
    assert sum(samples(scrape.text, "tollway_quota_sync_batch_seconds_count").values()) >= 1
    assert samples(scrape.text, "tollway_quota_sync_lag_seconds")
