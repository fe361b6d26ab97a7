"""Status, initial setup and options: the rules behind `server.system.routes`."""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import IntegrityError

from core.enums import LogType, UserStatus
from core.identity import Role
from core.option_registry import SECTIONS, OptionError
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
from server.system.schemas import Option, OptionSection, SetupState, Status

ROOT_INITIAL_QUOTA = 100_000_000

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

    def status(self, setup_done: bool, site: RequestSite) -> Status:
        s = self.options.settings
        rp = resolve(s.passkey, s.server_address, s.system_name, site)
        return Status.of(s, rp, setup=setup_done, start_time=self.started_at)

    def notice(self) -> str:
        return self.options.settings.notice

    def logo(self) -> str:
        return self.options.settings.logo

    def about(self) -> str:
        return self.options.settings.about

    def home_page_content(self) -> str:
        return self.options.settings.home_page_content

    async def setup_state(self) -> SetupState:
        if await self.is_set_up():
            return SetupState.of(done=True)
        async with self.db.transaction() as tx:
            root = await UserRepository(tx).root_exists()
        return SetupState.of(done=False, root_exists=root, database_kind=self.database_kind)

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

    def visible_options(self) -> list[Option]:
        """Every option with its stored value, except the secrets."""
        return [Option.of(key, value) for key, value in self.options.visible()]

    def option_schema(self) -> list[OptionSection]:
        """How every option is edited, section by section (core/option_registry.py's declaration)."""
        return [OptionSection.of(section) for section in SECTIONS]
