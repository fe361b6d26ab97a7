"""Passkeys: registering, listing and deleting them, logging in with one, and proving presence with one
before a sensitive action (docs/api/auth.md#passkeys).

Challenges never leave the server's keeping except inside the options sent to the browser. A registration
or verification challenge lives in the caller's session record (`passkey_registration`, `passkey_verify`),
a login challenge under `webauthn:login:{challenge}` in the shared backend (the browser's answer names it
in its `clientDataJSON`). Each expires after 120 s (judged by the service clock), a new `begin` replaces a
pending one of its kind, and a `finish` takes it atomically before anything else — success or not — so
an answer can be used once, however many copies of it arrive at once.

A passkey login counts as both factors: it opens the session directly (`open_session`, as the password
login does), never a TOTP step.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError

from backend.base import KeyValue
from core.enums import LogType, UserStatus
from core.identity import Principal
from core.relying_party import RelyingParty, RequestSite, resolve
from models.db import Database
from models.logs import LogRepository
from models.passkeys import CREDENTIAL_ID_MAX, PasskeyCredential, PasskeyRepository
from models.tables import User
from models.users import UserRepository
from server import metrics
from server.auth import ceremony
from server.auth.ceremony import CeremonyFailed, Known
from server.auth.passkey_schemas import PasskeyStatus
from server.clock import Clock
from server.components.options import Options
from server.components.sessions import SessionStore
from server.components.user_rules import require_hierarchy
from server.components.verification import PASSKEY_READY_MARK, AuthMethod, SecondFactor, SecureVerifier
from server.errors import BadRequest, Conflict, Forbidden, NotFound, Unauthorized

log = logging.getLogger("tollway.passkeys")

CHALLENGE_TTL = 120
MAX_PER_USER = 10
REGISTRATION = "passkey_registration"
VERIFICATION = "passkey_verify"
READY_MARK = PASSKEY_READY_MARK  # consumed by `POST /api/verify` with method `passkey`
LOGIN_FAILED = "passkey login failed"

SessionOpener = Callable[[User, AuthMethod, str | None], Awaitable[str]]


def login_key(challenge: str) -> str:
    return f"webauthn:login:{challenge}"


@dataclass(frozen=True, slots=True)
class PasskeyLogin:
    user: User
    session_id: str


def _handle_is(handle: str | None, user_id: int) -> bool:
    """Whether an assertion's `userHandle` (base64url) is `user_id` as a decimal string."""
    try:
        return ceremony.from_b64url(handle or "") == str(user_id).encode("ascii")
    except ValueError:
        return False


def _known(rows: Any) -> list[Known]:
    return [Known(r.credential_id, r.transports) for r in rows]


class PasskeyService:
    """The passkey routes' rules, with exactly the components they use."""

    def __init__(self, *, db: Database, backend: KeyValue, sessions: SessionStore, options: Options,
                 verifier: SecureVerifier, second_factor: SecondFactor, open_session: SessionOpener,
                 clock: Clock) -> None:
        self.db = db
        self.backend = backend
        self.sessions = sessions
        self.options = options
        self.verifier = verifier
        self.second_factor = second_factor
        self.open_session = open_session  # AuthService.open_session: the last step of every login
        self.clock = clock

    # ---- reading ------------------------------------------------------------------------------------

    async def count(self, user_id: int) -> int:
        """How many passkeys the user has (whether they can verify with one)."""
        async with self.db.transaction() as tx:
            return await PasskeyRepository(tx).count(user_id)

    async def status(self, user_id: int) -> PasskeyStatus:
        async with self.db.transaction() as tx:
            return PasskeyStatus.of(await PasskeyRepository(tx).of_user(user_id))

    # ---- deleting -----------------------------------------------------------------------------------

    async def delete(self, principal: Principal, credential_id: str | None) -> int:
        """One of the caller's passkeys (by id) or all of them; needs a fresh secure verification."""
        await self.verifier.require(principal)
        async with self.db.transaction() as tx:
            deleted = await PasskeyRepository(tx).delete(principal.id, credential_id)
        if not deleted:
            raise NotFound("passkey not found" if credential_id is not None else "you have no passkeys")
        return deleted

    async def admin_reset(self, actor: Principal, user_id: int) -> int:
        """Delete every passkey of a user below the actor's role; logged as a manage action."""
        async with self.db.transaction() as tx:
            target = await UserRepository(tx).get(user_id)
            if target is None:
                raise NotFound("user not found")
            require_hierarchy(actor.role, target.role)
            deleted = await PasskeyRepository(tx).delete(user_id)
            if not deleted:
                raise NotFound("the user has no passkeys")
            await LogRepository(tx).add(
                type=LogType.MANAGE, user_id=target.id, username=target.username,
                content=f"admin {actor.user.username} reset the passkeys of user {target.username} "
                        f"({deleted} deleted)",
                created_at=self.clock.now_s(),
                other={"admin_info": {"admin_id": actor.id, "admin_username": actor.user.username}})
        return deleted

    # ---- registering --------------------------------------------------------------------------------

    async def register_begin(self, principal: Principal, site: RequestSite) -> dict[str, Any]:
        rp = self._relying_party(site)
        if await self.second_factor.enabled(principal.id):
            await self.verifier.require(principal, "2fa")
        async with self.db.transaction() as tx:
            user = await UserRepository(tx).get(principal.id)
            own = await PasskeyRepository(tx).of_user(principal.id)
        if user is None:
            raise NotFound("user not found")
        if len(own) >= MAX_PER_USER:
            raise Conflict(f"you already have {MAX_PER_USER} passkeys, the most allowed")
        challenge = ceremony.new_challenge()
        await self._hold(principal, REGISTRATION, challenge)
        return ceremony.creation_options(rp, self.options.settings.passkey, user_id=user.id,
                                         username=user.username, display_name=user.display_name,
                                         challenge=challenge, exclude=_known(own))

    async def register_finish(self, principal: Principal, site: RequestSite, credential: dict[str, Any]
                              ) -> str:
        rp = self._relying_party(site)
        challenge = await self._take(principal, REGISTRATION)
        if challenge is None:
            raise BadRequest("no passkey registration is in progress (or it expired): begin again")
        try:
            new = ceremony.verify_registration(rp, self.options.settings.passkey, credential, challenge)
        except CeremonyFailed as exc:
            log.info("passkey registration refused for user %s: %s", principal.id, exc)
            raise BadRequest("passkey registration failed") from None
        if len(new.credential_id) > CREDENTIAL_ID_MAX:
            raise BadRequest(f"id: credential ids over {CREDENTIAL_ID_MAX} characters are not supported")
        transports = [t for t in credential["response"].get("transports") or [] if t in ceremony.TRANSPORTS]
        row = PasskeyCredential(
            user_id=principal.id, credential_id=new.credential_id, public_key=new.public_key,
            sign_count=new.sign_count, aaguid=new.aaguid, transports=",".join(dict.fromkeys(transports)),
            attachment=credential.get("authenticatorAttachment") or "", backup_eligible=new.backup_eligible,
            backup_state=new.backup_state, clone_warning=False, created_at=self.clock.now_s(), last_used_at=0)
        try:
            async with self.db.transaction() as tx:
                await UserRepository(tx).get_for_update(principal.id)  # one registration per user at a time
                passkeys = PasskeyRepository(tx)
                if await passkeys.by_credential_id(new.credential_id) is not None:
                    raise Conflict("this passkey is already registered")
                if await passkeys.count(principal.id) >= MAX_PER_USER:
                    raise Conflict(f"you already have {MAX_PER_USER} passkeys, the most allowed")
                await passkeys.add(row)
        except IntegrityError:  # another user's concurrent registration of the same credential won
            raise Conflict("this passkey is already registered") from None
        return new.credential_id

    # ---- logging in ---------------------------------------------------------------------------------

    async def login_begin(self, site: RequestSite) -> dict[str, Any]:
        rp = self._relying_party(site)
        challenge = ceremony.new_challenge()
        await self.backend.set_text(login_key(ceremony.b64url(challenge)),
                                    json.dumps({"expires_at": self.clock.now_s() + CHALLENGE_TTL}),
                                    CHALLENGE_TTL)
        return ceremony.request_options(rp, self.options.settings.passkey, challenge=challenge, allow=[])

    async def login_finish(self, site: RequestSite, credential: dict[str, Any], old_session: str | None
                           ) -> PasskeyLogin:
        """A passkey sign-in; a refused assertion (unknown credential, another owner, a bad signature or
        an expired ceremony) is a failure `passkey`, a disabled account one `disabled`."""
        try:
            return await self._login_finish(site, credential, old_session)
        except Unauthorized:
            metrics.sign_in_failed(metrics.SignInFailure.PASSKEY)
            raise
        except Forbidden:
            metrics.sign_in_failed(metrics.SignInFailure.DISABLED)
            raise

    async def _login_finish(self, site: RequestSite, credential: dict[str, Any], old_session: str | None
                            ) -> PasskeyLogin:
        rp = self._relying_party(site)
        response = credential["response"]
        challenge = ceremony.client_challenge(response["clientDataJSON"])
        held = await self.backend.take_text(login_key(challenge)) if challenge else None
        if challenge is None or held is None or json.loads(held)["expires_at"] < self.clock.now_s():
            raise Unauthorized("passkey login expired or unknown: begin again")
        async with self.db.transaction() as tx:
            row = await PasskeyRepository(tx).by_credential_id(credential["id"])
            user = await UserRepository(tx).get(row.user_id) if row is not None else None
        if row is None or user is None:
            raise Unauthorized(LOGIN_FAILED)
        if not _handle_is(response.get("userHandle"), row.user_id):
            log.info("passkey login refused: user handle differs from the owner of credential #%s", row.id)
            raise Unauthorized(LOGIN_FAILED)
        await self._assert(rp, row, credential, ceremony.from_b64url(challenge), Unauthorized(LOGIN_FAILED))
        if user.status != UserStatus.ENABLED:
            raise Forbidden("account disabled")
        return PasskeyLogin(user, await self.open_session(user, AuthMethod.PASSKEY, old_session))

    # ---- verifying ----------------------------------------------------------------------------------

    async def verify_begin(self, principal: Principal, site: RequestSite) -> dict[str, Any]:
        rp = self._relying_party(site)
        async with self.db.transaction() as tx:
            own = await PasskeyRepository(tx).of_user(principal.id)
        if not own:
            raise NotFound("you have no passkeys")
        challenge = ceremony.new_challenge()
        await self._hold(principal, VERIFICATION, challenge)
        return ceremony.request_options(rp, self.options.settings.passkey, challenge=challenge,
                                        allow=_known(own))

    async def verify_finish(self, principal: Principal, site: RequestSite, credential: dict[str, Any]
                            ) -> None:
        """Mark the session `secure_passkey_ready_at` = now; `POST /api/verify` makes it a verification."""
        rp = self._relying_party(site)
        challenge = await self._take(principal, VERIFICATION)
        if challenge is None:
            raise BadRequest("no passkey verification is in progress (or it expired): begin again")
        async with self.db.transaction() as tx:
            row = await PasskeyRepository(tx).by_credential_id(credential["id"])
        if row is None or row.user_id != principal.id:
            raise BadRequest("id: not one of your passkeys")
        await self._assert(rp, row, credential, challenge, BadRequest("passkey verification failed"))
        assert principal.session_id is not None  # a session-only route
        await self.sessions.merge(principal.session_id, {READY_MARK: self.clock.now_s()})

    # ---- steps --------------------------------------------------------------------------------------

    def _relying_party(self, site: RequestSite) -> RelyingParty:
        """The relying party of this request, once passkeys are on and it is fully named and secure."""
        settings = self.options.settings
        if not settings.passkey_enabled:
            raise Forbidden("passkeys are disabled")
        rp = resolve(settings.passkey, settings.server_address, settings.system_name, site)
        if not rp.rp_id or not rp.origins:
            raise BadRequest("Host: names no passkey relying party; set ServerAddress or passkey.rp_id")
        if rp.insecure:
            raise BadRequest(f"origin: {rp.insecure[0]} is not secure (https, or http on localhost); "
                             "passkey.allow_insecure_origin allows it")
        return rp

    async def _hold(self, principal: Principal, kind: str, challenge: bytes) -> None:
        """Keep a ceremony's challenge in the caller's session, replacing a pending one of its kind."""
        assert principal.session_id is not None  # a session-only route
        held = {"challenge": ceremony.b64url(challenge), "expires_at": self.clock.now_s() + CHALLENGE_TTL}
        if not await self.sessions.merge(principal.session_id, {kind: held}):
            raise Unauthorized("not logged in")

    async def _take(self, principal: Principal, kind: str) -> bytes | None:
        """The pending challenge of `kind`, removed from the session whatever happens next; None when there
        is none or it expired."""
        assert principal.session_id is not None
        held = await self.sessions.take(principal.session_id, kind)
        if not isinstance(held, dict) or int(held.get("expires_at", 0)) < self.clock.now_s():
            return None
        return ceremony.from_b64url(str(held.get("challenge", "")))

    async def _assert(self, rp: RelyingParty, row: PasskeyCredential, credential: dict[str, Any],
                      challenge: bytes, refusal: Exception) -> None:
        """Verify an assertion by `row`'s key and record its use; a counter that did not move forward
        flags the credential (`clone_warning`) and refuses."""
        try:
            result = ceremony.verify_assertion(rp, self.options.settings.passkey, credential, challenge,
                                               row.public_key)
        except CeremonyFailed as exc:
            log.info("passkey assertion refused for credential #%s of user %s: %s", row.id, row.user_id, exc)
            raise refusal from None
        async with self.db.transaction() as tx:
            recorded = await PasskeyRepository(tx).record_use(row.id, result.sign_count, self.clock.now_s())
        if not recorded:
            async with self.db.transaction() as tx:
                await PasskeyRepository(tx).flag_clone(row.id)
            log.warning("passkey signature counter did not increase (stored %s, received %s) for credential "
                        "#%s of user %s: possibly a cloned authenticator; flagged clone_warning",
                        row.sign_count, result.sign_count, row.id, row.user_id)
            raise refusal
