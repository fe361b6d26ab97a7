"""Request and reply schemas of `/api/status`, `/api/setup` and `/api/option/`."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, Field

from server.web.schema import Bool, Schema, Str, TextRule, Trimmed, problem


def _scalar(value: Any) -> Any:
    if not isinstance(value, str | int | float | bool):
        raise problem("must be a string, number or boolean")
    return value


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


class SetupRequest(Schema):
    username: Trimmed
    password: Str
    confirmPassword: Str = Field(description="the password again")
    SelfUseModeEnabled: Bool = False
    DemoSiteEnabled: Bool = False


class OptionUpdate(Schema):
    model_config = ConfigDict(json_schema_extra={"required": ["key", "value"]})

    key: Annotated[str, TextRule(min_len=1)]
    # Absent is refused with the same message as a wrong type (`validate_default`); the schema says required.
    value: Annotated[str | int | float | bool, BeforeValidator(_scalar)] = Field(
        None, validate_default=True, description="checked against the option's kind and rule",
        json_schema_extra=_no_default)


class Option(Schema):
    key: str
    value: str = Field(description="the stored text (JSON for structured options)")


class SetupState(Schema):
    status: bool = Field(description="true once the system is set up")
    root_init: bool
    database_type: str


class Status(Schema):
    """What the UI needs before anyone logs in."""

    version: str
    start_time: int
    system_name: str
    logo: str
    footer_html: str
    docs_link: str
    server_address: str
    top_up_link: str
    setup: bool
    quota_per_unit: float
    display_in_currency: bool
    quota_display_type: str
    usd_exchange_rate: float
    custom_currency_symbol: str
    custom_currency_exchange_rate: float
    email_verification: bool
    passkey_login: bool = Field(description="passkey login is on")
    passkey_display_name: str
    passkey_rp_id: str = Field(description="the relying party id passkeys are made for here")
    passkey_origins: str = Field(description="the accepted origins, comma-separated")
    passkey_allow_insecure: bool
    passkey_user_verification: str = Field(description="required, preferred or discouraged")
    passkey_attachment: str = Field(description='"", platform or cross-platform')
    turnstile_check: bool
    turnstile_site_key: str
    self_use_mode_enabled: bool
    demo_site_enabled: bool
    default_use_auto_group: bool
    enable_data_export: bool
    data_export_default_time: str
    stripe_unit_price: float
    # what new-api's status has and Tollway does not: off, empty or 0 (docs/API.md#coming-from-new-api)
    github_oauth: bool
    github_client_id: str
    discord_oauth: bool
    discord_client_id: str
    linuxdo_oauth: bool
    linuxdo_client_id: str
    linuxdo_minimum_trust_level: int
    telegram_oauth: bool
    telegram_bot_name: str
    wechat_login: bool
    wechat_qrcode: str
    oidc_enabled: bool
    oidc_client_id: str
    oidc_authorization_endpoint: str
    chats: list[dict[str, str]] = Field(description="chat links: always empty")
    enable_drawing: bool
    enable_task: bool
    mj_notify_enabled: bool
    enable_batch_update: bool = Field(description="true: quota and usage reach the database in batches")
    default_collapse_sidebar: bool
    api_info_enabled: bool
    uptime_kuma_enabled: bool
    announcements_enabled: bool
    faq_enabled: bool
    HeaderNavModules: str = Field(description="the option: new-api's console header (JSON text)")
    SidebarModulesAdmin: str = Field(description="the option: new-api's console sidebar (JSON text)")
    user_agreement_enabled: bool
    privacy_policy_enabled: bool
    checkin_enabled: bool
    price: float = Field(description="EPay's price per unit: 0, there is no EPay")


class PrefillGroupQuery(Schema):
    type: Annotated[str, TextRule(max_len=32)] = Field("", description="model, tag or endpoint; empty: all")


class PrefillGroup(Schema):
    """A saved list of models, tags or endpoints new-api's console offers when editing a channel; Tollway
    keeps none."""

    id: int
    name: str
    type: str
    items: list[str]
    description: str
    created_time: int
    updated_time: int


class OAuthBinding(Schema):
    """A sign-in identity at another provider; Tollway has no other provider, so none exists."""

    provider_id: int
    provider_name: str
    provider_slug: str
    provider_icon: str
    provider_user_id: str


class UptimeMonitor(Schema):
    name: str
    uptime: float = Field(description="percent of the last 24 hours")
    status: int = Field(description="0 down, 1 up, 2 paused, 3 pending")
    group: str


class UptimeGroup(Schema):
    """A group of uptime monitors new-api's dashboard shows (from Uptime Kuma); Tollway has none."""

    categoryName: str
    monitors: list[UptimeMonitor]


class SubscriptionPlanItem(Schema):
    """A subscription plan a user may buy; Tollway sells none (top-up only)."""

    plan: dict[str, Any] = Field(description="the plan (id, title, price_amount, currency, duration, …)")


class SubscriptionSelf(Schema):
    """Your subscriptions: Tollway has none, so the balance pays for everything."""

    billing_preference: str = Field(description="always wallet_only: calls are paid from the balance")
    subscriptions: list[dict[str, Any]] = Field(description="active subscriptions: always empty")
    all_subscriptions: list[dict[str, Any]] = Field(description="every subscription: always empty")


class CustomOAuthProvider(Schema):
    """A sign-in provider root configured by hand in new-api; Tollway signs in with a password only."""

    id: int
    name: str
    slug: str
    enabled: bool
    client_id: str
