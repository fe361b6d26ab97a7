"""The typed registry of options: every key, its kind, default, rule, where the code reads it and how a
person edits it — the one declaration of an option.

`normalize(key, value)` turns what `PUT /api/option/` received into the stored string or raises
`OptionError` naming the key; `parse(key, text)` turns the stored string into a Python value. A spec's
`attr` names the attribute of the typed snapshot `core.settings.Settings` that the option becomes
(`"smtp.port"`: the `port` of the composite `smtp`), and `read` how its value is read there (by default the
kind's plain conversion; the tolerant readers of core/option_values.py for JSON and lists): `Settings.of`
is derived from this table, so an option is declared once. Options without `attr` are stored and served
but read by no code.

Each option is declared inside its `Section` (the headings of the console's Settings page) with the
`label` and `hint` people see; `GET /api/option/schema` serves the sections, each option's kind, whether it
is a write-only secret and the bounds its rule tells (core/option_rules.py), and the page builds its fields
from that alone, so an option added here gets its field without a change to the page.
Keys kept only for new-api clients (GroupGroupRatio, TopupGroupRatio, AudioRatio,
AudioCompletionRatio, DefaultUseAutoGroup) are stored and returned but have no effect.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any, Literal

from core import numerals
from core import option_values as read
from core.money import BALANCE_MAX
from core.option_rules import (
    AtLeast,
    Between,
    Bounds,
    Length,
    OneOf,
    Rule,
    bounds_of,
    capabilities,
    group_ratio,
    host_name_or_empty,
    http_url_or_empty,
    json_object_text,
    nested_number_map,
    number_list,
    number_map,
    origin_list,
    positive_number_map,
    rate_limit_groups,
    status_ranges,
    string_list,
    string_map,
    token_cap_map,
)
from core.option_values import ATTACHMENTS, USER_VERIFICATION


class OptionError(ValueError):
    """The message names the key."""


Kind = Literal["str", "int", "float", "bool", "json", "text"]  # text: several lines; json: edited as text


@dataclass(frozen=True, slots=True)
class Spec:
    key: str
    kind: Kind
    default: Any
    rule: Rule | None = None
    attr: str | None = None  # the `Settings` attribute it becomes ("group.name" inside a composite)
    read: Callable[[Any], Any] | None = None  # value → attribute; None: the kind's plain conversion
    _: KW_ONLY
    label: str  # its name for people (the Settings page's label)
    hint: str = ""  # a line of help; the bounds of `rule` are told apart (`bounds`)

    @property
    def secret(self) -> bool:
        """Write-only: stored encrypted, never listed (keys ending in token, secret or key)."""
        k = self.key.lower()
        return k.endswith(("token", "secret", "key"))

    @property
    def bounds(self) -> Bounds:
        return bounds_of(self.rule)

    @property
    def negative(self) -> bool:
        """Whether a value may be below zero (its rule sets no minimum, or one below zero): only then may
        its text start with `-`."""
        minimum = self.bounds.minimum
        return minimum is None or minimum < 0


@dataclass(frozen=True, slots=True)
class Section:
    """A heading of the Settings page and the options under it, in the order shown."""

    id: str
    title: str
    intro: str
    specs: tuple[Spec, ...]


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

NO_EFFECT = "Kept for new-api's clients; no effect."
# an amount of quota: a balance made of it must stay where the quota engine computes exactly (core/money.py)
QUOTA_AMOUNT = Between(0, BALANCE_MAX)

SECTIONS: tuple[Section, ...] = (
    Section("site", "Site", "What every visitor sees, and where the site lives.", (
        Spec("SystemName", "str", "Tollway", Length(1, 64), attr="system_name", label="Site name",
             hint="Shown in the console's header and title."),
        Spec("Logo", "str", "", attr="logo", label="Logo address",
             hint=("An image shown before the site's name in the console's header: an http(s) address or "
                   "a path on this site.")),
        Spec("Footer", "str", "", attr="footer", label="Footer",
             hint=("Markdown or HTML, shown at the bottom of every console page, before the link to the "
                   "About page.")),
        Spec("Notice", "str", "", attr="notice", label="Notice",
             hint=("Markdown (or HTML), shown above every page to signed-in users; each may dismiss it "
                   "until it changes.")),
        Spec("About", "str", "", attr="about", label="About page",
             hint=("Markdown, HTML or an address, shown on the console's About page (/about), which "
                   "every footer links to.")),
        Spec("HomePageContent", "text", "", attr="home_page_content", label="Home page content"),
        Spec("DocsLink", "str", "", attr="docs_link", label="Documentation link"),
        Spec("ServerAddress", "str", "", http_url_or_empty, attr="server_address", label="Server address",
             hint="The address people reach this site at, e.g. https://example.com (no trailing /)."),
        Spec("TopUpLink", "str", "", attr="top_up_link", label="Top-up link"),
        Spec("LogConsumeEnabled", "bool", True, attr="log_consume_enabled", label="Log every model call"),
        Spec("ErrorLogEnabled", "bool", True, attr="error_log_enabled", label="Log failed model calls",
             hint="An error log for each model call of a valid API key that is refused or fails upstream; "
                  "at most 20 a minute per API key on each worker."),
        Spec("DataExportEnabled", "bool", True, attr="data_export_enabled",
             label="Collect usage data for the dashboard"),
        Spec("DataExportInterval", "int", 5, Between(1, 60), label="Usage data interval (minutes)"),
        Spec("DataExportDefaultTime", "str", "hour", OneOf(("hour", "day", "week")),
             attr="data_export_default_time", label="Usage data default period"),
        Spec("SelfUseModeEnabled", "bool", False, attr="self_use_mode_enabled", label="Self-use mode"),
        Spec("DemoSiteEnabled", "bool", False, attr="demo_site_enabled", label="Demo site"),
    )),
    Section("registration", "Registration and sign-in", "Who may create an account and how they sign in.", (
        Spec("RegisterEnabled", "bool", True, attr="register_enabled", label="Registration open"),
        Spec("PasswordLoginEnabled", "bool", True, attr="password_login_enabled",
             label="Sign-in with a password"),
        Spec("PasswordRegisterEnabled", "bool", True, attr="password_register_enabled",
             label="Registration with a password"),
        Spec("EmailVerificationEnabled", "bool", False, attr="email_verification_enabled",
             label="Verify the e-mail address at registration", hint="Needs the SMTP server (E-mail)."),
        Spec("EmailDomainRestrictionEnabled", "bool", False, attr="email_domain_restriction_enabled",
             label="Only the allowed e-mail domains"),
        Spec("EmailAliasRestrictionEnabled", "bool", False, attr="email_alias_restriction_enabled",
             label="Refuse e-mail aliases (name+tag@…)"),
        Spec("EmailDomainWhitelist", "str", EMAIL_WHITELIST, attr="email_domain_whitelist", read=read.domains,
             label="Allowed e-mail domains", hint="Comma-separated."),
        Spec("QuotaForNewUser", "int", 0, QUOTA_AMOUNT, attr="quota_for_new_user", read=read.quota_amount,
             label="Quota for a new user"),
        Spec("QuotaForInviter", "int", 0, QUOTA_AMOUNT, attr="quota_for_inviter", read=read.quota_amount,
             label="Quota for the inviter", hint="Added to the inviter's invitation rewards."),
        Spec("QuotaForInvitee", "int", 0, QUOTA_AMOUNT, attr="quota_for_invitee", read=read.quota_amount,
             label="Quota for the invitee",
             hint="Added to the starting balance, as far as it stays within the largest balance."),
    )),
    Section("quota", "Quota and pricing", "How quota is counted and shown, and what each model costs. JSON "
            "fields are checked before saving.", (
        Spec("QuotaPerUnit", "float", 500000.0, AtLeast(0, strict=True), attr="quota_per_unit",
             label="Quota per unit (one dollar)"),
        Spec("general_setting.quota_display_type", "str", "USD", OneOf(("USD", "CNY", "TOKENS", "CUSTOM")),
             attr="quota_display_type", label="Show quota as"),
        Spec("DisplayInCurrencyEnabled", "bool", True, attr="display_in_currency",
             label="Show quota in currency"),
        Spec("DisplayTokenStatEnabled", "bool", True, label="Show token statistics"),
        Spec("USDExchangeRate", "float", 7.3, AtLeast(0, strict=True), attr="usd_exchange_rate",
             label="USD exchange rate (CNY per dollar)"),
        Spec("custom_currency_symbol", "str", "¤", Length(0, 8), attr="custom_currency_symbol",
             label="Custom currency symbol"),
        Spec("custom_currency_exchange_rate", "float", 1.0, AtLeast(0, strict=True),
             attr="custom_currency_exchange_rate", label="Custom currency per dollar"),
        Spec("PreConsumedQuota", "int", 500, QUOTA_AMOUNT, attr="pre_consumed_quota", read=read.quota_amount,
             label="Quota reserved before a call"),
        Spec("QuotaRemindThreshold", "int", 1000, QUOTA_AMOUNT, label="Low-balance reminder threshold"),
        Spec("RetryTimes", "int", 2, Between(0, 10), attr="retry_times", label="Retries on another channel"),
        Spec("ModelRatio", "json", {}, number_map, attr="model_ratio", read=read.numbers,
             label="Model ratios", hint="A JSON object: model → ratio (a number ≥ 0)."),
        Spec("CompletionRatio", "json", {}, number_map, attr="completion_ratio", read=read.numbers,
             label="Completion ratios", hint="A JSON object: model → ratio."),
        Spec("CacheRatio", "json", {}, number_map, attr="cache_ratio", read=read.numbers,
             label="Cache read ratios",
             hint="A JSON object: model → price of a cached input token over an input token (default 1)."),
        Spec("CreateCacheRatio", "json", {}, number_map, attr="create_cache_ratio", read=read.numbers,
             label="Cache write ratios",
             hint="A JSON object: model → price of a token written to the cache over an input token "
                  "(default 1.25; a 1-hour write costs 1.6 times that)."),
        Spec("PreConsumedCompletionTokens", "int", 1024, Between(0, 10_000_000),
             attr="pre_consumed_completion_tokens", label="Output tokens reserved without a cap",
             hint="Reserved before a chat call whose request names no output cap."),
        Spec("claude.default_max_tokens", "json", {"default": 8192}, token_cap_map,
             attr="claude_default_max_tokens", read=read.token_caps,
             label="Claude output cap when none is asked",
             hint='A JSON object: model → tokens, with "default". Sent as max_tokens when an OpenAI-format '
                  "call without a cap is converted for a Claude (Anthropic) channel."),
        Spec("ModelPrice", "json", {}, number_map, attr="model_price", read=read.numbers,
             label="Model prices (per call)", hint="A JSON object: model → price in dollars."),
        Spec("GroupRatio", "json", {"default": 1, "vip": 1, "svip": 1}, group_ratio, attr="group_ratio",
             read=read.ratios, label="Group ratios", hint='A JSON object: group → ratio; keeps "default".'),
        Spec("UserUsableGroups", "json", {"default": "Default group", "vip": "VIP group"}, string_map,
             attr="user_usable_groups", read=read.texts, label="Groups users may choose",
             hint="A JSON object: group → description."),
        Spec("AutoGroups", "json", ["default"], string_list, attr="auto_groups", read=read.names,
             label="Groups of the auto group, in order", hint="A JSON array of group names."),
        Spec("ModelCapabilities", "json", {}, capabilities, attr="model_capabilities", read=read.capabilities,
             label="Model capabilities", hint="A JSON object: model → {capability: true|false}."),
        Spec("ModelRequestRateLimitGroup", "json", {}, rate_limit_groups, attr="rate_limit_groups",
             read=read.count_pairs, label="Rate limits by group",
             hint="A JSON object: group → [count, success_count]."),
    )),
    Section("channels", "Channels", "When a failing channel is switched off, and on again.", (
        Spec("AutomaticDisableChannelEnabled", "bool", True, attr="automatic_disable_channel_enabled",
             label="Disable a failing channel"),
        Spec("AutomaticEnableChannelEnabled", "bool", True, attr="automatic_enable_channel_enabled",
             label="Enable a channel again once its test passes"),
        Spec("ChannelDisableThreshold", "float", 5.0, AtLeast(0, strict=True),
             attr="channel_disable_threshold", label="Test time that disables a channel (seconds)"),
        Spec("AutomaticDisableStatusCodes", "str", "401,403", status_ranges,
             attr="automatic_disable_status_codes", read=read.ranges,
             label="Status codes that disable a channel", hint="Codes and ranges, e.g. 401,403,500-599."),
        Spec("AutomaticRetryStatusCodes", "str", "401,403,408,429,500-599", status_ranges,
             attr="automatic_retry_status_codes", read=read.ranges,
             label="Status codes retried on another channel", hint="Codes and ranges, e.g. 429,500-599."),
        Spec("AutomaticDisableKeywords", "text", DISABLE_KEYWORDS, attr="automatic_disable_keywords",
             read=read.keywords, label="Error texts that disable a channel", hint="One per line."),
    )),
    Section("rate-limits", "Rate limits", "Model calls per user in a window of minutes (the limits by group "
            "are under Quota and pricing).", (
        Spec("ModelRequestRateLimitEnabled", "bool", False, attr="rate_limit_enabled",
             label="Limit model calls per user"),
        Spec("ModelRequestRateLimitDurationMinutes", "int", 1, AtLeast(1), attr="rate_limit_minutes",
             label="Window (minutes)"),
        Spec("ModelRequestRateLimitCount", "int", 0, AtLeast(0), attr="rate_limit_count",
             label="Calls per window (0: no limit)"),
        Spec("ModelRequestRateLimitSuccessCount", "int", 1000, AtLeast(0), attr="rate_limit_success_count",
             label="Successful calls per window"),
    )),
    Section("email", "E-mail", "The SMTP server that sends codes and reset links.", (
        Spec("SMTPServer", "str", "", attr="smtp.server", read=read.stripped, label="SMTP server",
             hint="Empty: no mail is sent."),
        Spec("SMTPPort", "int", 587, Between(1, 65535), attr="smtp.port", label="SMTP port"),
        Spec("SMTPAccount", "str", "", attr="smtp.account", read=read.stripped, label="SMTP account"),
        Spec("SMTPFrom", "str", "", attr="smtp.from_address", read=read.stripped, label="Sender address",
             hint="Empty: the SMTP account."),
        Spec("SMTPToken", "str", "", attr="smtp.token", label="SMTP password"),
        Spec("SMTPSSLEnabled", "bool", False, attr="smtp.ssl", label="SMTP over SSL"),
    )),
    # read by the payments service from the raw values
    Section("payments", "Payments", "Online top-up through Stripe.", (
        Spec("StripeApiSecret", "str", "", label="Stripe API secret"),
        Spec("StripeWebhookSecret", "str", "", label="Stripe webhook secret"),
        Spec("StripePriceId", "str", "", label="Stripe price id"),
        Spec("StripeUnitPrice", "float", 8.0, AtLeast(0, strict=True), attr="stripe_unit_price",
             label="Price of one unit"),
        Spec("StripeMinTopUp", "int", 1, AtLeast(1), label="Least top-up"),
        Spec("StripeApiBase", "str", "https://api.stripe.com", http_url_or_empty, label="Stripe API address"),
        Spec("payment_setting.amount_options", "json", [10, 20, 50, 100, 200, 500], number_list,
             label="Amounts offered", hint="A JSON array of positive numbers."),
    )),
    Section("passkeys", "Passkeys", "Signing in with a passkey, and the relying party it is made for.", (
        Spec("passkey.enabled", "bool", False, attr="passkey_enabled", label="Passkeys enabled"),
        Spec("passkey.rp_id", "str", "", host_name_or_empty, attr="passkey.rp_id", label="Relying party id",
             hint="A host name such as example.com; empty: the server address's."),
        Spec("passkey.rp_display_name", "str", "", Length(0, 64), attr="passkey.rp_display_name",
             label="Relying party name"),
        Spec("passkey.origins", "str", "", origin_list, attr="passkey.origins", label="Accepted origins",
             hint="Comma-separated, e.g. https://example.com."),
        Spec("passkey.user_verification", "str", "preferred", OneOf(USER_VERIFICATION),
             attr="passkey.user_verification", read=read.choice(USER_VERIFICATION, "preferred"),
             label="User verification"),
        Spec("passkey.attachment_preference", "str", "", OneOf(ATTACHMENTS), attr="passkey.attachment",
             read=read.choice(ATTACHMENTS, ""), label="Authenticator attachment"),
        Spec("passkey.allow_insecure_origin", "bool", False, attr="passkey.allow_insecure_origin",
             label="Allow insecure (http) origins"),
    )),
    Section("compatibility", "Compatibility", "For new-api's clients and console.", (
        # `/api` refusals answer 200 as new-api's do
        Spec("NewApiCompatibleErrors", "bool", False, attr="new_api_compatible_errors",
             label="Answer /api refusals with 200, as new-api does"),
        Spec("HeaderNavModules", "text", HEADER_NAV_MODULES, json_object_text, attr="header_nav_modules",
             label="Header navigation modules", hint="Empty or a JSON object."),
        Spec("SidebarModulesAdmin", "text", SIDEBAR_MODULES_ADMIN, json_object_text,
             attr="sidebar_modules_admin", label="Admin sidebar modules", hint="Empty or a JSON object."),
        Spec("DefaultUseAutoGroup", "bool", False, attr="default_use_auto_group",
             label="Default to the auto group", hint=NO_EFFECT),
        Spec("GroupGroupRatio", "json", {}, nested_number_map, label="Group-to-group ratios", hint=NO_EFFECT),
        Spec("TopupGroupRatio", "json", {"default": 1, "vip": 1, "svip": 1}, positive_number_map,
             label="Top-up ratios by group", hint=NO_EFFECT),
        Spec("AudioRatio", "json", {}, number_map, label="Audio ratios", hint=NO_EFFECT),
        Spec("AudioCompletionRatio", "json", {}, number_map, label="Audio completion ratios", hint=NO_EFFECT),
    )),
)

SPECS: tuple[Spec, ...] = tuple(spec for section in SECTIONS for spec in section.specs)
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
    """Stored text → value; a damaged stored value (numbers: anything but ASCII digits, core/numerals.py)
    falls back to the default."""
    try:
        if spec.kind == "bool":
            return text.strip().lower() == "true"
        if spec.kind == "int":
            return numerals.whole(text, negative=spec.negative)
        if spec.kind == "float":
            return numerals.decimal(text, negative=spec.negative)
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
        elif isinstance(value, str):  # ASCII digits only: not `١٦`, `1_6`, `+16` or ` 16`
            try:
                value = numerals.whole(value, negative=spec.negative)
            except ValueError as exc:
                raise ValueError(f"must be an integer: {exc}") from None
        if not isinstance(value, int):
            raise ValueError("must be an integer")
        if not -(2**63) <= value < 2**63:  # stored values end up in BIGINT arithmetic
            raise ValueError("is out of range")
        return value
    if spec.kind == "float":
        if isinstance(value, str):
            try:
                return numerals.decimal(value, negative=spec.negative)
            except ValueError as exc:
                raise ValueError(f"must be a number: {exc}") from None
        try:
            number = float(value) if isinstance(value, int | float) else math.nan
        except OverflowError:
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
