"""A real SMTP server for the e-mail tests: aiosmtpd's `Controller` on 127.0.0.1, on a free port, in its own
thread, keeping every message it accepts.

No TLS (so the mailer's "STARTTLS when offered" finds none and sends in the clear) and, unless
`credentials` are given, no AUTH. Switches:
- `refuse = True`: every message is refused with a permanent `554` whose text quotes the message (a
  server that echoes what it was sent: what the app logs or answers must still not carry the secret);
- `credentials=(account, token)`: AUTH is offered (without TLS) and required, and only that pair passes.

`code_for(address)` and `token_for(address)` read the 6-digit code and the reset token out of the
latest message to an address, the way a person would: `\\b\\d{6}\\b` and `token=([A-Za-z0-9_-]+)`.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any, cast

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

CODE = re.compile(r"\b\d{6}\b")
TOKEN = re.compile(r"token=([A-Za-z0-9_-]+)")


@dataclass(frozen=True)
class Mail:
    sender: str
    recipients: list[str]
    message: EmailMessage

    @property
    def text(self) -> str:
        part = self.message.get_body(("plain",))
        assert part is not None, "no plain-text part"
        return cast(str, cast(EmailMessage, part).get_content())


class _Handler:
    def __init__(self, fake: FakeSmtp) -> None:
        self.fake = fake

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        content = envelope.original_content or b""
        mail = Mail(str(envelope.mail_from), list(envelope.rcpt_tos),
                    cast(EmailMessage, message_from_bytes(content, policy=policy.default)))
        with self.fake.lock:
            (self.fake.refused if self.fake.refuse else self.fake.mails).append(mail)
        if self.fake.refuse:
            return f"554 5.7.1 refused by the test server: {mail.text!r}"
        return "250 OK"


class _FreePortController(Controller):
    """Binds port 0 and learns the port the system chose before the start-up check connects to it."""

    def _trigger_server(self) -> None:
        assert self.server is not None
        self.port = self.server.sockets[0].getsockname()[1]
        super()._trigger_server()


class FakeSmtp:
    def __init__(self, credentials: tuple[str, str] | None = None) -> None:
        self.mails: list[Mail] = []  # accepted
        self.refused: list[Mail] = []  # what the server saw but refused (`refuse`)
        self.refuse = False
        self.lock = threading.Lock()
        kwargs: dict[str, Any] = {}
        if credentials is not None:
            kwargs = {"authenticator": self._authenticator(credentials), "auth_require_tls": False,
                      "auth_required": True}
        self.controller = _FreePortController(_Handler(self), hostname="127.0.0.1", port=0, **kwargs)

    @staticmethod
    def _authenticator(credentials: tuple[str, str]) -> Any:
        def check(server: SMTP, session: Session, envelope: Envelope, mechanism: str,
                  auth_data: Any) -> AuthResult:
            ok = (isinstance(auth_data, LoginPassword)
                  and (auth_data.login.decode(), auth_data.password.decode()) == credentials)
            return AuthResult(success=ok, handled=False)
        return check

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        return int(self.controller.port)

    def start(self) -> FakeSmtp:
        self.controller.start()
        return self

    def stop(self) -> None:
        self.controller.stop()

    def to(self, address: str) -> list[Mail]:
        """The messages accepted for `address`, oldest first."""
        with self.lock:
            return [m for m in self.mails if address in m.recipients]

    def code_for(self, address: str) -> str:
        mails = self.to(address)
        assert mails, f"no e-mail to {address}"
        found = CODE.findall(mails[-1].text)
        assert len(found) == 1, f"expected one 6-digit code in {mails[-1].text!r}"
        return str(found[0])

    def token_for(self, address: str) -> str:
        mails = self.to(address)
        assert mails, f"no e-mail to {address}"
        found = TOKEN.search(mails[-1].text)
        assert found is not None, f"no reset token in {mails[-1].text!r}"
        return found.group(1)
