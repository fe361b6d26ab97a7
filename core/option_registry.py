"""The typed registry of options: every key, its kind, default, rule and where the code reads it.

`normalize(key, value)` turns what `PUT /api/option/` received into the stored string or raises
`OptionError` naming the key; `parse(key, text)` turns the stored string into a Python value. A spec's
`attr` names the attribute of the typed snapshot `core.settings.Settings` that the option becomes
(`"smtp.port"`: the `port` of the composite `smtp`), and `read` how its value is read there (by default the
kind's plain conversion; the tolerant readers of core/option_values.py for JSON and lists): `Settings.of`
is derived from this table, so an option is declared once. Options without `attr` are stored and served
but read by no code.
Keys kept only for new-api clients (GroupGroupRatio, TopupGroupRatio, CacheRatio, AudioRatio,
AudioCompletionRatio, DefaultUseAutoGroup) are stored and returned but have no effect.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from core import option_values as read
from core.option_values import ATTACHMENTS, USER_VERIFICATION, parse_status_ranges


class OptionError(ValueError):
    """The message names the key."""


Rule = Callable[[Any], None]
_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")


@dataclass(frozen=True, slots=True)
class Spec:
    key: str
    kind: str  # str | int | float | bool | json | text
    default: Any
    rule: Rule | None = None
    attr: str | None = None  # the `Settings` attribute it becomes ("group.name" inside a composite)
    read: Callable[[Any], Any] | None = None  # value → attribute; None: the kind's plain conversion

    @property
    def secret(self) -> bool:
        k = self.key.lower()
        return k.endswith(("token", "secret", "key"))


def _fail(msg: str) -> None:
    raise ValueError(msg)


def length(lo: int, hi: int) -> Rule:
    return lambda v: None if lo <= len(v) <= hi else _fail(f"must be {lo}–{hi} characters")


def one_of(*allowed: str) -> Rule:
    return lambda v: None if v in allowed else _fail(f"must be one of {', '.join(allowed) or '(empty)'}")


def at_least(lo: float, *, strict: bool = False) -> Rule:
    if strict:
        return lambda v: None if v > lo else _fail(f"must be greater than {lo:g}")
    return lambda v: None if v >= lo else _fail(f"must be at least {lo:g}")


def between(lo: float, hi: float) -> Rule:
    return lambda v: None if lo <= v <= hi else _fail(f"must be between {lo:g} and {hi:g}")


def http_url_or_empty(v: str) -> None:
    if v == "":
        return
    parts = urlsplit(v)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        _fail("must be an http(s) URL")
    if v.endswith("/"):
        _fail("must not end with '/'")


_HOSTNAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")


def host_name_or_empty(v: str) -> None:
    """A passkey RP id: a bare host name (no scheme, port or path)."""
    if v and not _HOSTNAME.fullmatch(v):
        _fail("must be a host name such as example.com (no scheme, port or path)")


def origin_list(v: str) -> None:
    """Comma-separated origins, each `http(s)://host[:port]` without a path."""
    for origin in (o.strip() for o in v.split(",")):
        if not origin:
            continue
        parts = urlsplit(origin)
        try:
            parts.port  # noqa: B018  (raises on a port that is not a number in range)
        except ValueError:
            _fail(f"{origin!r} has an invalid port")
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path.strip("/") \
                or parts.query or parts.fragment or parts.username is not None:
            _fail(f"{origin!r} must be an origin such as https://example.com")


def number_map(v: Any) -> None:
    if not isinstance(v, dict):
        _fail("must be a JSON object")
    for k, n in v.items():
        if isinstance(n, bool) or not isinstance(n, int | float) or not math.isfinite(n) or n < 0:
            _fail(f"value of {k!r} must be a number ≥ 0")


def positive_number_map(v: Any) -> None:
    number_map(v)
    for k, n in v.items():
        if n <= 0:
            _fail(f"value of {k!r} must be a number > 0")


def group_ratio(v: Any) -> None:
    number_map(v)
    for name in v:
        if not 1 <= len(name) <= 64 or "," in name:
            _fail(f"group name {name!r} must be 1–64 characters without ','")
    if "default" not in v:
        _fail("must keep the 'default' group")


def string_map(v: Any) -> None:
    if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
        _fail("must be a JSON object of strings")


def nested_number_map(v: Any) -> None:
    if not isinstance(v, dict):
        _fail("must be a JSON object")
    for inner in v.values():
        number_map(inner)


def string_list(v: Any) -> None:
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        _fail("must be a JSON array of names")


def number_list(v: Any) -> None:
    if not isinstance(v, list) or not all(isinstance(x, int | float) and not isinstance(x, bool) and x > 0
                                          for x in v):
        _fail("must be a JSON array of positive numbers")


def rate_limit_groups(v: Any) -> None:
    if not isinstance(v, dict):
        _fail("must be a JSON object")
    for name, pair in v.items():
        if (not isinstance(pair, list) or len(pair) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in pair)):
            _fail(f"value of {name!r} must be [count, success_count] (integers ≥ 0)")


def capabilities(v: Any) -> None:
    if not isinstance(v, dict):
        _fail("must be a JSON object")
    for model, caps in v.items():
        if not isinstance(caps, dict) or not all(isinstance(b, bool) for b in caps.values()):
            _fail(f"value of {model!r} must be an object of booleans")


def json_object_text(v: str) -> None:
    if v == "":
        return
    try:
        parsed = json.loads(v)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        _fail("must be empty or a JSON object")


def status_ranges(v: str) -> None:
    parse_status_ranges(v)


DISABLE_KEYWORDS = "\n".join([
    "Your credit balance is too low",
    "This organization has been disabled.",
    "You exceeded your current quota",
    "Permission denied",
    "The security token included in the request is invalid",
    "Operation not allowed",
    "Your account is not authorized",
])
# new-api's console layout, served in `/api/status` for it: its header without the pricing page and its
# sidebar without the Midjourney, task, model-metadata, deployment and subscription pages (Tollway has none;
# the console merges the sidebar's sections over its defaults, but reads the header object whole)
HEADER_NAV_MODULES = json.dumps({"home": True, "console": True,
                                 "pricing": {"enabled": False, "requireAuth": False},
                                 "docs": True, "about": True}, separators=(",", ":"))
SIDEBAR_MODULES_ADMIN = json.dumps({"console": {"midjourney": False, "task": False},
                                    "admin": {"models": False, "deployment": False, "subscription": False}},
                                   separators=(",", ":"))
EMAIL_WHITELIST = "gmail.com,yahoo.com,outlook.com,hotmail.com,icloud.com,qq.com,163.com,126.com,foxmail.com"

SPECS: tuple[Spec, ...] = (
    # site
    Spec("SystemName", "str", "Tollway", length(1, 64), attr="system_name"),
    Spec("Logo", "str", "", attr="logo"), Spec("Footer", "str", "", attr="footer"),
    Spec("Notice", "str", "", attr="notice"), Spec("About", "str", "", attr="about"),
    Spec("DocsLink", "str", "", attr="docs_link"), Spec("TopUpLink", "str", "", attr="top_up_link"),
    Spec("HomePageContent", "text", "", attr="home_page_content"),
    Spec("HeaderNavModules", "text", HEADER_NAV_MODULES, json_object_text, attr="header_nav_modules"),
    Spec("SidebarModulesAdmin", "text", SIDEBAR_MODULES_ADMIN, json_object_text,
         attr="sidebar_modules_admin"),
    Spec("ServerAddress", "str", "", http_url_or_empty, attr="server_address"),
    # quota display
    Spec("QuotaPerUnit", "float", 500000.0, at_least(0, strict=True), attr="quota_per_unit"),
    Spec("USDExchangeRate", "float", 7.3, at_least(0, strict=True), attr="usd_exchange_rate"),
    Spec("general_setting.quota_display_type", "str", "USD", one_of("USD", "CNY", "TOKENS", "CUSTOM"),
         attr="quota_display_type"),
    Spec("DisplayInCurrencyEnabled", "bool", True, attr="display_in_currency"),
    Spec("DisplayTokenStatEnabled", "bool", True),
    Spec("custom_currency_symbol", "str", "¤", length(0, 8), attr="custom_currency_symbol"),
    Spec("custom_currency_exchange_rate", "float", 1.0, at_least(0, strict=True),
         attr="custom_currency_exchange_rate"),
    # quota amounts
    Spec("QuotaForNewUser", "int", 0, at_least(0), attr="quota_for_new_user"),
    Spec("QuotaForInviter", "int", 0, at_least(0), attr="quota_for_inviter"),
    Spec("QuotaForInvitee", "int", 0, at_least(0), attr="quota_for_invitee"),
    Spec("PreConsumedQuota", "int", 500, at_least(0), attr="pre_consumed_quota"),
    Spec("QuotaRemindThreshold", "int", 1000, at_least(0)),
    Spec("RetryTimes", "int", 2, between(0, 10), attr="retry_times"),
    # pricing
    Spec("ModelRatio", "json", {}, number_map, attr="model_ratio", read=read.numbers),
    Spec("CompletionRatio", "json", {}, number_map, attr="completion_ratio", read=read.numbers),
    Spec("CacheRatio", "json", {}, number_map), Spec("AudioRatio", "json", {}, number_map),
    Spec("AudioCompletionRatio", "json", {}, number_map),
    Spec("ModelPrice", "json", {}, number_map, attr="model_price", read=read.numbers),
    Spec("ModelCapabilities", "json", {}, capabilities, attr="model_capabilities", read=read.capabilities),
    # groups
    Spec("GroupRatio", "json", {"default": 1, "vip": 1, "svip": 1}, group_ratio, attr="group_ratio",
         read=read.ratios),
    Spec("GroupGroupRatio", "json", {}, nested_number_map),
    Spec("TopupGroupRatio", "json", {"default": 1, "vip": 1, "svip": 1}, positive_number_map),
    Spec("UserUsableGroups", "json", {"default": "Default group", "vip": "VIP group"}, string_map,
         attr="user_usable_groups", read=read.texts),
    Spec("AutoGroups", "json", ["default"], string_list, attr="auto_groups", read=read.names),
    Spec("DefaultUseAutoGroup", "bool", False, attr="default_use_auto_group"),
    # channels
    Spec("AutomaticDisableChannelEnabled", "bool", True, attr="automatic_disable_channel_enabled"),
    Spec("AutomaticEnableChannelEnabled", "bool", True, attr="automatic_enable_channel_enabled"),
    Spec("ChannelDisableThreshold", "float", 5.0, at_least(0, strict=True), attr="channel_disable_threshold"),
    Spec("AutomaticDisableKeywords", "text", DISABLE_KEYWORDS, attr="automatic_disable_keywords",
         read=read.keywords),
    Spec("AutomaticDisableStatusCodes", "str", "401,403", status_ranges,
         attr="automatic_disable_status_codes", read=read.ranges),
    Spec("AutomaticRetryStatusCodes", "str", "401,403,408,429,500-599", status_ranges,
         attr="automatic_retry_status_codes", read=read.ranges),
    # switches
    Spec("LogConsumeEnabled", "bool", True, attr="log_consume_enabled"),
    Spec("RegisterEnabled", "bool", True, attr="register_enabled"),
    Spec("PasswordLoginEnabled", "bool", True, attr="password_login_enabled"),
    Spec("PasswordRegisterEnabled", "bool", True, attr="password_register_enabled"),
    Spec("SelfUseModeEnabled", "bool", False, attr="self_use_mode_enabled"),
    Spec("DemoSiteEnabled", "bool", False, attr="demo_site_enabled"),
    Spec("DataExportEnabled", "bool", True, attr="data_export_enabled"),
    Spec("DataExportInterval", "int", 5, between(1, 60)),
    Spec("DataExportDefaultTime", "str", "hour", one_of("hour", "day", "week"),
         attr="data_export_default_time"),
    # `/api` refusals answer 200 as new-api's do
    Spec("NewApiCompatibleErrors", "bool", False, attr="new_api_compatible_errors"),
    # e-mail
    Spec("EmailVerificationEnabled", "bool", False, attr="email_verification_enabled"),
    Spec("EmailDomainRestrictionEnabled", "bool", False, attr="email_domain_restriction_enabled"),
    Spec("EmailAliasRestrictionEnabled", "bool", False, attr="email_alias_restriction_enabled"),
    Spec("EmailDomainWhitelist", "str", EMAIL_WHITELIST, attr="email_domain_whitelist", read=read.domains),
    Spec("SMTPServer", "str", "", attr="smtp.server", read=read.stripped),
    Spec("SMTPPort", "int", 587, between(1, 65535), attr="smtp.port"),
    Spec("SMTPAccount", "str", "", attr="smtp.account", read=read.stripped),
    Spec("SMTPFrom", "str", "", attr="smtp.from_address", read=read.stripped),
    Spec("SMTPToken", "str", "", attr="smtp.token"),
    Spec("SMTPSSLEnabled", "bool", False, attr="smtp.ssl"),
    # model request rate limits
    Spec("ModelRequestRateLimitEnabled", "bool", False, attr="rate_limit_enabled"),
    Spec("ModelRequestRateLimitDurationMinutes", "int", 1, at_least(1), attr="rate_limit_minutes"),
    Spec("ModelRequestRateLimitCount", "int", 0, at_least(0), attr="rate_limit_count"),
    Spec("ModelRequestRateLimitSuccessCount", "int", 1000, at_least(0), attr="rate_limit_success_count"),
    Spec("ModelRequestRateLimitGroup", "json", {}, rate_limit_groups, attr="rate_limit_groups",
         read=read.count_pairs),
    # payments (read by the payments service from the raw values)
    Spec("StripeApiSecret", "str", ""), Spec("StripeWebhookSecret", "str", ""),
    Spec("StripePriceId", "str", ""),
    Spec("StripeUnitPrice", "float", 8.0, at_least(0, strict=True), attr="stripe_unit_price"),
    Spec("StripeMinTopUp", "int", 1, at_least(1)),
    Spec("StripeApiBase", "str", "https://api.stripe.com", http_url_or_empty),
    Spec("payment_setting.amount_options", "json", [10, 20, 50, 100, 200, 500], number_list),
    # passkeys
    Spec("passkey.enabled", "bool", False, attr="passkey_enabled"),
    Spec("passkey.rp_id", "str", "", host_name_or_empty, attr="passkey.rp_id"),
    Spec("passkey.rp_display_name", "str", "", length(0, 64), attr="passkey.rp_display_name"),
    Spec("passkey.origins", "str", "", origin_list, attr="passkey.origins"),
    Spec("passkey.user_verification", "str", "preferred", one_of(*USER_VERIFICATION),
         attr="passkey.user_verification", read=read.choice(USER_VERIFICATION, "preferred")),
    Spec("passkey.attachment_preference", "str", "", one_of(*ATTACHMENTS), attr="passkey.attachment",
         read=read.choice(ATTACHMENTS, "")),
    Spec("passkey.allow_insecure_origin", "bool", False, attr="passkey.allow_insecure_origin"),
)

REGISTRY: dict[str, Spec] = {spec.key: spec for spec in SPECS}


def to_text(spec: Spec, value: Any) -> str:
    if spec.kind == "bool":
        return "true" if value else "false"
    if spec.kind == "json":
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if spec.kind == "float":
        # every digit survives (`:g` kept six: 1234567 → "1.23457e+06"); whole numbers without ".0"
        number = float(value)
        return str(int(number)) if number.is_integer() and abs(number) < 1e16 else repr(number)
    return str(value)


def parse(spec: Spec, text: str) -> Any:
    """Stored text → value; a damaged stored value falls back to the default."""
    try:
        if spec.kind == "bool":
            return text.strip().lower() == "true"
        if spec.kind == "int":
            return int(text)
        if spec.kind == "float":
            return float(text)
        if spec.kind == "json":
            return json.loads(text)
    except ValueError:
        return spec.default
    return text


def normalize(key: str, value: Any) -> str:
    """Validate a value from `PUT /api/option/` and return its stored string form."""
    spec = REGISTRY.get(key)
    if spec is None:
        raise OptionError(f"{key}: unknown option")
    try:
        typed = _coerce(spec, value)
        if spec.rule is not None:
            spec.rule(typed)
    except ValueError as exc:
        raise OptionError(f"{key}: {exc}") from None
    return to_text(spec, typed)


def _coerce(spec: Spec, value: Any) -> Any:
    if isinstance(value, bool):
        if spec.kind == "bool":
            return value
        raise ValueError("must not be a boolean")
    if spec.kind == "bool":
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise ValueError("must be true or false")
    if spec.kind == "int":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        elif isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
            value = int(value.strip())
        if not isinstance(value, int):
            raise ValueError("must be an integer")
        if not -(2**63) <= value < 2**63:  # stored values end up in BIGINT arithmetic
            raise ValueError("is out of range")
        return value
    if spec.kind == "float":
        try:
            number = float(value) if isinstance(value, int | float | str) else math.nan
        except (ValueError, OverflowError):
            number = math.nan
        if not math.isfinite(number):
            raise ValueError("must be a number")
        return number
    if spec.kind == "json":
        if not isinstance(value, str):
            raise ValueError("must be JSON text")
        try:
            return json.loads(value)
        except ValueError:
            raise ValueError("is not valid JSON") from None
    if isinstance(value, int | float):
        return str(value)
    if not isinstance(value, str):
        raise ValueError("must be a string")
    return value.strip() if spec.kind == "str" and not spec.secret else value
