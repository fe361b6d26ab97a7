"""What every part of the channel service shares: its components and the few rules all of them apply.

`ChannelService` (service.py) is one class assembled from parts, each in its own module so that none
grows past a screenful of rules: the create/update/read routes (service.py), the tools that act on many
channels at once or on a channel's key (tools.py), tags (tags.py), the key management of multi-key
channels (keyring.py), and the parts that call a channel's upstream: tests and model lists (probe.py)
and balances (balances.py). Each part subclasses `ChannelBase`, which holds the components the container
hands over and the shared rules:

- a status change records `{status_reason, status_time}` in `other_info` (`set_status`);
- a multi-key channel's status follows its keys: no enabled key left turns an enabled channel into 3
  "all keys are disabled", and keys available again bring such a channel back (`follow_keys`);
- keys are read back with the secret box (`keys_of`, a 409 when they were encrypted under another
  `SECRET_KEY`) and written encrypted with their digest (`store_keys`).

Every write runs in one transaction with the channel's abilities; the caller then announces it with
`ChannelTable.changed()`, so it routes (or stops routing) on every worker and node before the reply.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from cryptography.exceptions import InvalidTag

from backend.base import KeyValue
from core.enums import ChannelStatus
from core.multikey import MultiKeyState
from models.channels import Channel
from models.db import Database
from models.routing import dump_json, load_json
from server.channels.destination import KeyDestinations
from server.channels.rules import key_lines, key_text
from server.clock import Clock
from server.components.channel_table import ChannelTable
from server.components.options import Options
from server.components.verification import SecureVerifier
from server.crypto import SecretBox
from server.errors import Conflict
from server.upstream.admin import UpstreamAdmin

ALL_KEYS_DISABLED = "all keys are disabled"
KEYS_BACK = "keys available again"
STATUS_REASONS = {ChannelStatus.ENABLED: "manually enabled",
                  ChannelStatus.MANUALLY_DISABLED: "manually disabled"}
# MariaDB compares the abilities' primary key without case or accents: `GPT-4o` and `gpt-4o` are one row.
COLLIDING = ("models: two entries (or two groups) are equal for the database (they differ only in case or "
             "accents); keep one")
UNREADABLE_KEYS = "key: the stored keys cannot be decrypted with this SECRET_KEY"


class TaskOwner(Protocol):
    """The worker's owner of background tasks (`server/context.py` `Tasks`): named, drained on shutdown."""

    def start(self, name: str, coro: Coroutine[Any, Any, Any], *, stop: Callable[[], None] | None = None
              ) -> None: ...

    @property
    def names(self) -> list[str]: ...


def status_info(reason: str, now: int, previous: str | None = None) -> str:
    """`other_info` with the reason and time of a status change, its other fields kept."""
    info = load_json(previous)
    info.update(status_reason=reason, status_time=now)
    return dump_json(info)


class ChannelBase:
    """The components of the channel service, and the rules its parts share."""

    def __init__(self, *, db: Database, channels: ChannelTable, box: SecretBox, options: Options,
                 destinations: KeyDestinations, backend: KeyValue, verifier: SecureVerifier,
                 admin: UpstreamAdmin, tasks: TaskOwner, clock: Clock) -> None:
        self.db = db
        self.channels = channels
        self.box = box
        self.options = options
        self.destinations = destinations
        self.backend = backend  # the cluster-wide locks (abilities rebuild, test and balance runs)
        self.verifier = verifier  # the secure verification the key reveal needs
        self.admin = admin  # the upstream calls made for an admin: tests, balances, model lists
        self.tasks = tasks  # owns the background run of "test every channel"
        self.clock = clock

    def keys_of(self, channel: Channel) -> list[str]:
        """The channel's keys in order (one for a single-key channel); 409 when they cannot be decrypted."""
        try:
            return key_lines(self.box.decrypt(channel.key_encrypted)) if channel.key_encrypted else []
        except (ValueError, InvalidTag):
            raise Conflict(UNREADABLE_KEYS) from None

    def store_keys(self, channel: Channel, keys: list[str]) -> None:
        """Write `keys` into the row, encrypted, with the digest the exact-key search uses."""
        text = key_text(keys)
        channel.key_encrypted = self.box.encrypt(text)
        channel.key_digest = self.box.digest(text)

    @staticmethod
    def set_status(channel: Channel, status: int, reason: str, now: int) -> bool:
        """`status` with its reason and time in `other_info`; False when the channel had it already."""
        if channel.status == status:
            return False
        channel.status = status
        channel.other_info = status_info(reason, now, channel.other_info)
        return True

    @classmethod
    def follow_keys(cls, channel: Channel, info: MultiKeyState, now: int, *, revive: bool) -> None:
        """A multi-key channel's status after its keys changed: an enabled channel with no enabled key
        gets 3 "all keys are disabled"; one with status 3 comes back to 1 when a key is enabled again and
        either `revive` (the admin enabled keys) or it was disabled for having no key left."""
        if not info.is_multi_key:
            return
        if not info.has_enabled_key():
            if channel.status == ChannelStatus.ENABLED:
                cls.set_status(channel, ChannelStatus.AUTO_DISABLED, ALL_KEYS_DISABLED, now)
        elif channel.status == ChannelStatus.AUTO_DISABLED and (
                revive or load_json(channel.other_info).get("status_reason") == ALL_KEYS_DISABLED):
            cls.set_status(channel, ChannelStatus.ENABLED, KEYS_BACK, now)
