"""`ChannelKeys`, the routes that read or change a channel's stored keys: the root's key reveal
(docs/api/channels.md#revealing-a-channels-key) and the key management of a multi-key channel
(docs/api/channels.md#multi-key-channels), `POST /api/channel/multi_key/manage`: list the keys with their
statuses, enable or disable one or all, delete one, delete those the system disabled. (Where a key may be
sent, and who may change it, is destination.py.)

The key reveal checks the caller's secure verification first (`SecureVerifier`, a 403 with a `code`),
then the channel (404); it answers the keys one per line and writes a system log naming the admin and
the channel — never the key — in the same transaction that read it.

Calls on one channel are serialized: each runs in one transaction that first locks the channel's row
(`SELECT … FOR UPDATE` on MariaDB and PostgreSQL; SQLite runs one writer at a time), reads the keys and
their statuses, changes them and writes both back with the abilities. Two deletes at once, on any workers
or nodes, therefore each remove exactly the key they named at the time they ran, and the key list and the
statuses never disagree. The key text is the truth for how many keys there are; `channel_info` is read
and written only through `MultiKeyState`.

The channel's status follows its keys (`key_rules.follow_keys`): no enabled key left makes an enabled
channel 3 "all keys are disabled"; enabling a key brings a channel with status 3 back to 1 (a channel an
admin disabled, status 2, stays disabled).
"""

from __future__ import annotations

from core.enums import ChannelStatus, LogType
from core.identity import Principal
from core.multikey import MultiKeyState
from models.channels import ChannelRepository
from models.db import Database
from models.logs import LogRepository
from server.channels.key_rules import STATUS_REASONS, follow_keys, keys_of, store_keys
from server.channels.key_schemas import KeyReveal, KeyStatusPage
from server.channels.rules import KEY_ACTIONS
from server.clock import Clock
from server.components.channel_table import ChannelTable
from server.components.verification import SecureVerifier
from server.crypto import SecretBox
from server.errors import BadRequest, Conflict, NotFound

ONE_KEY = ("disable_key", "enable_key", "delete_key")
ENABLING = ("enable_key", "enable_all_keys")
DISABLED = STATUS_REASONS[ChannelStatus.MANUALLY_DISABLED]


class ChannelKeys:
    """The key reveal and the key management of multi-key channels."""

    def __init__(self, *, db: Database, channels: ChannelTable, box: SecretBox, verifier: SecureVerifier,
                 clock: Clock) -> None:
        self.db = db
        self.channels = channels
        self.box = box
        self.verifier = verifier  # the secure verification the key reveal needs
        self.clock = clock

    async def reveal_key(self, principal: Principal, channel_id: int) -> KeyReveal:
        """`POST /api/channel/:id/key` → `{key}`: the keys one per line, for a root with a fresh secure
        verification (checked before the channel is looked up); recorded as a system log."""
        await self.verifier.require(principal)
        admin = principal.user
        async with self.db.transaction() as tx:
            channel = await ChannelRepository(tx).get(channel_id)
            if channel is None:
                raise NotFound("channel not found")
            key = "\n".join(keys_of(self.box, channel))
            await LogRepository(tx).add(
                type=LogType.SYSTEM, user_id=admin.id, username=admin.username, channel=channel.id,
                content=f"admin {admin.username} viewed the key of channel #{channel.id} {channel.name}",
                other={"admin_info": {"admin_id": admin.id, "admin_username": admin.username},
                       "channel_id": channel.id},
                created_at=self.clock.now_s())
        return KeyReveal.of(key)

    async def manage_keys(self, channel_id: int, action: str, *, key_index: int | None = None,
                          page: int | None = None, page_size: int | None = None,
                          status: int | None = None) -> KeyStatusPage | int | None:
        """One action on the keys of a multi-key channel → the key page, a count, or None (see
        docs/api/channels.md#multi-key-channels)."""
        if action not in KEY_ACTIONS:
            raise BadRequest(f"action: must be one of {', '.join(KEY_ACTIONS)}")
        if action in ONE_KEY and key_index is None:
            raise BadRequest(f"key_index: is required for {action}")
        now = self.clock.now_s()
        result: int | None = None
        async with self.db.transaction() as tx:
            repo = ChannelRepository(tx)
            reading = action == "get_key_status"
            channel = await (repo.get(channel_id) if reading else repo.get_for_update(channel_id))
            if channel is None:
                raise NotFound("channel not found")
            info = MultiKeyState.parse(channel.channel_info)
            if not info.is_multi_key:
                raise BadRequest("channel_id: the channel is not a multi-key channel")
            keys = keys_of(self.box, channel)
            info.size = len(keys)
            if action in ONE_KEY and not 0 <= (key_index or 0) < len(keys):
                raise BadRequest(f"key_index: must be 0–{len(keys) - 1}")
            index = key_index or 0
            if action == "get_key_status":
                return KeyStatusPage.of(info, keys, page=page, page_size=page_size, status=status)
            if action == "disable_key":
                info.set_status(index, ChannelStatus.MANUALLY_DISABLED, DISABLED, now)
            elif action == "enable_key":
                info.set_status(index, ChannelStatus.ENABLED, "", now)
            elif action in ("disable_all_keys", "enable_all_keys"):
                to = ChannelStatus.ENABLED if action == "enable_all_keys" else ChannelStatus.MANUALLY_DISABLED
                result = sum(info.set_status(i, to, DISABLED, now) for i in range(len(keys)))
            else:
                gone = [index] if action == "delete_key" else [
                    i for i in range(len(keys)) if info.status(i) == ChannelStatus.AUTO_DISABLED]
                if len(gone) >= len(keys):
                    raise Conflict("a channel keeps at least one key: delete the channel instead")
                store_keys(self.box, channel, [k for i, k in enumerate(keys) if i not in gone])
                info.delete_keys(gone)
                result = None if action == "delete_key" else len(gone)
            channel.channel_info = info.dump()
            follow_keys(channel, info, now, revive=action in ENABLING)
            await repo.save(channel)
        await self.channels.changed()
        return result
