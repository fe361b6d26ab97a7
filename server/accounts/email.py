"""E-mail verification codes, binding an address to one's account, and password reset by e-mail.

The two routes that send mail (`GET /api/verification`, `GET /api/reset_password`) share two limits on top
of the critical rate limit: 2 per 30 s per client IP and 5 per hour per address (GCRA, both charged or
neither), counted for every well-formed request, whether a message goes out or not. A code or token is
stored only once the mail server accepted the message carrying it, so a failed send leaves nothing
usable behind. Storage and single use: `server/components/email_codes.py`.
"""

from __future__ import annotations

from urllib.parse import quote

from sqlalchemy.exc import IntegrityError

from backend.base import Limit, RateLimits
from core.identity import Principal
from core.settings import Settings
from models.db import Database
from models.users import UserRepository
from server.accounts.service import AccountService
from server.components.email_codes import CODE_TTL, INVALID_RESET, RESET_TTL, EmailCodes, ResetTokens
from server.components.options import Options
from server.components.user_rules import check_email, check_password
from server.components.users import UserDirectory
from server.crypto import sha256_hex
from server.errors import BadRequest, Conflict, TooManyRequests
from server.mailer import Mailer

SEND_LIMITS = ((2, 30.0), (5, 3600.0))  # (count, seconds): per client IP, per address
EMAIL_USED = "email is already used"


def deliverable(raw: str, settings: Settings, field: str = "email") -> str:
    """The address trimmed and lower-cased, if well-formed, at most 50 characters, and allowed by the
    domain whitelist and the alias rule when those are on; else a 400 naming `field`."""
    address = check_email(raw, field)
    local, _, domain = address.rpartition("@")
    if settings.email_domain_restriction_enabled and domain not in settings.email_domain_whitelist:
        raise BadRequest(f"{field}: addresses at {domain} are not accepted here (EmailDomainWhitelist)")
    if settings.email_alias_restriction_enabled and ("+" in local or "." in local):
        raise BadRequest(f"{field}: must not contain '+' or '.' before the '@' (no aliases)")
    return address


class EmailService:
    """The e-mail code and password reset routes, with exactly the components they use."""

    def __init__(self, *, db: Database, backend: RateLimits, codes: EmailCodes, resets: ResetTokens,
                 mailer: Mailer, accounts: AccountService, users: UserDirectory, options: Options) -> None:
        self.db = db
        self.backend = backend
        self.codes = codes
        self.resets = resets
        self.mailer = mailer
        self.accounts = accounts  # a reset sets the password the way every password change does
        self.users = users
        self.options = options

    async def _limit(self, address: str, client_ip: str) -> None:
        (ip_count, ip_period), (address_count, address_period) = SEND_LIMITS
        result = await self.backend.gcra_many([
            Limit(f"email_send:ip:{client_ip}", ip_count, ip_period),
            Limit(f"email_send:address:{sha256_hex(address)}", address_count, address_period),
        ])
        if not result.allowed:
            raise TooManyRequests("too many e-mails requested, please retry later",
                              retry_after=result.retry_after)

    async def send_code(self, raw_address: str, client_ip: str) -> None:
        """Mail a new 6-digit code to an address no account uses (it replaces an older one)."""
        settings = self.options.settings
        address = deliverable(raw_address, settings)
        self.mailer.require_configured()
        await self._limit(address, client_ip)
        async with self.db.transaction() as tx:
            if await UserRepository(tx).email_taken(address):
                raise Conflict(EMAIL_USED)
        issued = self.codes.issue(address)
        await self.mailer.send(
            address, f"{settings.system_name}: your verification code",
            f"Your {settings.system_name} verification code is:\n\n{issued.secret}\n\n"
            f"It is valid for {CODE_TTL // 60} minutes and can be used once. If you did not ask for it, "
            "you can ignore this message.\n",
            secret=issued.secret)
        await self.codes.save(issued)

    async def bind(self, principal: Principal, raw_address: str, code: str) -> None:
        """Set the caller's e-mail to an address proven with its code."""
        address = deliverable(raw_address, self.options.settings)
        if not code:
            raise BadRequest("code: is required")
        async with self.db.transaction() as tx:
            if await UserRepository(tx).email_taken(address):
                raise Conflict(EMAIL_USED)
        try:
            async with self.codes.voucher(address, code, "code") as voucher:
                await voucher.redeem()  # before the transaction: without Redis the code is a row of its own
                async with self.db.transaction() as tx:
                    await UserRepository(tx).update_fields(principal.id, email=address)
        except IntegrityError:  # another account took the address meanwhile (the code was given back)
            raise Conflict(EMAIL_USED) from None
        await self.users.invalidate(principal.id)

    async def send_reset(self, raw_address: str, client_ip: str) -> None:
        """Mail a reset link if a live account has the address; the answer is the same either way."""
        settings = self.options.settings
        address = deliverable(raw_address, settings)
        self.mailer.require_configured()
        if not settings.server_address:
            raise BadRequest("ServerAddress: must be set to send password reset links")
        await self._limit(address, client_ip)
        async with self.db.transaction() as tx:
            user = await UserRepository(tx).by_email(address)
        if user is None:
            return
        issued = self.resets.issue(user.id, address)
        link = f"{settings.server_address}/user/reset?email={quote(address, safe='')}&token={issued.secret}"
        await self.mailer.send(
            address, f"{settings.system_name}: reset your password",
            f"Someone asked to reset the password of the {settings.system_name} account {user.username}.\n\n"
            f"To choose a new password, open this link within {RESET_TTL // 60} minutes (it works once):\n\n"
            f"{link}\n\nIf it was not you, ignore this message: your password stays as it is.\n",
            secret=issued.secret)
        await self.resets.save(issued, address)

    async def reset(self, raw_address: str, token: str, password: str) -> None:
        """Set a new password with a reset link; the token is used up and every session of the user ends.
        A password that breaks the rules is refused before the token is touched."""
        address = check_email(raw_address)
        grant = await self.resets.check(address, token)
        check_password(password)
        await self.resets.take(grant)
        async with self.db.transaction() as tx:
            user = await UserRepository(tx).by_email(address)
        if user is None or user.id != grant.user_id:  # deleted, or the address moved on since
            raise BadRequest(INVALID_RESET)
        await self.accounts.set_password(user.id, password)
