"""Options (docs/api/options.md#options): `GET /api/option/` is root-only, lists every non-secret key with a
string value; `PUT /api/option/` validates per the registry (400 naming the key), stores the string form,
keeps secrets encrypted at rest and write-only, and the change reaches every worker at once.

Helpers defined here: `root_api` (seeds root and logs in), `listing` (the options as a dict),
`raw_option` (reads the `options` row straight from SQL), `subscribers` (counts a Redis channel's
subscribers, used to wait until a second worker has finished starting).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from sqlalchemy import select

from backend.broadcasts import CHANNEL
from backend.redis import channel_name
from core.option_registry import REGISTRY, OptionError, normalize, parse, to_text
from models.tables import Option
from tests.conftest import Stack
from tests.harness import Api, Running, add_user, logged_in, make_config, serve
from tests.services import REDIS_URL

SECRET_SUFFIXES = ("token", "secret", "key")


async def root_api(running: Running) -> Api:
    await add_user(running.state, "root", role=100)
    return await logged_in(running, "root")


async def listing(api: Api) -> dict[str, str]:
    response = await api.get("/api/option/")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["success"] is True
    items = body["data"]
    assert isinstance(items, list)
    assert all(set(item) == {"key", "value"} for item in items)
    out = {item["key"]: item["value"] for item in items}
    assert len(out) == len(items)  # no key twice
    return out


async def raw_option(running: Running, key: str) -> str | None:
    async with running.state.db.transaction() as tx:
        value: str | None = await tx.scalar(select(Option.value).where(Option.key == key))
        return value


async def put(api: Api, key: str, value: Any) -> Any:
    return await api.put("/api/option/", json={"key": key, "value": value})


# ---- reading -----------------------------------------------------------------------------------------

async def test_options_are_root_only(embedded_app: Running) -> None:
    await add_user(embedded_app.state, "user1")
    await add_user(embedded_app.state, "admin1", role=10)
    assert (await embedded_app.client().get("/api/option/")).status_code == 401
    for name in ("user1", "admin1"):
        api = await logged_in(embedded_app, name)
        assert (await api.get("/api/option/")).status_code == 403
        assert (await put(api, "SystemName", "Mine")).status_code == 403
    assert embedded_app.state.options["SystemName"] == "Tollway"
    root = await root_api(embedded_app)
    assert (await root.get("/api/option/")).status_code == 200


async def test_every_value_is_a_string_and_secrets_are_never_listed(embedded_app: Running) -> None:
    options = await listing(await root_api(embedded_app))
    assert all(isinstance(v, str) for v in options.values())
    assert not [k for k in options if k.lower().endswith(SECRET_SUFFIXES)]
    for secret in ("SMTPToken", "StripeApiSecret", "StripeWebhookSecret"):
        assert secret not in options
    expected = {k for k, spec in REGISTRY.items() if not spec.secret}
    assert set(options) == expected


async def test_defaults_are_listed_in_their_string_form(embedded_app: Running) -> None:
    options = await listing(await root_api(embedded_app))
    assert options["SystemName"] == "Tollway"
    assert options["RetryTimes"] == "2"
    assert options["QuotaPerUnit"] == "500000"
    assert options["USDExchangeRate"] == "7.3"
    assert options["DisplayInCurrencyEnabled"] == "true"
    assert options["SelfUseModeEnabled"] == "false"
    assert json.loads(options["GroupRatio"]) == {"default": 1, "vip": 1, "svip": 1}
    assert options["AutomaticRetryStatusCodes"] == "401,403,408,429,500-599"
    assert options["ServerAddress"] == ""


def test_secret_keys_are_recognised_in_any_case() -> None:
    secrets_ = {k for k, spec in REGISTRY.items() if spec.secret}
    assert {"SMTPToken", "StripeApiSecret", "StripeWebhookSecret"} <= secrets_
    assert all(k.lower().endswith(SECRET_SUFFIXES) for k in secrets_)
    assert not REGISTRY["StripePriceId"].secret and not REGISTRY["passkey.enabled"].secret


# ---- validation --------------------------------------------------------------------------------------

INVALID: list[tuple[str, Any]] = [
    ("NoSuchOption", "1"),
    ("RetryTimes", 11),
    ("RetryTimes", -1),
    ("RetryTimes", "abc"),
    ("RetryTimes", "--3"),
    ("RetryTimes", "²"),
    ("RetryTimes", "١"),  # digits of another script, `_`, `+` and white space: ASCII digits only
    ("RetryTimes", "+3"),
    ("RetryTimes", " 3"),
    ("QuotaForNewUser", "1_000"),
    ("QuotaPerUnit", "١٦"),
    ("QuotaPerUnit", "1_000"),
    ("AutomaticRetryStatusCodes", "٤٢٩"),
    ("RetryTimes", 2.5),
    ("RetryTimes", True),
    ("QuotaForNewUser", 10**30),
    ("QuotaForNewUser", "1" + "0" * 30),
    ("QuotaPerUnit", 10**400),
    ("QuotaPerUnit", 0),
    ("QuotaPerUnit", "abc"),
    ("QuotaPerUnit", "1e400"),
    ("QuotaPerUnit", "nan"),
    ("DisplayInCurrencyEnabled", "yes"),
    ("DisplayInCurrencyEnabled", 1),
    ("ModelRatio", "{bad json"),
    ("ModelRatio", '{"gpt-4": -1}'),
    ("ModelRatio", '{"gpt-4": "15"}'),
    ("ModelRatio", '["gpt-4"]'),
    ("ModelRatio", 5),
    ("GroupRatio", '{"vip": 1}'),
    ("GroupRatio", '{"default": 1, "a,b": 1}'),
    ("TopupGroupRatio", '{"default": 0}'),
    ("ServerAddress", "https://gw.example.com/"),
    ("ServerAddress", "ftp://gw.example.com"),
    ("ServerAddress", "gw.example.com"),
    ("SystemName", ""),
    ("SystemName", "x" * 65),
    ("general_setting.quota_display_type", "EUR"),
    ("AutomaticRetryStatusCodes", "600"),
    ("AutomaticRetryStatusCodes", "500-abc"),
    ("SMTPPort", 70000),
    ("DataExportInterval", 0),
    ("AutoGroups", '{"default": 1}'),
    ("ModelRequestRateLimitGroup", '{"vip": [1]}'),
    ("payment_setting.amount_options", "[10, -5]"),
]


@pytest.mark.parametrize(("key", "value"), INVALID)
async def test_an_invalid_value_is_a_400_naming_the_key(embedded_app: Running, key: str, value: Any) -> None:
    api = await root_api(embedded_app)
    before = await listing(api)
    response = await put(api, key, value)
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["success"] is False
    assert body["message"].startswith(f"{key}:")
    assert "Traceback" not in body["message"] and "invalid literal" not in body["message"]
    assert await listing(api) == before  # nothing changed
    assert await raw_option(embedded_app, key) is None


@pytest.mark.parametrize(("payload", "field_name"), [
    ({"value": "x"}, "key"),
    ({"key": "", "value": "x"}, "key"),
    ({"key": 5, "value": "x"}, "key"),
    ({"key": "SystemName"}, "value"),
    ({"key": "SystemName", "value": None}, "value"),
    ({"key": "SystemName", "value": ["x"]}, "value"),
    ({"key": "ModelRatio", "value": {"gpt-4": 1}}, "value"),
])
async def test_a_malformed_put_body_is_a_400_naming_the_field(embedded_app: Running, payload: dict[str, Any],
                                                              field_name: str) -> None:
    api = await root_api(embedded_app)
    response = await api.put("/api/option/", json=payload)
    assert response.status_code == 400, response.text
    assert response.json()["message"].startswith(field_name)


async def test_email_verification_needs_an_smtp_server(embedded_app: Running) -> None:
    api = await root_api(embedded_app)
    refused = await put(api, "EmailVerificationEnabled", True)
    assert refused.status_code == 400
    assert refused.json()["message"].startswith("EmailVerificationEnabled:")
    assert "SMTPServer" in refused.json()["message"]
    assert (await listing(api))["EmailVerificationEnabled"] == "false"
    assert (await put(api, "EmailVerificationEnabled", False)).status_code == 200  # off is always fine
    assert (await put(api, "SMTPServer", "smtp.example.com")).status_code == 200
    assert (await put(api, "EmailVerificationEnabled", "true")).status_code == 200
    assert (await listing(api))["EmailVerificationEnabled"] == "true"


# ---- storing -----------------------------------------------------------------------------------------

VALID: list[tuple[str, Any, str]] = [
    ("RetryTimes", 5, "5"),
    ("RetryTimes", "7", "7"),
    ("RetryTimes", 10, "10"),
    ("RetryTimes", 3.0, "3"),
    ("QuotaPerUnit", 1000, "1000"),
    ("QuotaPerUnit", 1234567, "1234567"),
    ("QuotaPerUnit", "2500000", "2500000"),
    ("USDExchangeRate", 7.123456789, "7.123456789"),
    ("USDExchangeRate", "0.5", "0.5"),
    ("DisplayInCurrencyEnabled", False, "false"),
    ("DisplayInCurrencyEnabled", "TRUE", "true"),
    ("ModelRatio", '{ "gpt-4" : 15, "gpt-4o-mini": 0.075 }', '{"gpt-4":15,"gpt-4o-mini":0.075}'),
    ("GroupRatio", '{"default": 1, "vip": 2}', '{"default":1,"vip":2}'),
    ("ServerAddress", "https://gw.example.com", "https://gw.example.com"),
    ("ServerAddress", "", ""),
    ("SystemName", "  My Gateway  ", "My Gateway"),
    ("Notice", 42, "42"),
    ("AutomaticRetryStatusCodes", "429,500-599", "429,500-599"),
    ("AutomaticDisableKeywords", "quota exceeded\nbanned", "quota exceeded\nbanned"),
    ("general_setting.quota_display_type", "TOKENS", "TOKENS"),
    ("ModelCapabilities", '{"gpt-4o": {"vision": true}}', '{"gpt-4o":{"vision":true}}'),
    ("GroupGroupRatio", '{"vip": {"default": 0.5}}', '{"vip":{"default":0.5}}'),
    ("custom_currency_symbol", "€", "€"),
]


@pytest.mark.parametrize(("key", "value", "stored"), VALID)
async def test_a_valid_value_is_stored_in_its_string_form(embedded_app: Running, key: str, value: Any,
                                                          stored: str) -> None:
    api = await root_api(embedded_app)
    response = await put(api, key, value)
    assert response.status_code == 200, response.text
    assert response.json() == {"success": True, "message": "", "data": None}
    assert await raw_option(embedded_app, key) == stored
    assert (await listing(api))[key] == stored
    assert embedded_app.state.options[key] == parse(REGISTRY[key], stored)


async def test_a_change_shows_in_status_at_once(embedded_app: Running) -> None:
    api = await root_api(embedded_app)
    assert (await put(api, "SystemName", "Renamed")).status_code == 200
    assert (await put(api, "QuotaPerUnit", 1000)).status_code == 200
    assert (await put(api, "DisplayInCurrencyEnabled", False)).status_code == 200
    status = (await embedded_app.client().get("/api/status")).json()["data"]
    assert status["system_name"] == "Renamed"
    assert status["quota_per_unit"] == 1000
    assert status["display_in_currency"] is False


async def test_a_second_put_replaces_the_value(embedded_app: Running) -> None:
    api = await root_api(embedded_app)
    for name in ("First", "Second"):
        assert (await put(api, "SystemName", name)).status_code == 200
    assert await raw_option(embedded_app, "SystemName") == "Second"
    async with embedded_app.state.db.transaction() as tx:
        rows = (await tx.execute(select(Option).where(Option.key == "SystemName"))).scalars().all()
    assert len(rows) == 1


def test_float_options_keep_every_digit() -> None:
    for value, text in [(1234567, "1234567"), (1e15, "1000000000000000"), (7.123456789, "7.123456789"),
                        (0.1, "0.1"), (123456.789, "123456.789")]:
        stored = normalize("QuotaPerUnit", value)
        assert stored == text
        assert parse(REGISTRY["QuotaPerUnit"], stored) == pytest.approx(float(value), rel=0, abs=0)
    assert to_text(REGISTRY["QuotaPerUnit"], 500000.0) == "500000"


def test_normalize_names_the_key_for_every_invalid_value() -> None:
    for key, value in INVALID:
        with pytest.raises(OptionError) as caught:
            normalize(key, value)
        assert str(caught.value).startswith(f"{key}:")


# ---- secrets -----------------------------------------------------------------------------------------

async def test_a_secret_is_encrypted_at_rest_and_never_returned(embedded_app: Running) -> None:
    api = await root_api(embedded_app)
    secret = "  smtp-Pass-123  "  # secrets are not trimmed
    response = await put(api, "SMTPToken", secret)
    assert response.status_code == 200, response.text
    assert secret.strip() not in response.text

    raw = await raw_option(embedded_app, "SMTPToken")
    assert raw is not None
    assert raw.startswith("v1:") and secret.strip() not in raw
    assert embedded_app.state.box.decrypt(raw) == secret

    listed = await api.get("/api/option/")
    assert "SMTPToken" not in listed.text and secret.strip() not in listed.text
    status = await embedded_app.client().get("/api/status")
    assert secret.strip() not in status.text
    assert embedded_app.state.options["SMTPToken"] == secret  # the server itself can use it

    # a second value is encrypted afresh (random nonce)
    assert (await put(api, "SMTPToken", secret)).status_code == 200
    assert await raw_option(embedded_app, "SMTPToken") != raw


# ---- every worker ------------------------------------------------------------------------------------

async def subscribers(prefix: str, channel: str = CHANNEL) -> int:
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        db = int(client.connection_pool.connection_kwargs.get("db") or 0)
        counts = await client.pubsub_numsub(channel_name(prefix, db, channel))
        return int(counts[0][1])
    finally:
        await client.aclose()


async def wait_for_subscribers(prefix: str, n: int) -> None:
    """Both workers have finished starting (their invalidation listeners are subscribed)."""
    async with asyncio.timeout(10):
        while await subscribers(prefix) < n:
            await asyncio.sleep(0.02)


@pytest.mark.parametrize("stack", ["mariadb+redis"], indirect=True)
async def test_a_change_reaches_another_worker_within_a_second(stack: Stack, tmp_path: Path) -> None:
    assert stack.redis_url is not None
    config = make_config(stack.database_url, tmp_path, stack.redis_url, stack.prefix)
    async with serve(config) as one, serve(config) as two:
        await wait_for_subscribers(stack.prefix, 2)
        api = await root_api(one)
        reader = two.client()
        assert (await reader.get("/api/status")).json()["data"]["system_name"] == "Tollway"

        assert (await put(api, "SystemName", "Changed On One")).status_code == 200
        assert (await put(api, "SMTPToken", "relay-password")).status_code == 200
        seen = None
        async with asyncio.timeout(1.0):
            while seen != "Changed On One":
                seen = (await reader.get("/api/status")).json()["data"]["system_name"]
                if seen != "Changed On One":
                    await asyncio.sleep(0.02)
        async with asyncio.timeout(1.0):
            while two.state.options["SMTPToken"] != "relay-password":
                await asyncio.sleep(0.02)

        # and the other way round
        root_two = await logged_in(two, "root")
        assert (await put(root_two, "RetryTimes", 9)).status_code == 200
        async with asyncio.timeout(1.0):
            while (await listing(api))["RetryTimes"] != "9":
                await asyncio.sleep(0.02)


async def test_a_change_writes_a_system_log_naming_the_key_never_the_value(app: Running) -> None:
    from models.logs import Log

    root = await root_api(app)
    assert (await put(root, "SMTPToken", "s3cret-token-value")).status_code == 200
    assert (await put(root, "SystemName", "Gateway")).status_code == 200
    async with app.state.db.transaction() as tx:
        rows = (await tx.scalars(select(Log).where(Log.type == 4).order_by(Log.id))).all()
    assert [r.content for r in rows] == ["option SMTPToken updated by root",
                                         "option SystemName updated by root"]
    assert all("s3cret" not in (r.content + r.other) for r in rows)


async def test_a_reload_builds_the_typed_settings_and_drops_malformed_shapes(embedded_app: Running) -> None:
    """Readers take `state.options.settings`: typed once per reload. A JSON option written to the database
    by hand with the wrong shape reads as absent (no reader re-checks types), damaged status-code ranges as
    none, and a change made through the route is in the snapshot at once."""
    options = embedded_app.state.options
    assert options.settings.retry_times == 2 and options.settings.auto_groups == ("default",)
    assert options.settings.automatic_disable_status_codes == ((401, 401), (403, 403))
    async with options.db.transaction() as tx:
        for key, text in (("ModelRatio", '{"m": 2, "bad": "x", "flag": true}'), ("AutoGroups", '{"a": 1}'),
                          ("GroupRatio", '{"default": 1, "odd": "x"}'), ("AutomaticRetryStatusCodes", "junk"),
                          ("ModelCapabilities", '{"m": {"speech_output": true, "moderation": 1}, "n": 3}'),
                          ("ModelRequestRateLimitGroup", '{"vip": [5, 2], "bad": [1]}')):
            tx.add(Option(key=key, value=text))
    await options.reload()
    s = options.settings
    assert dict(s.model_ratio) == {"m": 2.0}
    assert s.auto_groups == ()
    assert dict(s.group_ratio) == {"default": 1.0, "odd": 1.0}  # a listed group exists; a bad ratio reads 1
    assert s.automatic_retry_status_codes == ()
    assert {m: dict(c) for m, c in s.model_capabilities.items()} == {"m": {"speech_output": True}}
    assert dict(s.rate_limit_groups) == {"vip": (5, 2)}
    assert (await put(await root_api(embedded_app), "RetryTimes", 5)).status_code == 200
    assert options.settings.retry_times == 5
