"""The routing table of one worker: every channel and its abilities, held in memory so that picking a
channel for a model call reads no SQL.

It is loaded at start and reloaded whenever the `channels` version counter moves (every admin change and
every automatic disable bumps it right after its commit, reloads here and broadcasts a hint, on which the
other workers read the counter: backend/versions.py), and after every Redis (re)subscription, since a
broadcast may have been missed. A worker that learns a newer version from a model call's reservation
reloads before it picks a channel (backend/versions.py), so a change is routable on every worker from the
first request after the writer answered, without a periodic sync.

Selection (docs/api/channels.md#selection-and-retries): candidates = enabled abilities for (group, model) on
channels of the served types, minus the channels already tried in this request; the highest priority tier
among them; a weighted pick among its weight > 0 channels (uniform when every weight is 0, so weight-0
channels serve only after their tier's weighted ones failed). Then the key (`choose_key`: random or polling
among the enabled keys of a multi-key channel) and the model sent upstream (`map_model`); a channel test makes
the same two choices.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidTag

from backend.base import KeyValue
from backend.versions import CHANNELS, VersionTracker
from core.enums import ChannelStatus
from core.multikey import MultiKeyMode, MultiKeyState
from models.db import Database
from models.routing import auto_disable_channel, auto_disable_key, load_json, load_routing
from server import metrics
from server.crypto import SecretBox
from server.metrics import DisableReason

log = logging.getLogger("tollway.relay.channels")


@dataclass(slots=True)
class RoutedChannel:
    id: int
    type: int
    name: str
    status: int
    base_url: str
    keys: list[str]
    key_status: list[int]  # a ChannelStatus per key
    multi_key: bool
    multi_key_mode: str  # a MultiKeyMode
    model_mapping: dict[str, Any]
    status_code_mapping: dict[str, Any]
    header_override: dict[str, Any]
    auto_ban: bool
    created_time: int
    stream_include_usage: bool = True  # `setting`: a streamed OpenAI-format call asks for the usage chunk

    def enabled_keys(self) -> list[int]:
        return [i for i, s in enumerate(self.key_status) if s == ChannelStatus.ENABLED]


async def choose_key(channel: RoutedChannel, backend: KeyValue) -> int:
    """Index of the key to use: the only one, or among the enabled keys at random / by a shared counter."""
    enabled = channel.enabled_keys()
    if not channel.multi_key or len(enabled) == 1:
        return enabled[0]
    if channel.multi_key_mode == MultiKeyMode.POLLING:
        n = await backend.incr(f"poll:channel:{channel.id}", 7 * 86_400)
        return enabled[(n - 1) % len(enabled)]
    return random.choice(enabled)


def map_model(mapping: Mapping[str, Any], model: str) -> str:
    """Follow `model_mapping` from the requested name (chains followed; a cycle stops where it closes)."""
    seen = {model}
    current = model
    while isinstance(mapping.get(current), str) and mapping[current] and mapping[current] not in seen:
        current = mapping[current]
        seen.add(current)
    return current


@dataclass(frozen=True, slots=True)
class Route:
    channel_id: int
    priority: int
    weight: int
    enabled: bool


@dataclass
class _Snapshot:
    channels: dict[int, RoutedChannel] = field(default_factory=dict)
    routes: dict[tuple[str, str], list[Route]] = field(default_factory=dict)


class ChannelTable:
    def __init__(self, db: Database, box: SecretBox, clock_s: Any, versions: VersionTracker) -> None:
        self.db = db
        self.versions = versions
        versions.register(CHANNELS, self.reload)
        self.box = box
        self._now = clock_s
        self._snap = _Snapshot()
        self._lock = asyncio.Lock()

    # ---- loading ------------------------------------------------------------------------------------

    async def reload(self) -> None:
        async with self._lock:
            async with self.db.transaction() as tx:
                rows, abilities = await load_routing(tx)
            snap = _Snapshot()
            for row in rows:
                snap.channels[row.id] = self.routed(row)
            for ab in abilities:
                channel = snap.channels.get(ab.channel_id)
                if channel is None:
                    continue
                snap.routes.setdefault((ab.group, ab.model), []).append(
                    Route(ab.channel_id, int(ab.priority or 0), int(ab.weight or 0), bool(ab.enabled)))
            self._snap = snap

    def routed(self, row: Any) -> RoutedChannel:
        """A channel row as routing sees it (keys decrypted, JSON fields parsed); also what a channel test
        uses, so that it picks the key and maps the model exactly as a call would."""
        try:
            text = self.box.decrypt(row.key_encrypted) if row.key_encrypted else ""
        except (ValueError, InvalidTag):  # encrypted under another SECRET_KEY: unusable, never routed
            log.error("channel %s: its key cannot be decrypted with this SECRET_KEY", row.id)
            text = ""
        keys = [k.strip() for k in text.split("\n") if k.strip()]
        multikey = MultiKeyState.parse(row.channel_info)
        multi = multikey.is_multi_key and len(keys) > 1
        key_status: list[int] = [ChannelStatus.ENABLED] * min(len(keys), 1)  # one key: the channel's status
        if multi:
            key_status = multikey.key_statuses(len(keys))
        return RoutedChannel(
            id=row.id, type=int(row.type), name=row.name, status=int(row.status),
            base_url=(row.base_url or "").rstrip("/"), keys=keys if multi else keys[:1],
            key_status=key_status, multi_key=multi,
            multi_key_mode=multikey.mode,
            model_mapping=load_json(row.model_mapping),
            status_code_mapping=load_json(row.status_code_mapping),
            header_override=load_json(row.header_override), auto_ban=int(row.auto_ban or 0) == 1,
            created_time=int(row.created_time or 0),
            stream_include_usage=load_json(row.setting).get("stream_include_usage") is not False,
        )

    async def changed(self) -> None:
        """After a committed channel change: bump the version, reload here, tell every worker and node."""
        await self.versions.changed(CHANNELS)

    # ---- reading ------------------------------------------------------------------------------------

    def get(self, channel_id: int) -> RoutedChannel | None:
        return self._snap.channels.get(channel_id)

    def name(self, channel_id: int) -> str:
        channel = self._snap.channels.get(channel_id)
        return channel.name if channel is not None else ""

    def offered(self, group: str, model: str, types: Collection[int]) -> bool:
        """An ability (any status) for (group, model) on a channel of a served type."""
        snap = self._snap
        return any((c := snap.channels.get(r.channel_id)) is not None and c.type in types
                   for r in snap.routes.get((group, model), ()))

    def serving(self, group: str, model: str, types: Collection[int], exclude: Collection[int] = ()
                ) -> list[tuple[RoutedChannel, Route]]:
        snap = self._snap
        out = []
        for r in snap.routes.get((group, model), ()):
            if not r.enabled or r.channel_id in exclude:
                continue
            c = snap.channels.get(r.channel_id)
            if c is None or c.status != ChannelStatus.ENABLED or c.type not in types or not c.enabled_keys():
                continue
            out.append((c, r))
        return out

    def pick(self, group: str, model: str, types: Collection[int], exclude: Collection[int] = (),
             rng: random.Random | None = None) -> RoutedChannel | None:
        candidates = self.serving(group, model, types, exclude)
        if not candidates:
            return None
        top = max(r.priority for _, r in candidates)
        tier = [(c, r) for c, r in candidates if r.priority == top]
        weighted = [(c, r) for c, r in tier if r.weight > 0]
        choose = rng or random
        if not weighted:
            return choose.choice(tier)[0]
        total = sum(r.weight for _, r in weighted)
        point = choose.uniform(0, total)
        for c, r in weighted:
            point -= r.weight
            if point <= 0:
                return c
        return weighted[-1][0]

    def models(self, groups: Collection[str], types: Collection[int]) -> dict[str, list[RoutedChannel]]:
        """Model → the enabled channels serving it in any of `groups` (for the model lists)."""
        snap = self._snap
        out: dict[str, list[RoutedChannel]] = {}
        for (group, model), routes in snap.routes.items():
            if group not in groups:
                continue
            for r in routes:
                c = snap.channels.get(r.channel_id)
                if r.enabled and c is not None and c.status == ChannelStatus.ENABLED and c.type in types:
                    out.setdefault(model, []).append(c)
        return out

    def served_models(self, groups: Collection[str]) -> list[str]:
        """Sorted distinct models some enabled channel serves in any of `groups` (whatever its type)."""
        snap = self._snap
        return sorted({m for (g, m), routes in snap.routes.items()
                       if g in groups and any(r.enabled and (c := snap.channels.get(r.channel_id)) is not None
                                              and c.status == ChannelStatus.ENABLED for r in routes)})

    def abilities(self) -> dict[str, list[tuple[str, RoutedChannel, bool]]]:
        """Every model with an ability, whatever its status or its channel's: (group, channel, whether the
        ability is enabled) for each (the admin's price list)."""
        snap = self._snap
        out: dict[str, list[tuple[str, RoutedChannel, bool]]] = {}
        for (group, model), routes in snap.routes.items():
            for r in routes:
                c = snap.channels.get(r.channel_id)
                if c is not None:
                    out.setdefault(model, []).append((group, c, r.enabled))
        return out

    def enabled_models(self) -> list[str]:
        snap = self._snap
        return sorted({m for (_g, m), routes in snap.routes.items()
                       if any(r.enabled and (c := snap.channels.get(r.channel_id)) is not None
                              and c.status == ChannelStatus.ENABLED for r in routes)})

    # ---- automatic disable --------------------------------------------------------------------------

    async def auto_disable(self, channel: RoutedChannel, key_index: int | None, reason: str, *,
                           why: DisableReason) -> None:
        """Take the channel (or one key of a multi-key channel) out of routing here at once, then persist
        the status with its reason and tell every worker and node. Counted (by `why`) only when this
        call changed the stored status: a channel two workers disable at once is counted once."""
        now = int(self._now())
        if channel.multi_key and key_index is not None:
            if 0 <= key_index < len(channel.key_status):
                channel.key_status[key_index] = ChannelStatus.AUTO_DISABLED
            async with self.db.transaction() as tx:
                changed, _ = await auto_disable_key(tx, channel.id, key_index, reason, now)
        else:
            channel.status = ChannelStatus.AUTO_DISABLED
            async with self.db.transaction() as tx:
                changed = await auto_disable_channel(tx, channel.id, reason, now)
        if changed:
            metrics.auto_disabled(why)
            log.warning("channel %d%s auto-disabled: %s", channel.id,
                        f" key #{key_index}" if channel.multi_key and key_index is not None else "", reason)
            await self.changed()
