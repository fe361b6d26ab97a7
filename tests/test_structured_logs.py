"""`LOG_FORMAT=json` with `ACCESS_LOG=true` on a real `tollway serve`.

    every line          every line the server writes, on stdout and stderr, is one JSON object with
                        `time`, `level`, `logger`, `message` and `request_id`
    access lines        one per request answered, found by the `X-Request-Id` the test sent: method, route
                        template (never the raw path), status and duration as answered, and `user_id` when
                        the caller was known (a session's user, an API key's owner)
    failed start        `tollway migrate` and `tollway quota-sync` on an unreachable database end with one
                        JSON line at ERROR (no password in it)
    config error        an invalid setting ends `serve`, `migrate` and `quota-sync` with one JSON line at
                        ERROR naming it (also through `server.quota_sync.main`); a broken LOG_FORMAT itself
                        with one text line, the default
    no secret           the passwords, the API key, the channel's upstream key, the metrics token, a bogus
                        key sent in a header and in the query, the session cookie: none appears anywhere
    text access lines   with the default format the access line is one text line naming route and status
    forged lines        an upstream's error text with line breaks (\\n, \\r, U+0085, U+2028) and a terminal
                        escape, quoted in the auto-disable warning, starts no line of its own in either
                        format: in text it is escaped on the warning's one line, in JSON every line still
                        parses and the message round-trips
    both formats        a text record is redacted as a JSON one (message and traceback), and a traceback's
                        lines are indented under their record
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest

from server import quota_sync
from server.logging_setup import TRACEBACK_INDENT, JsonFormatter, TextFormatter
from tests.fakes.base import Recorded, Reply
from tests.fakes.gemini import FakeGemini, google_error
from tests.test_e2e_serve import ROOT_PASSWORD, clean_env, free_port, run_to_end, serving, setup_root
from tests.test_observability import FAKES_NETWORK, SPEECH, TTS

TOKEN = "metrics-" + secrets.token_hex(16)
FIELDS = {"time", "level", "logger", "message", "request_id"}
ACCESS = {"method", "route", "status", "duration_ms", "client_ip"}


def rid(label: str) -> dict[str, str]:
    return {"X-Request-Id": f"t-{label}"}


async def traffic(base_url: str, upstream: str, secrets_seen: list[str]) -> dict[str, Any]:
    """The calls whose access lines the test checks: rid label → what the line must say."""
    await asyncio.to_thread(setup_root, base_url, "sqlite")
    secrets_seen.append(ROOT_PASSWORD)
    expected: dict[str, Any] = {}
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        wrong_password = "Wrong-" + secrets.token_hex(12)
        secrets_seen.append(wrong_password)
        failed = await client.post("/api/user/login", json={"username": "root", "password": wrong_password},
                                   headers=rid("bad-login"))
        assert failed.status_code >= 400, failed.text
        expected["bad-login"] = ("POST", "/api/user/login", failed.status_code, None)

        login = await client.post("/api/user/login", json={"username": "root", "password": ROOT_PASSWORD},
                                  headers=rid("login"))
        assert login.status_code == 200, login.text
        uid = login.json()["data"]["id"]
        secrets_seen.extend(cookie for cookie in client.cookies.values() if len(cookie) >= 16)
        client.headers["New-Api-User"] = str(uid)
        me = await client.get("/api/user/self", headers=rid("self"))
        assert me.status_code == 200, me.text
        expected["self"] = ("GET", "/api/user/self", 200, uid)

        upstream_key = "AIza" + secrets.token_urlsafe(30)
        secrets_seen.append(upstream_key)
        channel = {"name": "gemini", "type": 24, "key": upstream_key, "base_url": upstream, "models": TTS,
                   "group": "default"}
        created = await client.post("/api/channel/", json={"mode": "single", "channel": channel},
                                    headers=rid("channel"))
        assert created.status_code == 200, created.text
        expected["channel"] = ("POST", "/api/channel/", 200, uid)
        topped = await client.post("/api/user/manage", json={"id": uid, "action": "add_quota", "mode": "add",
                                                             "value": 10_000_000})
        assert topped.status_code == 200, topped.text
        made = await client.post("/api/token/", json={"name": "logs", "unlimited_quota": True})
        key = made.json()["data"]["key"]
        secrets_seen.extend([key, key.removeprefix("sk-")])

        path = f"/v1beta/models/{TTS}:generateContent"
        answered = await client.post(path, json=SPEECH, headers={"x-goog-api-key": key, **rid("call")})
        assert answered.status_code == 200, answered.text
        expected["call"] = ("POST", "/v1beta/models/<target:path>", 200, uid)

        bogus = "sk-" + secrets.token_urlsafe(32)
        secrets_seen.append(bogus)
        refused = await client.post(path, json=SPEECH, headers={"x-goog-api-key": bogus, **rid("bogus-key")})
        assert refused.status_code == 401, refused.text
        expected["bogus-key"] = ("POST", "/v1beta/models/<target:path>", 401, None)
        in_query = await client.post(f"{path}?key={bogus}", json=SPEECH, headers=rid("query-key"))
        assert in_query.status_code == 401, in_query.text
        expected["query-key"] = ("POST", "/v1beta/models/<target:path>", 401, None)

        secrets_seen.append(TOKEN)
        scrape = await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}", **rid("metrics")})
        assert scrape.status_code == 200
        expected["metrics"] = ("GET", "/metrics", 200, None)
    return expected


@pytest.mark.slow
async def test_json_lines_with_an_access_log_and_no_secret(tmp_path: Path) -> None:
    env = clean_env(DATA_DIR=str(tmp_path / "data"), HOST="127.0.0.1", PORT=str(free_port()),
                    UPSTREAM_ALLOW_PRIVATE=FAKES_NETWORK, METRICS_TOKEN=TOKEN, LOG_FORMAT="json",
                    ACCESS_LOG="true", LOG_LEVEL="DEBUG")
    seen: list[str] = []
    async with FakeGemini() as gemini:
        with serving(tmp_path, env) as (proc, base_url):
            expected = await traffic(base_url, gemini.url, seen)
    output = proc.stdout + proc.stderr
    for secret in seen:
        assert secret not in output, "a secret was logged"
    lines = [json.loads(line) for line in output.splitlines() if line.strip()]
    assert all(isinstance(line, dict) and line.keys() >= FIELDS for line in lines), output
    assert any(line["message"].startswith("Tollway listening on") for line in lines)  # stdout too
    access = {line["request_id"]: line for line in lines if line["logger"] == "tollway.access"}
    assert all(line.keys() >= ACCESS for line in access.values())
    for label, (method, route, status, user) in expected.items():
        line = access.get(f"t-{label}")
        assert line is not None, (label, output)
        assert (line["method"], line["route"], line["status"], line.get("user_id")) == (method, route, status,
                                                                                         user), line
        assert line["duration_ms"] >= 0 and line["client_ip"] == "127.0.0.1"
    # the caller's lines name no raw path: the model's name and the query's key stay out of the route
    assert not any(TTS in line["route"] for line in access.values())


@pytest.mark.slow
async def test_text_access_lines(tmp_path: Path) -> None:
    env = clean_env(DATA_DIR=str(tmp_path / "data"), HOST="127.0.0.1", PORT=str(free_port()),
                    ACCESS_LOG="true")
    with serving(tmp_path, env) as (proc, base_url):
        async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
            assert (await client.get("/api/status", headers=rid("status"))).status_code == 200
            assert (await client.get("/no/such/thing")).status_code == 404
    access = [line for line in proc.stderr.splitlines() if " tollway.access: " in line]
    assert any(line.endswith("GET /api/status 200") or " GET /api/status 200 " in line for line in access), \
        proc.output()
    assert any(" GET unmatched 404 " in line for line in access), proc.output()
    assert "Setup pending" in proc.stdout  # the start-up news stay plain text


@pytest.mark.slow
@pytest.mark.parametrize("command", [["migrate"], ["quota-sync", "--once"]])
def test_a_failed_start_ends_with_one_json_line(tmp_path: Path, command: list[str]) -> None:
    password = "Pw-" + secrets.token_hex(10)
    env = clean_env(DATA_DIR=str(tmp_path / "data"), SECRET_KEY=secrets.token_hex(32), LOG_FORMAT="json",
                    DATABASE_URL=f"mysql://tollway:{password}@127.0.0.1:1/nothing_here",
                    REDIS_URL="redis://127.0.0.1:1/0")
    proc = run_to_end(tmp_path, env, *command)
    assert proc.popen.returncode not in (0, None), proc.output()
    assert password not in proc.output()
    lines = [json.loads(line) for line in proc.stderr.splitlines() if line.strip()]
    assert lines and all(line.keys() >= FIELDS for line in lines), proc.output()
    assert lines[-1]["level"] == "ERROR" and lines[-1]["message"].startswith("tollway"), lines[-1]


@pytest.mark.slow
@pytest.mark.parametrize(("command", "name", "value"), [
    (["serve"], "PORT", "http"), (["migrate"], "SECRET_KEY", "short"),
    (["quota-sync", "--once"], "QUOTA_SYNC_BATCH", "0"), (["serve"], "LOG_LEVEL", "LOUD"),
])
def test_a_config_error_is_one_json_line(tmp_path: Path, command: list[str], name: str, value: str) -> None:
    env = clean_env(DATA_DIR=str(tmp_path / "data"), LOG_FORMAT=" JSON ", **{name: value})
    proc = run_to_end(tmp_path, env, *command)
    assert proc.popen.returncode == 2, proc.output()
    [line] = [json.loads(line) for line in proc.stderr.splitlines() if line.strip()]
    assert line.keys() >= FIELDS and line["level"] == "ERROR", line
    assert line["message"].startswith(f"tollway: {name}: "), line
    assert proc.stdout == ""


@pytest.mark.slow
def test_a_broken_log_format_is_reported_in_text(tmp_path: Path) -> None:
    env = clean_env(DATA_DIR=str(tmp_path / "data"), LOG_FORMAT="jsonl", PORT="http")
    proc = run_to_end(tmp_path, env, "serve")
    assert proc.popen.returncode == 2, proc.output()
    assert proc.stderr.splitlines() == ["tollway: LOG_FORMAT: expected text or json"], proc.output()


def test_the_quota_sync_entry_reports_a_config_error_as_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # no .env here
    monkeypatch.setenv("LOG_FORMAT", "json")
    monkeypatch.setenv("REDIS_URL", "http://not-redis")
    with pytest.raises(SystemExit) as ended:
        quota_sync.main(["--once"])
    assert ended.value.code == 2
    [line] = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert line["level"] == "ERROR" and line["message"].startswith("tollway quota-sync: REDIS_URL: "), line


FORGED = ("permission denied\n2030-01-01 00:00:00,000 ERROR tollway.auth: FORGED-1 root logged in\r"
          "2030-01-01 00:00:01,000 ERROR tollway.auth: FORGED-2\u2028"
          '{"level": "ERROR", "message": "FORGED-3"}\x85FORGED-4\x1b[2K')
RECORD_START = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3} [A-Z]+ \S+: ")


class ForgingGemini(FakeGemini):
    """Answers every injected failure with a 403 whose message tries to write log lines of its own."""

    def error_reply(self, mode: str, request: Recorded) -> Reply:
        return google_error(403, "PERMISSION_DENIED", FORGED)


async def a_forged_disable_reason(base_url: str, upstream: ForgingGemini) -> int:
    """Set up, add a channel on `upstream` and call it once: it answers 403 with `FORGED`, which disables
    the channel and is quoted in the warning that says so. The channel's id."""
    await asyncio.to_thread(setup_root, base_url, "sqlite")
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        login = await client.post("/api/user/login", json={"username": "root", "password": ROOT_PASSWORD})
        assert login.status_code == 200, login.text
        client.headers["New-Api-User"] = str(login.json()["data"]["id"])
        channel = {"name": "forger", "type": 24, "key": "AIza" + secrets.token_urlsafe(30),
                   "base_url": upstream.url, "models": TTS, "group": "default"}
        created = await client.post("/api/channel/", json={"mode": "single", "channel": channel})
        assert created.status_code == 200, created.text
        made = await client.post("/api/token/", json={"name": "forged", "unlimited_quota": True})
        key = made.json()["data"]["key"]
        upstream.fail("403")
        answered = await client.post(f"/v1beta/models/{TTS}:generateContent", json=SPEECH,
                                     headers={"x-goog-api-key": key})
        assert answered.status_code >= 400, answered.text
        listed = await client.get("/api/channel/")
        [row] = listed.json()["data"]["items"]
        assert row["status"] == 3, (row, answered.text)  # auto-disabled: the warning was written
        channel_id: int = row["id"]
        return channel_id


@pytest.mark.slow
@pytest.mark.parametrize("log_format", ["text", "json"])
async def test_upstream_text_cannot_forge_a_log_line(tmp_path: Path, log_format: str) -> None:
    env = clean_env(DATA_DIR=str(tmp_path / "data"), HOST="127.0.0.1", PORT=str(free_port()),
                    UPSTREAM_ALLOW_PRIVATE=FAKES_NETWORK, LOG_FORMAT=log_format)
    async with ForgingGemini() as upstream:
        with serving(tmp_path, env) as (proc, base_url):
            channel_id = await a_forged_disable_reason(base_url, upstream)
    lines = proc.stderr.splitlines()  # every line break Python knows, U+2028 and U+0085 among them
    warning = f"channel {channel_id} auto-disabled: status code 403: "
    assert not any("FORGED" in line for line in lines if warning not in line), proc.stderr
    if log_format == "text":
        assert all(RECORD_START.match(line) or line.startswith(TRACEBACK_INDENT) for line in lines if line), \
            proc.stderr
        [line] = [line for line in lines if warning in line]
        escaped = FORGED.translate({10: "\\n", 13: "\\r", 0x85: "\\x85", 0x2028: "\\u2028", 0x1B: "\\x1b"})
        assert line.endswith(f" WARNING tollway.relay.channels: {warning}{escaped}"), line
    else:
        records = [json.loads(line) for line in lines if line.strip()]
        assert all(isinstance(record, dict) and record.keys() >= FIELDS for record in records), proc.stderr
        assert [r["message"] for r in records if warning in r["message"]] == [warning + FORGED]


def a_record(message: str, *args: object, failure: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(failure), failure, failure.__traceback__) if failure is not None else None
    return logging.LogRecord("tollway.test", logging.WARNING, __file__, 1, message, args, exc_info)


def test_a_text_record_is_redacted_as_a_json_one() -> None:
    key, bearer = "sk-" + secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    try:
        raise ValueError(f"upstream said: bad key {key}\n2030-01-01 00:00:00,000 ERROR x: forged")
    except ValueError as exc:
        failure = exc
    text = TextFormatter().format(a_record("call failed: %s", f"Authorization: Bearer {bearer}",
                                           failure=failure))
    data = json.loads(JsonFormatter().format(a_record("call failed: %s", f"Authorization: Bearer {bearer}",
                                                      failure=failure)))
    for written in (text, data["message"], data["exception"]):
        assert key not in written and bearer not in written and "[redacted]" in written
    first, *rest = text.split("\n")
    assert first.endswith("WARNING tollway.test: call failed: Authorization: Bearer [redacted]"), text
    assert rest and all(line.startswith(TRACEBACK_INDENT) for line in rest), text
    assert rest[-1] == f"{TRACEBACK_INDENT}2030-01-01 00:00:00,000 ERROR x: forged", text
