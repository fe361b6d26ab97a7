"""Request and reply schemas of the key reveal and the multi-key management (server/channels/keyring.py,
`ChannelKeys`).

The keys of a multi-key channel are listed to admins only as previews (`key_preview`: at most the first
and last four characters, never more than half the key).
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import Field

from core.enums import ChannelStatus
from core.multikey import MultiKeyState
from server.channels.rules import KEY_ACTIONS
from server.channels.schemas import OneOf
from server.web.no_store import Secret
from server.web.schema import ID_MAX, Int64, IntRule, Reply, Schema


class KeyReveal(Reply):
    """A channel's stored key, decrypted for the root who asked."""

    key: Secret = Field(description="the channel's key; a multi-key channel's keys one per line")

    @classmethod
    def of(cls, key: str) -> KeyReveal:
        return cls(key=key)


class KeyManage(Schema):
    channel_id: Annotated[int, IntRule(1, ID_MAX)] = Field(examples=[1])
    action: Annotated[str, OneOf(KEY_ACTIONS)]
    key_index: Annotated[int, IntRule(0, ID_MAX)] | None = Field(
        None, description="the key's position, from 0 (disable_key, enable_key, delete_key)")
    page: Int64 | None = Field(None, description="get_key_status: page, from 1")
    page_size: Int64 | None = Field(None, description="get_key_status: keys per page, 1–100 (default 50)")
    status: Annotated[int, IntRule(1, 3)] | None = Field(None, description="get_key_status: only keys with "
                                                                          "this status")


MASK = "**********"
KEY_PAGE_SIZE, KEY_PAGE_SIZE_MAX = 50, 100


def key_preview(key: str) -> str:
    """`abcd**********wxyz` for a long key; a short one shows less (a quarter at each end at most)."""
    shown = min(4, len(key) // 4)
    return f"{key[:shown]}{MASK}{key[-shown:]}" if shown else MASK


class KeyStatusItem(Reply):
    index: int
    status: int
    disabled_time: int
    reason: str
    key_preview: str = Field(description="the key masked, e.g. abcd**********wxyz")

    @classmethod
    def of(cls, info: MultiKeyState, index: int, key: str) -> KeyStatusItem:
        """One key of a multi-key channel, as the key management lists it."""
        return cls(index=index, status=info.status(index), disabled_time=info.disabled_at(index),
                   reason=info.reason(index), key_preview=key_preview(key))


class KeyStatusPage(Reply):
    keys: list[KeyStatusItem]
    total: int
    page: int
    page_size: int
    total_pages: int
    enabled_count: int
    manual_disabled_count: int
    auto_disabled_count: int

    @classmethod
    def of(cls, info: MultiKeyState, keys: list[str], *, page: int | None, page_size: int | None,
           status: int | None) -> KeyStatusPage:
        """`get_key_status`: one page of the keys (those with `status`, if given) and the counts of all."""
        size = KEY_PAGE_SIZE if page_size is None or page_size < 1 else min(page_size, KEY_PAGE_SIZE_MAX)
        number = 1 if page is None or page < 1 else page
        listed = [i for i in range(len(keys)) if status is None or info.status(i) == status]
        start = (number - 1) * size
        return cls(
            keys=[KeyStatusItem.of(info, i, keys[i]) for i in listed[start:start + size]],
            total=len(listed), page=number, page_size=size, total_pages=math.ceil(len(listed) / size),
            enabled_count=info.count(ChannelStatus.ENABLED),
            manual_disabled_count=info.count(ChannelStatus.MANUALLY_DISABLED),
            auto_disabled_count=info.count(ChannelStatus.AUTO_DISABLED),
        )
