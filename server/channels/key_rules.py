"""The rules every channel service applies to a channel's keys and status, as plain functions: the
services (crud.py, tags.py, keyring.py, probe.py, balances.py, tools.py) share no base class, only these.

- Keys are written as lines (`key_lines`: one per line, trimmed, empty lines dropped), stored as one text
  (`key_text`, refused past `KEY_MAX_BYTES`), encrypted with the secret box and digested for the
  exact-key search (`sealed`, `store_keys`), and read back with the box (`keys_of`: a 409 when they were
  encrypted under another `SECRET_KEY`). No reply ever carries them but the root's key reveal.
- A status change records `{status_reason, status_time}` in `other_info` (`status_info`, `set_status`).
- A multi-key channel's status follows its keys: no enabled key left turns an enabled channel into 3
  "all keys are disabled", and keys available again bring such a channel back (`follow_keys`).
"""

from __future__ import annotations

from cryptography.exceptions import InvalidTag

from core.enums import ChannelStatus
from core.multikey import MultiKeyState
from models.channels import Channel
from models.routing import dump_json, load_json
from server.crypto import SecretBox
from server.errors import BadRequest, Conflict

KEY_MAX_BYTES = 48000  # encrypted and base64-encoded, it still fits a TEXT column
ALL_KEYS_DISABLED = "all keys are disabled"
KEYS_BACK = "keys available again"
STATUS_REASONS = {ChannelStatus.ENABLED: "manually enabled",
                  ChannelStatus.MANUALLY_DISABLED: "manually disabled"}
UNREADABLE_KEYS = "key: the stored keys cannot be decrypted with this SECRET_KEY"


def key_lines(text: str | None) -> list[str]:
    """The keys of a key text: one per line, each trimmed, empty lines dropped (order kept)."""
    return [line.strip() for line in (text or "").split("\n") if line.strip()]


def unique(keys: list[str]) -> list[str]:
    return list(dict.fromkeys(keys))


def key_text(keys: list[str]) -> str:
    """How keys are stored (encrypted) and digested: joined by newlines; refused when too long."""
    text = "\n".join(keys)
    if len(text.encode()) > KEY_MAX_BYTES:
        raise BadRequest(f"key: must be at most {KEY_MAX_BYTES} bytes in all")
    return text


def sealed(box: SecretBox, keys: list[str]) -> dict[str, str]:
    """The columns that store `keys`: `key_encrypted` and the `key_digest` the exact-key search uses."""
    text = key_text(keys)
    return {"key_encrypted": box.encrypt(text), "key_digest": box.digest(text)}


def store_keys(box: SecretBox, channel: Channel, keys: list[str]) -> None:
    """Write `keys` into the row, encrypted, with their digest."""
    columns = sealed(box, keys)
    channel.key_encrypted = columns["key_encrypted"]
    channel.key_digest = columns["key_digest"]


def keys_of(box: SecretBox, channel: Channel) -> list[str]:
    """The channel's keys in order (one for a single-key channel); 409 when they cannot be decrypted."""
    try:
        return key_lines(box.decrypt(channel.key_encrypted)) if channel.key_encrypted else []
    except (ValueError, InvalidTag):
        raise Conflict(UNREADABLE_KEYS) from None


def status_info(reason: str, now: int, previous: str | None = None) -> str:
    """`other_info` with the reason and time of a status change, its other fields kept."""
    info = load_json(previous)
    info.update(status_reason=reason, status_time=now)
    return dump_json(info)


def set_status(channel: Channel, status: int, reason: str, now: int) -> bool:
    """`status` with its reason and time in `other_info`; False when the channel had it already."""
    if channel.status == status:
        return False
    channel.status = status
    channel.other_info = status_info(reason, now, channel.other_info)
    return True


def follow_keys(channel: Channel, info: MultiKeyState, now: int, *, revive: bool) -> None:
    """A multi-key channel's status after its keys changed: an enabled channel with no enabled key
    gets 3 "all keys are disabled"; one with status 3 comes back to 1 when a key is enabled again and
    either `revive` (the admin enabled keys) or it was disabled for having no key left."""
    if not info.is_multi_key:
        return
    if not info.has_enabled_key():
        if channel.status == ChannelStatus.ENABLED:
            set_status(channel, ChannelStatus.AUTO_DISABLED, ALL_KEYS_DISABLED, now)
    elif channel.status == ChannelStatus.AUTO_DISABLED and (
            revive or load_json(channel.other_info).get("status_reason") == ALL_KEYS_DISABLED):
        set_status(channel, ChannelStatus.ENABLED, KEYS_BACK, now)
