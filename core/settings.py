"""The option values the code reads, as one typed, frozen snapshot.

Options are stored as text and typed by their registry (`server/system/option_registry.py`); a JSON option
is only known to be JSON, not to have the right shape (a value written to the database by hand may not).
`Settings.of(values)` is built once per reload (`Options.reload`) from those typed values: it checks every
shape here, once, dropping what is malformed (an entry of the wrong type reads as absent, a damaged list of
status codes as empty), and pre-computes what readers would otherwise redo on every call (status-code
ranges, lower-cased disable keywords). Readers take attributes — `settings.retry_times`,
`settings.group_ratio` — and never re-check a type. The generic option routes keep reading the raw values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from core.relying_party import PasskeyPolicy

StatusRanges = tuple[tuple[int, int], ...]
USER_VERIFICATION = ("required", "preferred", "discouraged")
ATTACHMENTS = ("", "platform", "cross-platform")


def parse_status_ranges(text: str) -> StatusRanges:
    """`"401,403,500-599"` → ((401, 401), (403, 403), (500, 599)); codes must be in 100–599, else
    ValueError naming the part."""
    ranges = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo_s, _, hi_s = part.partition("-")
        try:
            lo, hi = int(lo_s), int(hi_s or lo_s)
        except ValueError:
            raise ValueError(f"{part!r} is not a status code or range") from None
        if not (100 <= lo <= hi <= 599):
            raise ValueError(f"{part!r} must be within 100–599")
        ranges.append((lo, hi))
    return tuple(ranges)


def status_in(status: int, ranges: StatusRanges) -> bool:
    return any(lo <= status <= hi for lo, hi in ranges)


# ---- tolerant readers of the JSON options (run once per reload) ----------------------------------------

def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _numbers(value: Any) -> Mapping[str, float]:
    """`{name: number}`; entries whose value is not a number are dropped."""
    if not isinstance(value, dict):
        return MappingProxyType({})
    return MappingProxyType({str(k): float(v) for k, v in value.items() if _is_number(v)})


def _ratios(value: Any) -> Mapping[str, float]:
    """`{group: ratio}`: every group listed counts as existing; a ratio that is not a number reads as 1."""
    if not isinstance(value, dict):
        return MappingProxyType({})
    return MappingProxyType({str(k): float(v) if _is_number(v) else 1.0 for k, v in value.items()})


def _texts(value: Any) -> Mapping[str, str]:
    """`{name: text}`: every name listed counts; a value that is not text reads as ""."""
    if not isinstance(value, dict):
        return MappingProxyType({})
    return MappingProxyType({str(k): v if isinstance(v, str) else "" for k, v in value.items()})


def _names(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _capabilities(value: Any) -> Mapping[str, Mapping[str, bool]]:
    if not isinstance(value, dict):
        return MappingProxyType({})
    return MappingProxyType({
        str(model): MappingProxyType({str(k): b for k, b in caps.items() if isinstance(b, bool)})
        for model, caps in value.items() if isinstance(caps, dict)})


def _count_pairs(value: Any) -> Mapping[str, tuple[int, int]]:
    """`{group: [total, success]}` of the per-user rate limit; malformed entries are dropped."""
    if not isinstance(value, dict):
        return MappingProxyType({})
    out: dict[str, tuple[int, int]] = {}
    for group, pair in value.items():
        if (isinstance(pair, list) and len(pair) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in pair)):
            out[str(group)] = (max(0, pair[0]), max(0, pair[1]))
    return MappingProxyType(out)


def _ranges(text: Any) -> StatusRanges:
    try:
        return parse_status_ranges(str(text))
    except ValueError:
        return ()


def _choice(value: Any, allowed: tuple[str, ...], default: str) -> str:
    """One of `allowed`, else `default` (a value written to the database by hand)."""
    return value if value in allowed else default


def _keywords(text: Any) -> tuple[str, ...]:
    return tuple(w.strip().lower() for w in str(text).splitlines() if w.strip())


@dataclass(frozen=True, slots=True)
class SmtpSettings:
    """How e-mail is sent (`SMTP*` options); the token never appears in a repr."""

    server: str
    port: int
    account: str
    token: str = field(repr=False)
    sender: str  # `SMTPFrom`, else `SMTPAccount`
    ssl: bool

    @property
    def configured(self) -> bool:
        return bool(self.server and self.sender)


def _domains(text: Any) -> frozenset[str]:
    return frozenset(d.strip().lower() for d in str(text).split(",") if d.strip())


@dataclass(frozen=True, slots=True, eq=False)
class Settings:
    # the site, as `GET /api/status` shows it
    system_name: str
    logo: str
    footer: str
    docs_link: str
    server_address: str
    top_up_link: str
    quota_display_type: str
    display_in_currency: bool
    usd_exchange_rate: float
    custom_currency_symbol: str
    custom_currency_exchange_rate: float
    email_verification_enabled: bool
    passkey_enabled: bool
    passkey: PasskeyPolicy
    demo_site_enabled: bool
    default_use_auto_group: bool
    data_export_enabled: bool
    data_export_default_time: str
    notice: str
    about: str
    home_page_content: str
    header_nav_modules: str  # new-api's console layout (JSON text), served as is
    sidebar_modules_admin: str
    stripe_unit_price: float
    new_api_compatible_errors: bool  # `/api` refusals answer 200 + success false (server/errors.py)
    # accounts
    register_enabled: bool
    password_register_enabled: bool
    password_login_enabled: bool
    quota_for_new_user: int
    quota_for_invitee: int
    quota_for_inviter: int
    # quota and prices
    quota_per_unit: float
    pre_consumed_quota: int
    self_use_mode_enabled: bool
    model_ratio: Mapping[str, float]
    completion_ratio: Mapping[str, float]
    model_price: Mapping[str, float]
    model_capabilities: Mapping[str, Mapping[str, bool]]
    # groups
    group_ratio: Mapping[str, float]
    user_usable_groups: Mapping[str, str]  # group → description
    auto_groups: tuple[str, ...]
    # model calls: retries and automatic disable
    retry_times: int
    log_consume_enabled: bool
    automatic_disable_channel_enabled: bool
    automatic_enable_channel_enabled: bool  # a channel test that passes brings a status-3 channel back
    channel_disable_threshold: float  # seconds: a channel test slower than this fails
    automatic_retry_status_codes: StatusRanges
    automatic_disable_status_codes: StatusRanges
    automatic_disable_keywords: tuple[str, ...]  # stripped, lower-cased, none empty
    # the per-user model request limit
    rate_limit_enabled: bool
    rate_limit_minutes: int
    rate_limit_count: int
    rate_limit_success_count: int
    rate_limit_groups: Mapping[str, tuple[int, int]]  # group → (total, success)
    # e-mail: sending, and which addresses the code and reset routes accept
    smtp: SmtpSettings
    email_domain_restriction_enabled: bool
    email_domain_whitelist: frozenset[str]  # lower-cased domains
    email_alias_restriction_enabled: bool

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Settings:
        """From the registry-typed option values (every key present; scalars already of their kind)."""
        v = values
        return cls(
            system_name=str(v["SystemName"]), logo=str(v["Logo"]), footer=str(v["Footer"]),
            docs_link=str(v["DocsLink"]), server_address=str(v["ServerAddress"]),
            top_up_link=str(v["TopUpLink"]),
            quota_display_type=str(v["general_setting.quota_display_type"]),
            display_in_currency=bool(v["DisplayInCurrencyEnabled"]),
            usd_exchange_rate=float(v["USDExchangeRate"]),
            custom_currency_symbol=str(v["custom_currency_symbol"]),
            custom_currency_exchange_rate=float(v["custom_currency_exchange_rate"]),
            email_verification_enabled=bool(v["EmailVerificationEnabled"]),
            passkey_enabled=bool(v["passkey.enabled"]),
            passkey=PasskeyPolicy(
                rp_id=str(v["passkey.rp_id"]), rp_display_name=str(v["passkey.rp_display_name"]),
                origins=str(v["passkey.origins"]),
                user_verification=_choice(v["passkey.user_verification"], USER_VERIFICATION, "preferred"),
                attachment=_choice(v["passkey.attachment_preference"], ATTACHMENTS, ""),
                allow_insecure_origin=bool(v["passkey.allow_insecure_origin"])),
            demo_site_enabled=bool(v["DemoSiteEnabled"]),
            default_use_auto_group=bool(v["DefaultUseAutoGroup"]),
            data_export_enabled=bool(v["DataExportEnabled"]),
            data_export_default_time=str(v["DataExportDefaultTime"]),
            notice=str(v["Notice"]), about=str(v["About"]), home_page_content=str(v["HomePageContent"]),
            header_nav_modules=str(v["HeaderNavModules"]),
            sidebar_modules_admin=str(v["SidebarModulesAdmin"]),
            stripe_unit_price=float(v["StripeUnitPrice"]),
            new_api_compatible_errors=bool(v["NewApiCompatibleErrors"]),
            register_enabled=bool(v["RegisterEnabled"]),
            password_register_enabled=bool(v["PasswordRegisterEnabled"]),
            password_login_enabled=bool(v["PasswordLoginEnabled"]),
            quota_for_new_user=int(v["QuotaForNewUser"]), quota_for_invitee=int(v["QuotaForInvitee"]),
            quota_for_inviter=int(v["QuotaForInviter"]),
            quota_per_unit=float(v["QuotaPerUnit"]), pre_consumed_quota=int(v["PreConsumedQuota"]),
            self_use_mode_enabled=bool(v["SelfUseModeEnabled"]),
            model_ratio=_numbers(v["ModelRatio"]), completion_ratio=_numbers(v["CompletionRatio"]),
            model_price=_numbers(v["ModelPrice"]), model_capabilities=_capabilities(v["ModelCapabilities"]),
            group_ratio=_ratios(v["GroupRatio"]), user_usable_groups=_texts(v["UserUsableGroups"]),
            auto_groups=_names(v["AutoGroups"]),
            retry_times=int(v["RetryTimes"]), log_consume_enabled=bool(v["LogConsumeEnabled"]),
            automatic_disable_channel_enabled=bool(v["AutomaticDisableChannelEnabled"]),
            automatic_enable_channel_enabled=bool(v["AutomaticEnableChannelEnabled"]),
            channel_disable_threshold=float(v["ChannelDisableThreshold"]),
            automatic_retry_status_codes=_ranges(v["AutomaticRetryStatusCodes"]),
            automatic_disable_status_codes=_ranges(v["AutomaticDisableStatusCodes"]),
            automatic_disable_keywords=_keywords(v["AutomaticDisableKeywords"]),
            rate_limit_enabled=bool(v["ModelRequestRateLimitEnabled"]),
            rate_limit_minutes=int(v["ModelRequestRateLimitDurationMinutes"]),
            rate_limit_count=int(v["ModelRequestRateLimitCount"]),
            rate_limit_success_count=int(v["ModelRequestRateLimitSuccessCount"]),
            rate_limit_groups=_count_pairs(v["ModelRequestRateLimitGroup"]),
            smtp=SmtpSettings(server=str(v["SMTPServer"]).strip(), port=int(v["SMTPPort"]),
                              account=str(v["SMTPAccount"]).strip(), token=str(v["SMTPToken"]),
                              sender=str(v["SMTPFrom"]).strip() or str(v["SMTPAccount"]).strip(),
                              ssl=bool(v["SMTPSSLEnabled"])),
            email_domain_restriction_enabled=bool(v["EmailDomainRestrictionEnabled"]),
            email_domain_whitelist=_domains(v["EmailDomainWhitelist"]),
            email_alias_restriction_enabled=bool(v["EmailAliasRestrictionEnabled"]),
        )
