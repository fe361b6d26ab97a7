"""What new-api's clients (its classic web console, scripts written against it) read, answered in new-api's
shapes (docs/api/options.md#coming-from-new-api), and the option `NewApiCompatibleErrors`.

Proves:
- `GET /api/status` has every key of new-api's (controller/misc.go `GetStatus`) with the JSON type new-api
  gives it, the features Tollway lacks off / empty / 0, `chats` a JSON list (the console stores
  `JSON.stringify(chats)` and parses it on every page), and still every key it had;
- `GET /api/notice`, `/api/about`, `/api/home_page_content`, `/api/models`, `/api/prefill_group/`,
  `/api/user/oauth/bindings`, `/api/uptime/status`, `/api/subscription/plans`, `/api/subscription/self`
  and `/api/custom-oauth-provider/` answer new-api's shapes at new-api's access levels; `POST
  /api/user/amount` (EPay, not offered) refuses with the reason where the console reads it (`data`);
- `POST /api/token/:id/key` answers the key without `sk-`, as new-api does: the console's copy (`sk-` +
  key) is the key;
- `NewApiCompatibleErrors` is a root-settable boolean option (default false, listed, validated); on, an
  `/api` refusal answers 200 + `success: false` with the same message (and `code`), decided in one place,
  so every route family follows; new-api's kept statuses stay: no valid credential 401, rate limits 429
  with `Retry-After`, the 403 asking for a secure verification, an unknown `/api` route 404; the model-call
  routes answer exactly as with the option off; turning it off restores the statuses at once.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from server.auth.service import LOGIN_FAIL_LIMIT
from tests.gateway import seed_channel, seed_key
from tests.harness import Api, Running, add_user, data_of, fails, logged_in

# controller/misc.go GetStatus (new-api): every key it always sends, with the JSON type of its value. The
# keys it adds only when a feature is on (`api_info`, `announcements`, `faq`, `custom_oauth_providers`) are
# absent there too while the feature is off. The passkey settings keys come with passkeys.
NEW_API_STATUS: dict[str, type | tuple[type, ...]] = {
    "version": str, "start_time": int, "email_verification": bool,
    "github_oauth": bool, "github_client_id": str, "discord_oauth": bool, "discord_client_id": str,
    "linuxdo_oauth": bool, "linuxdo_client_id": str, "linuxdo_minimum_trust_level": int,
    "telegram_oauth": bool, "telegram_bot_name": str,
    "system_name": str, "logo": str, "footer_html": str, "wechat_qrcode": str, "wechat_login": bool,
    "server_address": str, "turnstile_check": bool, "turnstile_site_key": str, "top_up_link": str,
    "docs_link": str, "quota_per_unit": (int, float), "display_in_currency": bool,
    "quota_display_type": str, "custom_currency_symbol": str, "custom_currency_exchange_rate": (int, float),
    "enable_batch_update": bool, "enable_drawing": bool, "enable_task": bool, "enable_data_export": bool,
    "data_export_default_time": str, "default_collapse_sidebar": bool, "mj_notify_enabled": bool,
    "chats": list, "demo_site_enabled": bool, "self_use_mode_enabled": bool, "default_use_auto_group": bool,
    "usd_exchange_rate": (int, float), "price": (int, float), "stripe_unit_price": (int, float),
    "api_info_enabled": bool, "uptime_kuma_enabled": bool, "announcements_enabled": bool,
    "faq_enabled": bool, "HeaderNavModules": str, "SidebarModulesAdmin": str,
    "oidc_enabled": bool, "oidc_client_id": str, "oidc_authorization_endpoint": str,
    "passkey_login": bool, "setup": bool,
    "user_agreement_enabled": bool, "privacy_policy_enabled": bool, "checkin_enabled": bool,
}
ABSENT_FEATURES_OFF = (
    "github_oauth", "discord_oauth", "linuxdo_oauth", "telegram_oauth", "wechat_login", "oidc_enabled",
    "enable_drawing", "enable_task", "mj_notify_enabled", "default_collapse_sidebar", "api_info_enabled",
    "uptime_kuma_enabled", "announcements_enabled", "faq_enabled", "user_agreement_enabled",
    "privacy_policy_enabled", "checkin_enabled", "turnstile_check",
)
ABSENT_FEATURES_EMPTY = (
    "github_client_id", "discord_client_id", "linuxdo_client_id", "telegram_bot_name", "wechat_qrcode",
    "oidc_client_id", "oidc_authorization_endpoint", "turnstile_site_key",
)
OURS_BEFORE = ("version", "start_time", "system_name", "logo", "footer_html", "docs_link", "server_address",
               "top_up_link", "setup", "quota_per_unit", "display_in_currency", "quota_display_type",
               "usd_exchange_rate", "custom_currency_symbol", "custom_currency_exchange_rate",
               "email_verification", "passkey_login", "turnstile_check", "turnstile_site_key",
               "self_use_mode_enabled", "demo_site_enabled", "default_use_auto_group", "enable_data_export",
               "data_export_default_time")


def envelope(response: httpx.Response) -> Any:
    """new-api's success envelope (common.ApiSuccess / gin.H{success, message, data}): 200, `success`
    true, `message` "", the payload in `data`."""
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["success"] is True and body["message"] == "", body
    return body["data"]


async def root_of(app: Running) -> Api:
    await add_user(app.state, "root", role=100)
    return await logged_in(app, "root")


async def set_option(root: Api, key: str, value: Any) -> None:
    data_of(await root.put("/api/option/", json={"key": key, "value": value}))


# ---- /api/status and the routes the console reads -----------------------------------------------------

async def test_status_has_every_key_of_new_api_status(app: Running) -> None:
    """Shape of controller/misc.go `GetStatus`: every key, each of new-api's JSON type."""
    status = envelope(await app.client().get("/api/status"))
    missing = sorted(set(NEW_API_STATUS) - set(status))
    assert not missing, missing
    for key, kind in NEW_API_STATUS.items():
        value = status[key]
        assert isinstance(value, kind) and (bool not in (kind if isinstance(kind, tuple) else (kind,))
                                            or isinstance(value, bool)), (key, value)
        if kind is not bool:
            assert not isinstance(value, bool), (key, value)
    assert all(key in status for key in OURS_BEFORE)
    assert [k for k in ABSENT_FEATURES_OFF if status[k] is not False] == []
    assert [k for k in ABSENT_FEATURES_EMPTY if status[k] != ""] == []
    assert status["chats"] == [] and status["linuxdo_minimum_trust_level"] == 0 and status["price"] == 0
    assert status["enable_batch_update"] is True  # quota and usage reach SQL in batches
    assert status["stripe_unit_price"] == 8  # the option StripeUnitPrice's default
    # the console's layout, JSON text it parses: the header object whole (so every entry is named), the
    # sidebar's sections merged over its defaults; the pages of features Tollway lacks are hidden
    header = json.loads(status["HeaderNavModules"])
    assert header == {"home": True, "console": True, "pricing": {"enabled": False, "requireAuth": False},
                      "docs": True, "about": True}
    sidebar = json.loads(status["SidebarModulesAdmin"])
    assert sidebar == {"console": {"midjourney": False, "task": False},
                       "admin": {"models": False, "deployment": False, "subscription": False}}


async def test_the_console_layout_options_are_root_settable_json_objects(embedded_app: Running) -> None:
    """new-api stores HeaderNavModules / SidebarModulesAdmin as options its settings page writes."""
    root = await root_of(embedded_app)
    await set_option(root, "SidebarModulesAdmin", '{"admin": {"user": false}}')
    status = envelope(await embedded_app.client().get("/api/status"))
    assert status["SidebarModulesAdmin"] == '{"admin": {"user": false}}'
    await set_option(root, "HeaderNavModules", "")
    assert envelope(await embedded_app.client().get("/api/status"))["HeaderNavModules"] == ""
    for bad in ("[1]", "{", "true"):
        fails(await root.put("/api/option/", json={"key": "HeaderNavModules", "value": bad}), 400,
              "HeaderNavModules: must be empty or a JSON object")


async def test_status_follows_the_options_it_mirrors(embedded_app: Running) -> None:
    root = await root_of(embedded_app)
    await set_option(root, "StripeUnitPrice", 7.5)
    assert envelope(await embedded_app.client().get("/api/status"))["stripe_unit_price"] == 7.5


async def test_notice_about_and_home_page_content(embedded_app: Running) -> None:
    """controller/misc.go `GetNotice` / `GetAbout` / `GetHomePageContent`: public, `data` the option's text
    ("" unset)."""
    anonymous = embedded_app.client()
    for path in ("/api/notice", "/api/about", "/api/home_page_content"):
        assert envelope(await anonymous.get(path)) == ""
    root = await root_of(embedded_app)
    await set_option(root, "About", "https://example.com/about")
    assert envelope(await anonymous.get("/api/about")) == "https://example.com/about"
    await set_option(root, "Notice", "**maintenance** at 02:00")
    await set_option(root, "HomePageContent", "  # Welcome\n\n<b>hi</b>\n")
    assert envelope(await anonymous.get("/api/notice")) == "**maintenance** at 02:00"
    assert envelope(await anonymous.get("/api/home_page_content")) == "  # Welcome\n\n<b>hi</b>\n"
    options = {o["key"]: o["value"] for o in data_of(await root.get("/api/option/"))}
    assert options["HomePageContent"] == "  # Welcome\n\n<b>hi</b>\n"


async def test_models_by_channel_type(embedded_app: Running) -> None:
    """controller/model.go `DashboardListModels` (UserAuth): `data` is `{"<channel type>": [model, …]}`,
    the models a channel of each type is offered."""
    fails(await embedded_app.client().get("/api/models"), 401)
    await add_user(embedded_app.state, "alice")
    data = envelope(await (await logged_in(embedded_app, "alice")).get("/api/models"))
    assert isinstance(data, dict) and set(data) == {"1", "24"}
    assert all(isinstance(models, list) and all(isinstance(m, str) for m in models)
               for models in data.values())
    assert "gemini-2.5-flash" in data["24"] and "omni-moderation-latest" in data["1"]
    assert not set(data["1"]) & set(data["24"])


async def test_prefill_groups_are_an_empty_list_for_admins(embedded_app: Running) -> None:
    """controller/prefill_group.go `GetPrefillGroups` (AdminAuth, `?type=` filter): a list of groups;
    Tollway keeps none."""
    root = await root_of(embedded_app)
    await add_user(embedded_app.state, "admin", role=10)
    await add_user(embedded_app.state, "alice")
    admin = await logged_in(embedded_app, "admin")
    for path in ("/api/prefill_group/", "/api/prefill_group?type=model", "/api/prefill_group/?type=tag"):
        assert envelope(await admin.get(path)) == []
    assert envelope(await root.get("/api/prefill_group/")) == []
    fails(await (await logged_in(embedded_app, "alice")).get("/api/prefill_group/"), 403)
    fails(await admin.get("/api/prefill_group/", params={"type": "x" * 33}), 400, "type:", prefix=True)


async def test_oauth_bindings_are_an_empty_list(embedded_app: Running) -> None:
    """controller/custom_oauth.go `GetUserOAuthBindings` (UserAuth): a list of bindings; none exist."""
    fails(await embedded_app.client().get("/api/user/oauth/bindings"), 401)
    await add_user(embedded_app.state, "alice")
    assert envelope(await (await logged_in(embedded_app, "alice")).get("/api/user/oauth/bindings")) == []


async def test_the_dashboard_top_up_and_settings_pages_find_their_routes(embedded_app: Running) -> None:
    """The routes the classic console calls on those pages, in new-api's shapes at its access levels:
    `GetUptimeKumaStatus` (public; with no monitor group configured, []), `GetSubscriptionPlans` and
    `GetSubscriptionSelf` (UserAuth), `GetCustomOAuthProviders` (RootAuth)."""
    anonymous = embedded_app.client()
    root = await root_of(embedded_app)
    await add_user(embedded_app.state, "admin", role=10)
    await add_user(embedded_app.state, "alice")
    admin, alice = await logged_in(embedded_app, "admin"), await logged_in(embedded_app, "alice")
    assert envelope(await anonymous.get("/api/uptime/status")) == []
    assert envelope(await alice.get("/api/subscription/plans")) == []
    assert envelope(await alice.get("/api/subscription/self")) == {
        "billing_preference": "wallet_only", "subscriptions": [], "all_subscriptions": []}
    assert envelope(await root.get("/api/custom-oauth-provider/")) == []
    for path in ("/api/subscription/plans", "/api/subscription/self"):
        fails(await anonymous.get(path), 401)
    fails(await admin.get("/api/custom-oauth-provider/"), 403, "permission denied")


EPAY_REFUSAL = ("EPay top-up is not offered here; the price of 10 units by card is "
                "POST /api/user/stripe/amount")


async def test_the_epay_price_is_refused_where_the_console_reads_the_reason(embedded_app: Running) -> None:
    """new-api's `RequestAmount` (UserAuth) prices an EPay order, a method Tollway lacks: its
    refusal carries the reason in `data` too (new-api answers `{message: "error", data: <reason>}` and
    the console shows `data`), 403, or 200 with `NewApiCompatibleErrors`; bad input is a 400 first."""
    root = await root_of(embedded_app)
    await add_user(embedded_app.state, "alice")
    alice = await logged_in(embedded_app, "alice")
    fails(await embedded_app.client().post("/api/user/amount", json={"amount": 10}), 401)
    refused = await alice.post("/api/user/amount", json={"amount": 10, "top_up_code": ""})
    assert refused.status_code == 403
    assert refused.json() == {"success": False, "message": EPAY_REFUSAL, "data": EPAY_REFUSAL}
    fails(await alice.post("/api/user/amount", json={"amount": "ten"}), 400, "amount:", prefix=True)
    await set_option(root, "NewApiCompatibleErrors", True)
    compat_refusal(await alice.post("/api/user/amount", json={"amount": 10}), EPAY_REFUSAL, data=EPAY_REFUSAL)


async def test_a_key_copied_from_the_console_is_the_key(embedded_app: Running) -> None:
    """new-api's `GetTokenKey` answers `{key}` without `sk-` (new-api stores keys bare) and the
    console copies `sk-` + key: that is the key the creation showed, and the gateway takes it."""
    await add_user(embedded_app.state, "alice", quota=1000)
    alice = await logged_in(embedded_app, "alice")
    created = data_of(await alice.post("/api/token/", json={"name": "console", "unlimited_quota": True}))
    revealed = envelope(await alice.post(f"/api/token/{created['id']}/key"))
    assert set(revealed) == {"key"} and len(revealed["key"]) == 48 and not revealed["key"].startswith("sk-")
    copied = "sk-" + revealed["key"]  # what the console's "copy key" puts on the clipboard
    assert copied == created["key"]
    async with httpx.AsyncClient(base_url=embedded_app.url, timeout=30) as client:
        listed = await client.get("/v1/models", headers={"Authorization": f"Bearer {copied}"})
        assert listed.status_code == 200, listed.text


# ---- NewApiCompatibleErrors ---------------------------------------------------------------------------

async def test_the_option_is_a_root_settable_boolean_defaulting_to_false(embedded_app: Running) -> None:
    root = await root_of(embedded_app)
    options = {o["key"]: o["value"] for o in data_of(await root.get("/api/option/"))}
    assert options["NewApiCompatibleErrors"] == "false"
    fails(await root.put("/api/option/", json={"key": "NewApiCompatibleErrors", "value": "maybe"}), 400,
          "NewApiCompatibleErrors:", prefix=True)
    await set_option(root, "NewApiCompatibleErrors", True)
    options = {o["key"]: o["value"] for o in data_of(await root.get("/api/option/"))}
    assert options["NewApiCompatibleErrors"] == "true"
    assert embedded_app.state.options.settings.new_api_compatible_errors is True
    await add_user(embedded_app.state, "alice")
    alice = await logged_in(embedded_app, "alice")
    denied = await alice.put("/api/option/", json={"key": "NewApiCompatibleErrors", "value": False})
    assert denied.status_code == 200 and denied.json() == {"success": False, "message": "permission denied"}


def compat_refusal(response: httpx.Response, message: str, **extra: Any) -> None:
    """new-api's refusal (common.ApiErrorMsg / c.JSON(200, {success: false, message})): status 200, the
    same message Tollway gives with the option off, any `code` or extra field kept."""
    assert response.status_code == 200, response.text
    assert response.json() == {"success": False, "message": message, **extra}, response.text


async def test_refusals_answer_200_as_new_api_does(app: Running) -> None:
    root = await root_of(app)
    await add_user(app.state, "alice")
    alice = await logged_in(app, "alice")
    before = {
        "register": await app.client().post("/api/user/register",
                                            json={"username": "alice", "password": "password123"}),
        "login": await app.client().post("/api/user/login", json={"username": "alice", "password": "nope"}),
        "role": await alice.get("/api/user/"),
        "missing": await root.get("/api/token/999999"),
        "body": await root.request("PUT", "/api/option/", content=b"{not json",
                                   headers={"Content-Type": "application/json"}),
    }
    assert [r.status_code for r in before.values()] == [409, 401, 403, 404, 400]
    await set_option(root, "NewApiCompatibleErrors", True)
    after = {
        "register": await app.client().post("/api/user/register",
                                            json={"username": "alice", "password": "password123"}),
        "login": await app.client().post("/api/user/login", json={"username": "alice", "password": "nope"}),
        "role": await alice.get("/api/user/"),
        "missing": await root.get("/api/token/999999"),
        "body": await root.request("PUT", "/api/option/", content=b"{not json",
                                   headers={"Content-Type": "application/json"}),
    }
    for name, response in after.items():
        compat_refusal(response, before[name].json()["message"])
        assert response.headers["x-request-id"]
    await set_option(root, "NewApiCompatibleErrors", False)  # off again: the statuses come back at once
    fails(await alice.get("/api/user/"), 403, "permission denied")


async def test_a_failed_channel_test_answers_200_with_its_time(embedded_app: Running) -> None:
    """controller/channel-test.go `TestChannel` answers a failed test 200 with
    `{success: false, message, time}`."""
    root = await root_of(embedded_app)
    cid = await seed_channel(embedded_app.state, type=1, base_url="http://127.0.0.1:9",
                             models="omni-moderation-latest")
    statuses = await root.get(f"/api/channel/test/{cid}")
    assert statuses.status_code == 502, statuses.text
    await set_option(root, "NewApiCompatibleErrors", True)
    compat = await root.get(f"/api/channel/test/{cid}")
    assert compat.status_code == 200, compat.text
    body = compat.json()
    assert body["success"] is False and body["time"] == 0 and body["message"] == statuses.json()["message"]


async def test_new_api_keeps_these_statuses(embedded_app: Running) -> None:
    """Where new-api answers with a status too, so do we with the option on: no valid credential 401
    (middleware/auth.go authHelper), rate limits 429 (middleware/rate-limit.go), the 403 asking for a secure
    verification with its `code` (middleware/secure_verification.go; the console reads both), an unknown
    `/api` path 404 (router/web-router.go NoRoute → RelayNotFound)."""
    root = await root_of(embedded_app)
    await set_option(root, "NewApiCompatibleErrors", True)
    anonymous = embedded_app.client()
    fails(await anonymous.get("/api/user/self"), 401, "not logged in")
    fails(await anonymous.get("/api/user/self", headers={"Authorization": "Bearer not-a-token",
                                                         "New-Api-User": "1"}), 401, "invalid access token")
    fails(await root.get("/api/user/self", headers={"New-Api-User": "2"}), 401, "New-Api-User")
    fails(await anonymous.get("/api/usage/token/"), 401, "an API key is required")
    fails(await anonymous.get("/api/usage/token/", headers={"Authorization": "Bearer sk-unknown"}), 401)
    fails(await anonymous.get("/api/no/such/route"), 404, "no such route")
    cid = await seed_channel(embedded_app.state, type=1, base_url="http://127.0.0.1:9", models="m")
    verification = await root.post(f"/api/channel/{cid}/key", json={})
    assert verification.status_code == 403 and verification.json()["code"] == "VERIFICATION_REQUIRED"
    await add_user(embedded_app.state, "victim")
    client = embedded_app.client()
    for _ in range(LOGIN_FAIL_LIMIT):
        compat_refusal(await client.post("/api/user/login", json={"username": "victim", "password": "bad"}),
                       "invalid username or password")
    locked = await client.post("/api/user/login", json={"username": "victim", "password": "password123"})
    fails(locked, 429)
    assert int(locked.headers["retry-after"]) >= 1


@pytest.mark.parametrize("on", [False, True])
async def test_the_model_call_routes_answer_the_same_either_way(embedded_app: Running, on: bool) -> None:
    """new-api answers the OpenAI and Gemini wires with real statuses; the option does not touch them."""
    root = await root_of(embedded_app)
    await set_option(root, "NewApiCompatibleErrors", on)
    uid = await add_user(embedded_app.state, "alice", quota=10_000_000)
    _, key = await seed_key(embedded_app.state, uid, unlimited=True)
    async with httpx.AsyncClient(base_url=embedded_app.url) as client:
        no_key = await client.post("/v1/moderations", json={"model": "omni-moderation-latest", "input": "x"})
        bad = await client.post("/v1/moderations", content=b"{", headers={"Authorization": f"Bearer {key}"})
        google = await client.post("/v1beta/models/gemini-2.5-flash:generateContent", json={},
                                   headers={"x-goog-api-key": "wrong"})
    assert no_key.status_code == 401 and no_key.json()["error"]["code"] == "invalid_api_key"
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    assert google.status_code in (400, 401) and "success" not in google.json()
