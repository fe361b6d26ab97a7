"""The option values the code reads, as one typed, frozen snapshot, derived from the option registry.

Options are stored as text and typed by their registry (core/option_registry.py), where each option also
names the attribute it becomes here (`attr`) and how it is read (`read`: the tolerant readers of
core/option_values.py, which drop what is malformed). `Settings.of(values)` is built once per reload
(`Options.reload`) by walking that table, so adding an option the code reads is one line there plus its typed
attribute below (a test checks that the two agree). Readers take attributes — `settings.retry_times`,
`settings.group_ratio` — and never re-check a type. The generic option routes keep reading the raw values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.option_registry import SPECS
from core.option_values import StatusRanges
from core.relying_party import PasskeyPolicy


@dataclass(frozen=True, slots=True)
class SmtpSettings:
    """How e-mail is sent (`SMTP*` options); the token never appears in a repr."""

    server: str
    port: int
    account: str
    token: str = field(repr=False)
    from_address: str  # `SMTPFrom`
    ssl: bool

    @property
    def sender(self) -> str:
        """The envelope and header sender: `SMTPFrom`, else `SMTPAccount`."""
        return self.from_address or self.account

    @property
    def configured(self) -> bool:
        return bool(self.server and self.sender)


# the composite attributes of `Settings`, each built from the options whose `attr` is "<name>.<field>"
COMPOSITES: dict[str, Callable[..., Any]] = {"smtp": SmtpSettings, "passkey": PasskeyPolicy}
_PLAIN: dict[str, Callable[[Any], Any]] = {"str": str, "text": str, "int": int, "float": float, "bool": bool,
                                           "json": lambda value: value}

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
    cache_ratio: Mapping[str, float]
    create_cache_ratio: Mapping[str, float]
    pre_consumed_completion_tokens: int
    claude_default_max_tokens: Mapping[str, int]
    model_price: Mapping[str, float]
    model_capabilities: Mapping[str, Mapping[str, bool]]
    # groups
    group_ratio: Mapping[str, float]
    user_usable_groups: Mapping[str, str]  # group → description
    auto_groups: tuple[str, ...]
    # model calls: retries and automatic disable
    retry_times: int
    log_consume_enabled: bool
    error_log_enabled: bool  # an error log for a failed call of a known key (server/relay/failures.py)
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
        top: dict[str, Any] = {}
        parts: dict[str, dict[str, Any]] = {name: {} for name in COMPOSITES}
        for spec in SPECS:
            if spec.attr is None:
                continue
            value = (spec.read or _PLAIN[spec.kind])(values[spec.key])
            group, _, name = spec.attr.rpartition(".")
            (parts[group] if group else top)[name] = value
        return cls(**top, **{name: build(**parts[name]) for name, build in COMPOSITES.items()})
