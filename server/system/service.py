"""Status, initial setup and options: the rules behind `server.system.routes`."""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import IntegrityError

from core.enums import LogType, UserStatus
from core.identity import Role
from core.option_registry import OptionError
from core.relying_party import RequestSite, resolve
from models.db import Database
from models.logs import LogRepository
from models.system import OptionRepository, SetupRepository
from models.tables import User
from models.users import UserRepository
from server import __version__
from server.clock import Clock
from server.components.options import Options
from server.components.user_rules import check_password, check_username, fresh_aff_code
from server.crypto import Passwords
from server.errors import BadRequest, Conflict

ROOT_INITIAL_QUOTA = 100_000_000

NEW_API_ABSENT_FEATURES: dict[str, Any] = {
    # The keys of new-api's `/api/status` (controller/misc.go GetStatus) for what Tollway does not have:
    # sign-in with another provider, chat links, drawing and async tasks, console panels, check-in, legal
    # pages, EPay. Off, empty or 0, never missing: the new-api console reads each of them.
    "github_oauth": False, "github_client_id": "",
    "discord_oauth": False, "discord_client_id": "",
    "linuxdo_oauth": False, "linuxdo_client_id": "", "linuxdo_minimum_trust_level": 0,
    "telegram_oauth": False, "telegram_bot_name": "",
    "wechat_login": False, "wechat_qrcode": "",
    "oidc_enabled": False, "oidc_client_id": "", "oidc_authorization_endpoint": "",
    "chats": [],  # chat links; the console stores JSON.stringify(chats) and parses it on every page
    "enable_drawing": False, "enable_task": False, "mj_notify_enabled": False,
    "enable_batch_update": True,  # quota and usage reach SQL in batches (docs/ARCHITECTURE.md)
    "default_collapse_sidebar": False,
    "api_info_enabled": False, "uptime_kuma_enabled": False, "announcements_enabled": False,
    "faq_enabled": False,
    "user_agreement_enabled": False, "privacy_policy_enabled": False, "checkin_enabled": False,
    "price": 0.0,  # EPay's price per unit: no EPay
}


class SystemService:
    """Status, setup and options, with exactly the components they use."""

    def __init__(self, *, db: Database, options: Options, passwords: Passwords, clock: Clock,
                 database_kind: str, started_at: int) -> None:
        self.db = db
        self.options = options
        self.passwords = passwords
        self.clock = clock
        self.database_kind = database_kind
        self.started_at = started_at
        self.setup_done = False  # this worker's memo: once true, never reverts

    async def is_set_up(self) -> bool:
        if self.setup_done:
            return True
        async with self.db.transaction() as tx:
            done = await SetupRepository(tx).done() or await UserRepository(tx).root_exists()
        if done:
            self.setup_done = True
        return done

    def status(self, setup_done: bool, site: RequestSite) -> dict[str, Any]:
        s = self.options.settings
        rp = resolve(s.passkey, s.server_address, s.system_name, site)
        return {
            "version": __version__, "start_time": self.started_at,
            "system_name": s.system_name, "logo": s.logo, "footer_html": s.footer,
            "docs_link": s.docs_link, "server_address": s.server_address, "top_up_link": s.top_up_link,
            "setup": setup_done,
            "quota_per_unit": s.quota_per_unit, "display_in_currency": s.display_in_currency,
            "quota_display_type": s.quota_display_type,
            "usd_exchange_rate": s.usd_exchange_rate, "custom_currency_symbol": s.custom_currency_symbol,
            "custom_currency_exchange_rate": s.custom_currency_exchange_rate,
            "email_verification": s.email_verification_enabled,
            "passkey_login": s.passkey_enabled, "passkey_display_name": rp.name,
            "passkey_rp_id": rp.rp_id, "passkey_origins": ",".join(rp.origins),
            "passkey_allow_insecure": s.passkey.allow_insecure_origin,
            "passkey_user_verification": s.passkey.user_verification,
            "passkey_attachment": s.passkey.attachment,
            "turnstile_check": False, "turnstile_site_key": "",
            "self_use_mode_enabled": s.self_use_mode_enabled, "demo_site_enabled": s.demo_site_enabled,
            "default_use_auto_group": s.default_use_auto_group, "enable_data_export": s.data_export_enabled,
            "data_export_default_time": s.data_export_default_time,
            "stripe_unit_price": s.stripe_unit_price,
            "HeaderNavModules": s.header_nav_modules, "SidebarModulesAdmin": s.sidebar_modules_admin,
            **NEW_API_ABSENT_FEATURES,
        }

    def notice(self) -> str:
        return self.options.settings.notice

    def about(self) -> str:
        return self.options.settings.about

    def home_page_content(self) -> str:
        return self.options.settings.home_page_content

    async def setup_state(self) -> dict[str, Any]:
        if await self.is_set_up():
            return {"status": True, "root_init": False, "database_type": ""}
        async with self.db.transaction() as tx:
            root = await UserRepository(tx).root_exists()
        return {"status": False, "root_init": root, "database_type": self.database_kind}

    async def run_setup(self, username: str, password: str, confirm: str, self_use: bool,
                        demo: bool) -> None:
        """Create root and the two options in one transaction; concurrent calls collide on setups.id = 1."""
        username = check_username(username)
        check_password(password)
        if confirm != password:
            raise BadRequest("confirmPassword: does not match password")
        if await self.is_set_up():
            raise Conflict("the system is already set up")
        hashed = await self.passwords.hash(password)
        now = self.clock.now_s()
        try:
            async with self.db.transaction() as tx:
                await SetupRepository(tx).insert(__version__, now)
                users = UserRepository(tx)
                if await users.root_exists():
                    raise Conflict("the system is already set up")
                await users.add(User(
                    username=username, password=hashed, display_name="Root User", role=Role.ROOT,
                    status=UserStatus.ENABLED, group="default", quota=ROOT_INITIAL_QUOTA,
                    aff_code=await fresh_aff_code(users),
                    created_at=now, email="", setting="", remark="", stripe_customer="",
                ))
                options = OptionRepository(tx)
                await options.put("SelfUseModeEnabled", "true" if self_use else "false")
                await options.put("DemoSiteEnabled", "true" if demo else "false")
        except IntegrityError:
            raise Conflict("the system is already set up") from None
        await self.options.changed()

    async def update_option(self, actor_id: int, actor_name: str, key: str, value: Any) -> None:
        """Validate and store; a system log (type 4) names the key and the admin, never the value."""
        try:
            await self.options.put(key, value)
        except OptionError as exc:
            raise BadRequest(str(exc)) from None
        async with self.db.transaction() as tx:
            await LogRepository(tx).add(type=LogType.SYSTEM, user_id=actor_id, username=actor_name,
                                        content=f"option {key} updated by {actor_name}",
                                        created_at=self.clock.now_s())

    def visible_options(self) -> list[dict[str, str]]:
        """Every option with its stored value, except the secrets."""
        return self.options.visible()
