"""Request and reply schemas of `/api/status`, `/api/setup`, `/api/option/` and `/api/option/schema`."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, Field

from core.option_registry import Kind, Section, Spec
from core.relying_party import RelyingParty
from core.settings import Settings
from server import __version__
from server.web.schema import Bool, Reply, Schema, Str, TextRule, Trimmed, problem


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


class Option(Reply):
    """One option and what is stored for it."""

    key: str = Field(description="the option's name, as core/option_registry.py declares it")
    value: str = Field(description="the stored text (JSON for structured options)")

    @classmethod
    def of(cls, key: str, value: str) -> Option:
        return cls(key=key, value=value)


class OptionField(Reply):
    """How one option is edited, as core/option_registry.py declares it."""

    key: str
    kind: Kind = Field(description="str (one line), text (several lines), int, float, bool, json (as text)")
    label: str = Field(description="its name for people")
    hint: str = Field(description="a line of help; the bounds below are told apart")
    secret: bool = Field(description="write-only: GET /api/option/ never lists it; send it only to change it")
    choices: list[str] | None = Field(description="the only values it takes; null: any value of its kind")
    minimum: float | None = Field(description="the least number it takes")
    exclusive_minimum: bool = Field(description="true: the minimum itself is refused")
    maximum: float | None = Field(description="the greatest number it takes")
    min_length: int | None = Field(description="the fewest characters it takes")
    max_length: int | None = Field(description="the most characters it takes")

    @classmethod
    def of(cls, spec: Spec) -> OptionField:
        b = spec.bounds
        return cls(key=spec.key, kind=spec.kind, label=spec.label, hint=spec.hint, secret=spec.secret,
                   choices=None if b.choices is None else list(b.choices),
                   minimum=None if b.minimum is None else float(b.minimum),
                   exclusive_minimum=b.exclusive_minimum,
                   maximum=None if b.maximum is None else float(b.maximum),
                   min_length=b.min_length, max_length=b.max_length)


class OptionSection(Reply):
    """A section of the options (a heading of the console's Settings page) and its options, in order."""

    id: str
    title: str
    intro: str
    options: list[OptionField]

    @classmethod
    def of(cls, section: Section) -> OptionSection:
        return cls(id=section.id, title=section.title, intro=section.intro,
                   options=[OptionField.of(spec) for spec in section.specs])


class SetupState(Reply):
    status: bool = Field(description="true once the system is set up")
    root_init: bool
    database_type: str

    @classmethod
    def of(cls, *, done: bool, root_exists: bool = False, database_kind: str = "") -> SetupState:
        """Once set up, nothing more is told (`root_init` false, no database kind)."""
        if done:
            return cls(status=True, root_init=False, database_type="")
        return cls(status=False, root_init=root_exists, database_type=database_kind)


class Status(Reply):
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
    turnstile_check: bool = False
    turnstile_site_key: str = ""
    self_use_mode_enabled: bool
    demo_site_enabled: bool
    default_use_auto_group: bool
    enable_data_export: bool
    data_export_default_time: str
    stripe_unit_price: float
    # The keys of new-api's `/api/status` (controller/misc.go GetStatus) for what Tollway does not have:
    # sign-in with another provider, chat links, drawing and async tasks, console panels, check-in, legal
    # pages, EPay. Off, empty or 0, never missing: the new-api console reads each of them
    # (docs/api/options.md#coming-from-new-api).
    github_oauth: bool = False
    github_client_id: str = ""
    discord_oauth: bool = False
    discord_client_id: str = ""
    linuxdo_oauth: bool = False
    linuxdo_client_id: str = ""
    linuxdo_minimum_trust_level: int = 0
    telegram_oauth: bool = False
    telegram_bot_name: str = ""
    wechat_login: bool = False
    wechat_qrcode: str = ""
    oidc_enabled: bool = False
    oidc_client_id: str = ""
    oidc_authorization_endpoint: str = ""
    # the console stores JSON.stringify(chats) and parses it on every page
    chats: list[dict[str, str]] = Field(default_factory=list, description="chat links: always empty")
    enable_drawing: bool = False
    enable_task: bool = False
    mj_notify_enabled: bool = False
    enable_batch_update: bool = Field(default=True,
                                      description="true: quota and usage reach the database in batches")
    default_collapse_sidebar: bool = False
    api_info_enabled: bool = False
    uptime_kuma_enabled: bool = False
    announcements_enabled: bool = False
    faq_enabled: bool = False
    HeaderNavModules: str = Field(description="the option: new-api's console header (JSON text)")
    SidebarModulesAdmin: str = Field(description="the option: new-api's console sidebar (JSON text)")
    user_agreement_enabled: bool = False
    privacy_policy_enabled: bool = False
    checkin_enabled: bool = False
    price: float = Field(default=0.0, description="EPay's price per unit: 0, there is no EPay")

    @classmethod
    def of(cls, s: Settings, rp: RelyingParty, *, setup: bool, start_time: int) -> Status:
        """The options' snapshot `s`, with the passkey relying party `rp` as resolved for the request."""
        return cls(
            version=__version__, start_time=start_time, system_name=s.system_name, logo=s.logo,
            footer_html=s.footer, docs_link=s.docs_link, server_address=s.server_address,
            top_up_link=s.top_up_link, setup=setup, quota_per_unit=s.quota_per_unit,
            display_in_currency=s.display_in_currency, quota_display_type=s.quota_display_type,
            usd_exchange_rate=s.usd_exchange_rate, custom_currency_symbol=s.custom_currency_symbol,
            custom_currency_exchange_rate=s.custom_currency_exchange_rate,
            email_verification=s.email_verification_enabled, passkey_login=s.passkey_enabled,
            passkey_display_name=rp.name, passkey_rp_id=rp.rp_id, passkey_origins=",".join(rp.origins),
            passkey_allow_insecure=s.passkey.allow_insecure_origin,
            passkey_user_verification=s.passkey.user_verification, passkey_attachment=s.passkey.attachment,
            self_use_mode_enabled=s.self_use_mode_enabled, demo_site_enabled=s.demo_site_enabled,
            default_use_auto_group=s.default_use_auto_group, enable_data_export=s.data_export_enabled,
            data_export_default_time=s.data_export_default_time, stripe_unit_price=s.stripe_unit_price,
            HeaderNavModules=s.header_nav_modules, SidebarModulesAdmin=s.sidebar_modules_admin,
        )


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


WALLET_ONLY = "wallet_only"  # new-api's billing preference for "the balance pays, never a subscription"


class SubscriptionSelf(Reply):
    """Your subscriptions: Tollway has none, so the balance pays for everything."""

    billing_preference: str = Field(description="always wallet_only: calls are paid from the balance")
    subscriptions: list[dict[str, Any]] = Field(description="active subscriptions: always empty")
    all_subscriptions: list[dict[str, Any]] = Field(description="every subscription: always empty")

    @classmethod
    def of(cls) -> SubscriptionSelf:
        """The only answer: no subscription, the balance pays."""
        return cls(billing_preference=WALLET_ONLY, subscriptions=[], all_subscriptions=[])


class CustomOAuthProvider(Schema):
    """A sign-in provider root configured by hand in new-api; Tollway signs in with a password only."""

    id: int
    name: str
    slug: str
    enabled: bool
    client_id: str
