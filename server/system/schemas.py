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
