"""Sending e-mail (verification codes, password reset links) over SMTP, behind a small protocol.

Services receive a `Mailer` explicitly (wired in `server/container.py`); `SmtpMailer` reads the `SMTP*`
options at each send, so a change made with `PUT /api/option/` applies to the next message:

- not configured (no `SMTPServer`, or neither `SMTPFrom` nor `SMTPAccount`) → 400, before anything is
  generated or stored;
- implicit TLS when `SMTPSSLEnabled` is on or the port is 465, else STARTTLS whenever the server offers it;
  AUTH only when both `SMTPAccount` and `SMTPToken` are set; 15 s at most; one plain-text part;
- any failure (refused, unreachable, timed out, TLS or AUTH error) → 500 `could not send the e-mail`. The
  warning logged names the failure with the SMTP token and the message's secret (the code, the reset
  token) redacted: a server may quote what it was sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from email.errors import MessageError
from email.message import EmailMessage
from email.utils import formataddr, formatdate, make_msgid
from typing import Protocol

import aiosmtplib

from core.settings import SmtpSettings
from server.errors import BadRequest, DeliveryFailed
from server.redaction import redact

log = logging.getLogger("tollway.mail")

SEND_TIMEOUT = 15.0
IMPLICIT_TLS_PORT = 465
NOT_CONFIGURED = "e-mail sending is not configured (SMTPServer, SMTPFrom)"
SEND_FAILED = "could not send the e-mail"


class Mailer(Protocol):
    def require_configured(self) -> None:
        """Raise the 400 when sending is not configured (checked before a code or token is made)."""
        ...

    async def send(self, to: str, subject: str, text: str, *, secret: str) -> None:
        """Deliver one plain-text message; `secret` (what the message carries) never reaches a log."""
        ...


def _message(sender_name: str, sender: str, to: str, subject: str, text: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = formataddr((sender_name, sender))
    message["To"] = to
    message["Subject"] = subject
    message["Date"] = formatdate(localtime=False)
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2] or None)
    message.set_content(text)
    return message


class SmtpMailer:
    def __init__(self, settings: Callable[[], SmtpSettings], sender_name: Callable[[], str],
                 timeout: float = SEND_TIMEOUT) -> None:
        self.settings = settings
        self.sender_name = sender_name
        self.timeout = timeout

    def require_configured(self) -> None:
        if not self.settings().configured:
            raise BadRequest(NOT_CONFIGURED)

    async def send(self, to: str, subject: str, text: str, *, secret: str) -> None:
        smtp = self.settings()
        if not smtp.configured:
            raise BadRequest(NOT_CONFIGURED)
        implicit = smtp.ssl or smtp.port == IMPLICIT_TLS_PORT
        auth = bool(smtp.account and smtp.token)
        try:
            message = _message(self.sender_name(), smtp.sender, to, subject, text)
            async with asyncio.timeout(self.timeout):
                await aiosmtplib.send(
                    message, sender=smtp.sender, recipients=[to], hostname=smtp.server, port=smtp.port,
                    username=smtp.account if auth else None, password=smtp.token if auth else None,
                    use_tls=implicit, start_tls=False if implicit else None, timeout=self.timeout,
                )
        # ValueError, MessageError: a host or sender the libraries cannot use
        except (aiosmtplib.SMTPException, OSError, TimeoutError, ValueError, MessageError) as exc:
            known = [s for s in (smtp.token, secret) if s]
            detail = redact(f"{type(exc).__name__}: {exc}", known)
            if any(s in detail for s in known):  # too short for redaction to look for: drop the text
                detail = type(exc).__name__
            log.warning("sending an e-mail through %s:%d failed: %s", smtp.server, smtp.port, detail[:300])
            raise DeliveryFailed(SEND_FAILED) from None
