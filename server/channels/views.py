"""How a channel is shown (docs/API.md#channel-fields): every column but the key (`key` is always `""`; the
keys are read back only through the root "get key" route), `channel_info` as an object of its read-only
multi-key fields, `other_info` as its JSON text. The keys of a multi-key channel are listed to admins only
as previews (`key_preview`: at most the first and last four characters, never more than half the key)."""

from __future__ import annotations

from typing import Any

from core.multikey import MultiKeyState
from models.channels import Channel

MASK = "**********"


def key_preview(key: str) -> str:
    """`abcd**********wxyz` for a long key; a short one shows less (a quarter at each end at most)."""
    shown = min(4, len(key) // 4)
    return f"{key[:shown]}{MASK}{key[-shown:]}" if shown else MASK


def key_status_view(info: MultiKeyState, index: int, key: str) -> dict[str, Any]:
    """One key of a multi-key channel, as the key management lists it."""
    return {"index": index, "status": info.status(index), "disabled_time": info.disabled_at(index),
            "reason": info.reason(index), "key_preview": key_preview(key)}


def channel_view(channel: Channel) -> dict[str, Any]:
    return {
        "id": channel.id, "type": channel.type, "name": channel.name, "key": "", "status": channel.status,
        "models": channel.models, "group": channel.group, "priority": channel.priority,
        "weight": channel.weight, "base_url": channel.base_url, "test_model": channel.test_model,
        "openai_organization": channel.openai_organization, "other": channel.other, "tag": channel.tag,
        "remark": channel.remark, "model_mapping": channel.model_mapping,
        "status_code_mapping": channel.status_code_mapping, "setting": channel.setting,
        "param_override": channel.param_override, "header_override": channel.header_override,
        "settings": channel.settings, "auto_ban": channel.auto_ban, "balance": float(channel.balance or 0),
        "balance_updated_time": channel.balance_updated_time, "used_quota": channel.used_quota,
        "created_time": channel.created_time, "test_time": channel.test_time,
        "response_time": channel.response_time, "other_info": channel.other_info,
        "channel_info": MultiKeyState.parse(channel.channel_info).view(),
    }
