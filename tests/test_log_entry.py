"""`LogEntry` (core/log_entry.py), the one declaration of a log row's caller fields: what the quota engine
carries (`to_log`, JSON in the Redis stream and in `pending_credits`) is read back by the sync
(`models/sync_sql.py` `log_values`) as the same row; a mapping written by an older version — a writer's
own dict, with only the keys it set — reads as it did; the error-log buffer's defaults are the
declaration's. The first test takes a consume log through the real engine, Redis stream and sync into
MariaDB and PostgreSQL; the others check the rows as lists, before any driver sees them."""

from __future__ import annotations

import json
from typing import Any

import pytest
import ujson

from core.enums import LogType
from core.log_entry import LogEntry
from models.sync_sql import COLUMNS, as_dict, log_values
from quota.types import Entry
from server.logs.error_logs import DEFAULTS
from tests.conftest import _Databases, fresh_database
from tests.quota.env import build
from tests.services import REDIS_URL

NOW = 1_700_000_500


def carried(log: dict[str, Any] | None, amount: int = 70) -> Entry:
    return Entry(id="1700000000000-3", kind="adj", user_id=4, key_id=5, key_limited=True, channel_id=6,
                 amount=amount, ref="ref-1", log=log)


def encoded(log: dict[str, Any]) -> dict[str, Any]:
    """The mapping as the sync reads it back from a Redis stream: encoded as the store encodes it (ujson),
    decoded as JSON."""
    decoded: dict[str, Any] = json.loads(ujson.dumps(log, ensure_ascii=True, escape_forward_slashes=False))
    return decoded


@pytest.mark.parametrize("kind", ["mariadb", "postgres"])
async def test_a_settled_calls_log_entry_is_the_row_the_sync_writes(kind: str, databases: _Databases,
                                                                   redis_prefix: str) -> None:
    env = build(await fresh_database(databases, kind), REDIS_URL, redis_prefix)
    try:
        user = await env.add_user(1_000)
        key = await env.add_key(user, 1_000)
        entry = LogEntry(type=LogType.CONSUME, created_at=1_700_000_001, content="m: 3 + 4 tokens",
                         username="ann", token_name="k1", model_name="m/1", group="vip", ip="10.0.0.1",
                         request_id="r-1", prompt_tokens=3, completion_tokens=4, use_time=2, is_stream=True,
                         other={"route": "chat", "frt": 12, "é": "😀"}, quota=33)
        hold = await env.engine.reserve(user, 100, key_id=key, key_limited=True)
        await env.engine.settle(hold, 33, channel_id=6, log=entry.to_log())
        await env.sync.drain()
        [row] = await env.logs(user_id=user)
        stored = {name: getattr(row, name) for name in LogEntry._fields}
        assert stored == {**entry._asdict(), "type": LogType.CONSUME, "user_id": user, "token_id": key,
                          "channel": 6, "other": '{"route":"chat","frt":12,"é":"😀"}'}
        assert (await env.user_row(user)).quota == 1_000 - 33
    finally:
        await env.close()


def test_the_declaration_is_the_table_s_columns_in_order() -> None:
    assert list(LogEntry._fields) == [c for c in COLUMNS if c not in ("ref", "entry_id")]


def test_every_field_survives_the_engine_and_the_sync() -> None:
    entry = LogEntry(type=LogType.CONSUME, created_at=1_700_000_001, content="m: 3 + 4 tokens",
                     username="ann", token_name="k1", model_name="m/1", group="vip", ip="10.0.0.1",
                     request_id="r-1", prompt_tokens=3, completion_tokens=4, use_time=2, is_stream=True,
                     other={"route": "chat", "frt": 12, "é": "😀"}, quota=33)
    row = as_dict(log_values(carried(encoded(entry.to_log())), NOW))
    assert row == {"type": 2, "created_at": 1_700_000_001, "content": "m: 3 + 4 tokens",
                   "username": "ann", "token_name": "k1", "model_name": "m/1", "group": "vip",
                   "ip": "10.0.0.1", "request_id": "r-1", "prompt_tokens": 3, "completion_tokens": 4,
                   "use_time": 2, "is_stream": True, "other": '{"route":"chat","frt":12,"é":"😀"}',
                   "user_id": 4, "token_id": 5, "channel": 6, "ref": "ref-1", "entry_id": "1700000000000-3",
                   "quota": 33}


def test_unset_quota_and_other_are_the_entry_s_amount_and_empty() -> None:
    log = LogEntry(type=LogType.SYSTEM, created_at=9, username="bob").to_log()
    assert "quota" not in log and "other" not in log
    assert "user_id" not in log and "token_id" not in log and "channel" not in log  # the entry's
    row = as_dict(log_values(carried(log, amount=-250), NOW))
    assert (row["quota"], row["other"], row["type"], row["created_at"]) == (-250, "", 4, 9)


def test_a_mapping_of_the_old_writers_reads_as_it_did() -> None:
    """The dicts the writers built before `LogEntry` (a top-up's, a test's bare consume log): the keys
    they did not set read as the defaults the sync always used."""
    topup = {"type": LogType.TOPUP, "username": "cy", "quota": 700, "content": "redeemed",
             "other": {"admin_info": {"admin_id": 1, "admin_username": "root"}}, "created_at": 1234}
    assert log_values(carried(encoded(topup)), NOW) == [
        1, 1234, "redeemed", "cy", "", "", "", "", "", 0, 0, 0, False,
        '{"admin_info":{"admin_id":1,"admin_username":"root"}}', 4, 5, 6, "ref-1", "1700000000000-3", 700]
    assert log_values(carried({"username": "dora"}, amount=12), NOW) == [
        2, NOW, "", "dora", "", "", "", "", "", 0, 0, 0, False, "", 4, 5, 6, "ref-1", "1700000000000-3", 12]


def test_the_new_writers_rows_equal_the_old_writers_rows() -> None:
    old = {"type": LogType.MANAGE, "username": "eve", "quota": 5, "content": "admin root quota add 5",
           "other": {"admin_info": {"admin_id": 1, "admin_username": "root"}}, "created_at": 77}
    new = LogEntry(type=LogType.MANAGE, username="eve", quota=5, content="admin root quota add 5",
                   other={"admin_info": {"admin_id": 1, "admin_username": "root"}}, created_at=77).to_log()
    assert log_values(carried(encoded(new)), NOW) == log_values(carried(encoded(old)), NOW)


def test_the_error_log_buffer_s_defaults_are_the_declaration_s() -> None:
    assert DEFAULTS == {
        "type": 0, "created_at": 0, "content": "", "username": "", "token_name": "", "model_name": "",
        "group": "", "ip": "", "request_id": "", "prompt_tokens": 0, "completion_tokens": 0, "use_time": 0,
        "is_stream": False, "other": None, "user_id": 0, "token_id": 0, "channel": 0, "quota": 0}
    row = LogEntry(type=LogType.ERROR, created_at=5, user_id=8, token_id=9, channel=3, content="no").row()
    assert (row["user_id"], row["token_id"], row["channel"], row["quota"], row["other"]) == (8, 9, 3, 0, None)
    assert set(row) == set(DEFAULTS)
