"""`ChannelCrud`, the channel routes proper (docs/api/channels.md#channel-routes): create (single, batch,
multi-key), partial update, read, list, search, delete, and the model catalog. One of the six channel
services, each a class of its own taking only the parts it uses (tags.py, keyring.py, probe.py,
balances.py, tools.py are the others); the rules they share are functions in key_rules.py and rules.py.

Keys are encrypted with the `SecretBox` and digested for the exact-key search; no reply ever carries them
(except the root's key reveal, keyring.py). Each change writes the channel and rebuilds its abilities in
one transaction, then — committed — `ChannelTable.changed()` reloads this worker's routing table and tells
every other worker and node, so the change routes before the reply leaves (there is no periodic sync).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import IntegrityError

from core.enums import ChannelStatus
from core.multikey import MultiKeyMode, MultiKeyState
from models.channels import Channel, ChannelFilter, ChannelRepository
from models.db import Database
from models.routing import load_json
from server.channels.destination import KeyDestinations, require_key_holder
from server.channels.key_rules import (
    ALL_KEYS_DISABLED,
    KEYS_BACK,
    STATUS_REASONS,
    key_lines,
    keys_of,
    sealed,
    status_info,
    unique,
)
from server.channels.rules import COLLIDING, NAME_MAX, clean_fields, require_address
from server.channels.schemas import CatalogModel, ChannelView
from server.clock import Clock
from server.components.catalog import CATALOG
from server.components.channel_table import ChannelTable
from server.crypto import SecretBox
from server.errors import BadRequest, Conflict, NotFound
from server.web.pagination import Page

MODES = ("single", "batch", "multi_to_single")
KEY_MODES = ("replace", "append")
BATCH_MAX = 1000


def _multi_key_mode(value: str | None) -> MultiKeyMode | None:
    if value in (None, ""):
        return None
    if value not in tuple(MultiKeyMode):
        raise BadRequest("multi_key_mode: must be random or polling")
    return MultiKeyMode(value)


def status_filter(raw: str) -> tuple[int, ...]:
    """`enabled`/`1` → enabled channels, `disabled`/`0` → manually or automatically disabled, else all."""
    value = raw.strip().lower()
    if value in ("enabled", "1"):
        return (ChannelStatus.ENABLED,)
    if value in ("disabled", "0"):
        return (ChannelStatus.MANUALLY_DISABLED, ChannelStatus.AUTO_DISABLED)
    return ()


def models_catalog() -> list[CatalogModel]:
    """`GET /api/channel/models`: the built-in catalog."""
    return [CatalogModel.of(m) for m in CATALOG]


class ChannelCrud:
    """Create, update, read, list, search and delete channels."""

    def __init__(self, *, db: Database, channels: ChannelTable, box: SecretBox, destinations: KeyDestinations,
                 clock: Clock) -> None:
        self.db = db
        self.channels = channels
        self.box = box
        self.destinations = destinations
        self.clock = clock

    async def create_channels(self, *, mode: str, multi_key_mode: str | None, name_from_key: bool,
                              fields: dict[str, Any]) -> list[int]:
        """`POST /api/channel/` → the new ids, in key order for a batch."""
        if mode not in MODES:
            raise BadRequest("mode: must be single, batch or multi_to_single")
        key_mode = _multi_key_mode(multi_key_mode) or MultiKeyMode.RANDOM
        values = clean_fields(fields, creating=True)
        keys = key_lines(fields.get("key"))
        if not keys:
            raise BadRequest("key: is required")
        require_address(values["type"], values["base_url"])
        await self.destinations.check_base_url(values["base_url"])
        now = self.clock.now_s()
        values["created_time"] = now
        values["other_info"] = (status_info(STATUS_REASONS[values["status"]], now)
                                if values["status"] != ChannelStatus.ENABLED else "")
        drafts: list[tuple[dict[str, Any], list[str], MultiKeyState]] = []  # (values, keys, channel_info)
        if mode == "single":
            if len(keys) > 1:
                raise BadRequest("key: mode single takes one key; use batch or multi_to_single for several")
            drafts.append((values, keys, MultiKeyState.single()))
        elif mode == "batch":
            keys = unique(keys)
            if len(keys) > BATCH_MAX:
                raise BadRequest(f"key: at most {BATCH_MAX} keys in one batch")
            for key in keys:
                name = f"{values['name']}_{key[:8]}" if name_from_key else values["name"]
                if len(name) > NAME_MAX:
                    raise BadRequest(f"name: with the key prefix the name must be at most {NAME_MAX} "
                                     "characters")
                drafts.append(({**values, "name": name}, [key], MultiKeyState.single()))
        else:
            keys = unique(keys)
            drafts.append((values, keys, MultiKeyState.multi(len(keys), key_mode)))
        rows = [Channel(**draft, **sealed(self.box, draft_keys), channel_info=info.dump())
                for draft, draft_keys, info in drafts]
        try:
            async with self.db.transaction() as tx:
                repo = ChannelRepository(tx)
                ids = [await repo.add(row) for row in rows]
        except IntegrityError:
            raise BadRequest(COLLIDING) from None
        await self.channels.changed()
        return ids

    async def update_channel(self, channel_id: int, fields: dict[str, Any], *, key_mode: str | None,
                             multi_key_mode: str | None, actor_role: int) -> ChannelView:
        """`PUT /api/channel/`: only the fields present change; abilities follow → the channel. Changing where
        the key is sent needs root or the key itself (`require_key_holder`)."""
        if key_mode not in (None, "", *KEY_MODES):
            raise BadRequest("key_mode: must be replace or append")
        new_mode = _multi_key_mode(multi_key_mode)
        values = clean_fields(fields, creating=False)
        new_keys = key_lines(fields.get("key"))
        await self.destinations.check_base_url(values.get("base_url", ""))
        now = self.clock.now_s()
        try:
            async with self.db.transaction() as tx:
                repo = ChannelRepository(tx)
                channel = await repo.get_for_update(channel_id)
                if channel is None:
                    raise NotFound("channel not found")
                info = MultiKeyState.parse(channel.channel_info)
                multi = info.is_multi_key
                require_key_holder(actor_role, channel, values,
                                   key_reentered=bool(new_keys) and not (multi and key_mode == "append"))
                keys_changed = bool(new_keys) and multi
                if new_keys:
                    if multi:
                        keys = self._merged_keys(channel, info, new_keys, append=key_mode == "append")
                    elif len(new_keys) > 1:
                        raise BadRequest("key: this channel takes one key (it is not a multi-key channel)")
                    else:
                        keys = new_keys
                    values.update(sealed(self.box, keys))
                if multi and new_mode is not None:
                    info.mode = new_mode
                if multi and (keys_changed or new_mode is not None):
                    values["channel_info"] = info.dump()
                if "status" in values and values["status"] != channel.status:
                    values["other_info"] = status_info(STATUS_REASONS[values["status"]], now,
                                                        channel.other_info)
                elif (keys_changed and channel.status == ChannelStatus.AUTO_DISABLED
                      and load_json(channel.other_info).get("status_reason") == ALL_KEYS_DISABLED):
                    values["status"] = ChannelStatus.ENABLED  # enabled keys again: the channel serves again
                    values["other_info"] = status_info(KEYS_BACK, now, channel.other_info)
                for name, value in values.items():
                    setattr(channel, name, value)
                require_address(channel.type, channel.base_url)
                await repo.save(channel)
                view = ChannelView.of(channel)
        except IntegrityError:
            raise BadRequest(COLLIDING) from None
        await self.channels.changed()
        return view

    def _merged_keys(self, channel: Channel, info: MultiKeyState, new_keys: list[str], *,
                     append: bool) -> list[str]:
        """The keys of a multi-key channel after `replace` (statuses reset) or `append` (existing keys keep
        their statuses, new ones are enabled); updates `info` to match."""
        if not append:
            keys = unique(new_keys)
            info.replace_keys(len(keys))
            return keys
        try:
            current = keys_of(self.box, channel)
        except Conflict:
            raise Conflict("key: the stored keys cannot be decrypted with this SECRET_KEY; replace them "
                           "instead (key_mode replace)") from None
        keys = current + [k for k in unique(new_keys) if k not in current]
        info.append_keys(len(keys))
        return keys

    async def get_channel(self, channel_id: int) -> ChannelView:
        async with self.db.transaction() as tx:
            channel = await ChannelRepository(tx).get(channel_id)
        if channel is None:
            raise NotFound("channel not found")
        return ChannelView.of(channel)

    def search_filter(self, *, keyword: str = "", group: str = "", model: str = "", tag: str = "",
                      statuses: tuple[int, ...] = (), channel_type: int | None = None) -> ChannelFilter:
        """The filter of a search; a keyword that could be a whole key is also matched by its digest."""
        keys = key_lines(keyword)
        digest = self.box.digest("\n".join(keys)) if keys else ""
        return ChannelFilter(keyword=keyword, key_digest=digest, group=group, model=model, tag=tag,
                             statuses=statuses, type=channel_type)

    async def list_channels(self, page: Page, flt: ChannelFilter, *, id_sort: bool, tag_mode: bool,
                            type_counts: bool) -> dict[str, Any]:
        """A page of channels (or, in tag mode, of tags with their channels) → the page payload, with
        `type_counts` when asked."""
        async with self.db.transaction() as tx:
            repo = ChannelRepository(tx)
            if tag_mode:
                rows, total = await repo.tag_page(flt, offset=page.offset, limit=page.size, id_sort=id_sort)
            else:
                rows, total = await repo.page(flt, offset=page.offset, limit=page.size, id_sort=id_sort)
            counts = await repo.type_counts(flt) if type_counts else None
        payload = page.payload([ChannelView.of(c) for c in rows], total)
        if counts is not None:
            payload["type_counts"] = {str(t): n for t, n in sorted(counts.items())}
        return payload

    async def delete_channel(self, channel_id: int) -> None:
        async with self.db.transaction() as tx:
            deleted = await ChannelRepository(tx).delete(channel_id)
        if not deleted:
            raise NotFound("channel not found")
        await self.channels.changed()

    def enabled_models(self) -> list[str]:
        return self.channels.enabled_models()
