"""The multi-key state of a channel: the one reader and writer of its `channel_info` JSON.

A multi-key channel holds several upstream keys (one per line of its key text) and, in `channel_info`,
new-api's fields about them: `is_multi_key`, `multi_key_size`, `multi_key_status_list` (`{index: status}`,
indexes as strings, only keys whose status is not enabled listed), `multi_key_mode` (`random` | `polling`),
`multi_key_polling_index`, `multi_key_disabled_reason` and `multi_key_disabled_time` (`{index: …}`).

Creating a channel, editing its keys, showing it, loading it into the routing table, deciding whether it
can serve (its abilities' `enabled`), disabling one of its keys and the admin's key management (set a
key's status, delete keys and re-index the rest) all go through `MultiKeyState`, so the format is
interpreted in one place. `parse` never fails: damaged text or entries of the wrong type read as
absent (a key without a status is enabled); fields it does not know are kept as they were.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from core.enums import ChannelStatus

REASON_MAX = 255
_KNOWN = ("is_multi_key", "multi_key_size", "multi_key_status_list", "multi_key_mode",
          "multi_key_polling_index", "multi_key_disabled_reason", "multi_key_disabled_time")


class MultiKeyMode(StrEnum):
    """How a call picks among the enabled keys: at random, or in turn (a counter shared by all workers)."""

    RANDOM = "random"
    POLLING = "polling"


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return default


def _indexed(value: Any) -> dict[int, Any]:
    """`{"3": x}` → `{3: x}`; entries whose key is not an index are dropped."""
    if not isinstance(value, dict):
        return {}
    return {int(k): v for k, v in value.items() if isinstance(k, str) and k.isascii() and k.isdigit()}


@dataclass(slots=True)
class MultiKeyState:
    is_multi_key: bool = False
    size: int = 0
    statuses: dict[int, int] = field(default_factory=dict)  # index → status, enabled keys usually absent
    mode: str = MultiKeyMode.RANDOM
    polling_index: int = 0
    disabled_reason: dict[int, str] = field(default_factory=dict)
    disabled_time: dict[int, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # fields this version does not know, kept

    # ---- reading and writing the column -------------------------------------------------------------

    @classmethod
    def parse(cls, text: str | None) -> MultiKeyState:
        try:
            info = json.loads(text) if text else {}
        except (ValueError, RecursionError):
            info = {}
        if not isinstance(info, dict):
            info = {}
        return cls(
            is_multi_key=bool(info.get("is_multi_key")),
            size=max(0, _int(info.get("multi_key_size"))),
            statuses={i: s for i, v in _indexed(info.get("multi_key_status_list")).items()
                      if (s := _int(v, -1)) >= 0},
            mode=str(info.get("multi_key_mode") or MultiKeyMode.RANDOM),
            polling_index=_int(info.get("multi_key_polling_index")),
            disabled_reason={i: str(v) for i, v in _indexed(info.get("multi_key_disabled_reason")).items()},
            disabled_time={i: t for i, v in _indexed(info.get("multi_key_disabled_time")).items()
                           if (t := _int(v, -1)) >= 0},
            extra={k: v for k, v in info.items() if k not in _KNOWN},
        )

    @classmethod
    def single(cls) -> MultiKeyState:
        """A channel with one key."""
        return cls()

    @classmethod
    def multi(cls, size: int, mode: str) -> MultiKeyState:
        """A new multi-key channel: `size` keys, all enabled."""
        return cls(is_multi_key=True, size=size, mode=mode)

    def dump(self) -> str:
        """The `channel_info` text."""
        return json.dumps({
            "is_multi_key": self.is_multi_key, "multi_key_size": self.size,
            "multi_key_status_list": {str(i): int(s) for i, s in sorted(self.statuses.items())},
            "multi_key_mode": str(self.mode), "multi_key_polling_index": self.polling_index,
            "multi_key_disabled_reason": {str(i): r for i, r in sorted(self.disabled_reason.items())},
            "multi_key_disabled_time": {str(i): t for i, t in sorted(self.disabled_time.items())},
            **self.extra,
        }, separators=(",", ":"), ensure_ascii=False)

    def view(self) -> dict[str, Any]:
        """The read-only fields a channel's reply shows."""
        return {
            "is_multi_key": self.is_multi_key, "multi_key_size": self.size,
            "multi_key_status_list": {str(i): int(s) for i, s in self.statuses.items()},
            "multi_key_mode": str(self.mode), "multi_key_polling_index": self.polling_index,
        }

    # ---- key statuses -------------------------------------------------------------------------------

    def status(self, index: int) -> int:
        return self.statuses.get(index, ChannelStatus.ENABLED)

    def key_statuses(self, count: int) -> list[int]:
        """The statuses of keys 0 … count − 1."""
        return [self.status(i) for i in range(count)]

    def enabled_indices(self) -> list[int]:
        return [i for i in range(self.size) if self.status(i) == ChannelStatus.ENABLED]

    def has_enabled_key(self) -> bool:
        """A single-key channel always has its key; a multi-key one needs an enabled key."""
        return not self.is_multi_key or any(self.status(i) == ChannelStatus.ENABLED for i in range(self.size))

    def disable(self, index: int, reason: str, now: int) -> bool:
        """Key `index` → automatically disabled, with its reason and time; False (nothing changed) when
        there is no such key or it is not enabled."""
        if not 0 <= index < self.size or self.status(index) != ChannelStatus.ENABLED:
            return False
        self.statuses[index] = ChannelStatus.AUTO_DISABLED
        self.disabled_reason[index] = reason[:REASON_MAX]
        self.disabled_time[index] = now
        return True

    # ---- key edits ----------------------------------------------------------------------------------

    def replace_keys(self, size: int) -> None:
        """A new set of `size` keys: every status and the polling position start over."""
        self.size = size
        self.statuses, self.disabled_reason, self.disabled_time = {}, {}, {}
        self.polling_index = 0

    def append_keys(self, size: int) -> None:
        """Keys added after the existing ones (which keep their statuses): `size` keys in all."""
        self.size = size

    # ---- the admin's key management -----------------------------------------------------------------

    def reason(self, index: int) -> str:
        return self.disabled_reason.get(index, "")

    def disabled_at(self, index: int) -> int:
        return self.disabled_time.get(index, 0)

    def set_status(self, index: int, status: int, reason: str, now: int) -> bool:
        """Key `index` → `status`: enabled clears its reason and time, disabled records them. False
        (nothing changed) when the key already has that status or there is no such key."""
        if not 0 <= index < self.size or self.status(index) == status:
            return False
        if status == ChannelStatus.ENABLED:
            self.statuses.pop(index, None)
            self.disabled_reason.pop(index, None)
            self.disabled_time.pop(index, None)
        else:
            self.statuses[index] = status
            self.disabled_reason[index] = reason[:REASON_MAX]
            self.disabled_time[index] = now
        return True

    def delete_keys(self, indices: Collection[int]) -> None:
        """Remove the keys `indices`; the others move down to close the gaps and keep their status,
        reason and time. The polling position starts over if it pointed past the end."""
        gone = {i for i in indices if 0 <= i < self.size}
        kept = [i for i in range(self.size) if i not in gone]
        moved = {old: new for new, old in enumerate(kept)}
        self.statuses = {moved[i]: s for i, s in self.statuses.items() if i in moved}
        self.disabled_reason = {moved[i]: r for i, r in self.disabled_reason.items() if i in moved}
        self.disabled_time = {moved[i]: t for i, t in self.disabled_time.items() if i in moved}
        self.size = len(kept)
        if self.polling_index >= self.size:
            self.polling_index = 0

    def count(self, status: int) -> int:
        """How many keys have `status`."""
        return sum(1 for i in range(self.size) if self.status(i) == status)
