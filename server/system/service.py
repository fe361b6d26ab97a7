"""Status, initial setup and options: the rules behind `server.system.routes`."""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import IntegrityError

from core.enums import LogType, UserStatus
from core.identity import Role
from models.logs import LogRepository
from models.system import OptionRepository, SetupRepository
from models.tables import User
from models.users import UserRepository
from server import __version__
from server.accounts.rules import check_password, check_username, fresh_aff_code
from server.context import State
from server.errors import BadRequest, Conflict
from server.system.option_registry import OptionError

ROOT_INITIAL_QUOTA = 100_000_000


async def is_set_up(state: State) -> bool:
    if state.setup_done:
        return True
    async with state.db.transaction() as tx:
        done = await SetupRepository(tx).done() or await UserRepository(tx).root_exists()
    if done:
        state.setup_done = True
    return done


def status(state: State, setup_done: bool) -> dict[str, Any]:
    s = state.options.settings
    return {
        "version": __version__, "start_time": state.started_at,
        "system_name": s.system_name, "logo": s.logo, "footer_html": s.footer,
        "docs_link": s.docs_link, "server_address": s.server_address, "top_up_link": s.top_up_link,
        "setup": setup_done,
        "quota_per_unit": s.quota_per_unit, "display_in_currency": s.display_in_currency,
        "quota_display_type": s.quota_display_type,
        "usd_exchange_rate": s.usd_exchange_rate, "custom_currency_symbol": s.custom_currency_symbol,
        "custom_currency_exchange_rate": s.custom_currency_exchange_rate,
        "email_verification": s.email_verification_enabled,
        "passkey_login": s.passkey_enabled,
        "turnstile_check": False, "turnstile_site_key": "",
        "self_use_mode_enabled": s.self_use_mode_enabled, "demo_site_enabled": s.demo_site_enabled,
        "default_use_auto_group": s.default_use_auto_group, "enable_data_export": s.data_export_enabled,
        "data_export_default_time": s.data_export_default_time,
    }


async def setup_state(state: State) -> dict[str, Any]:
    if await is_set_up(state):
        return {"status": True, "root_init": False, "database_type": ""}
    async with state.db.transaction() as tx:
        root = await UserRepository(tx).root_exists()
    return {"status": False, "root_init": root, "database_type": state.config.database_kind}


async def run_setup(state: State, username: str, password: str, confirm: str, self_use: bool,
                    demo: bool) -> None:
    """Create root and the two options in one transaction; concurrent calls collide on setups.id = 1."""
    username = check_username(username)
    check_password(password)
    if confirm != password:
        raise BadRequest("confirmPassword: does not match password")
    if await is_set_up(state):
        raise Conflict("the system is already set up")
    hashed = await state.passwords.hash(password)
    now = state.clock.now_s()
    try:
        async with state.db.transaction() as tx:
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
    await state.options.changed()


async def update_option(state: State, actor_id: int, actor_name: str, key: str, value: Any) -> None:
    """Validate and store; a system log (type 4) names the key and the admin, never the value."""
    try:
        await state.options.put(key, value)
    except OptionError as exc:
        raise BadRequest(str(exc)) from None
    async with state.db.transaction() as tx:
        await LogRepository(tx).add(type=LogType.SYSTEM, user_id=actor_id, username=actor_name,
                                    content=f"option {key} updated by {actor_name}",
                                    created_at=state.clock.now_s())
