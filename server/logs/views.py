"""How a log row is shown (docs/API.md#logs): the admin view, with `channel_name` and the whole `other`,
and the user-facing view, sanitized (`channel` 0, no `channel_name`, and the row's position on the page as
`id`). The internal `ref` column is never shown.

A user's `other` keeps only the fields in `USER_OTHER_FIELDS` (an allow-list: the price ratios, timings,
token split and model mapping of their own call). Channel ids (`channels_tried`), `admin_info` and any
field added later stay in admin views until it is added here on purpose.

`other` is always a JSON object as a string, or `""`; a stored value that is not an object shows as `""`.
"""

from __future__ import annotations

import json
from typing import Any

from models.logs import Log

USER_OTHER_FIELDS = frozenset({
    "model_ratio", "group_ratio", "completion_ratio", "model_price", "cache_tokens", "cache_ratio",
    "user_group_ratio", "frt", "is_model_mapped", "upstream_model_name", "request_path",
    "audio_output_tokens", "text_output_tokens", "stream_interrupted",
})


def _other_object(raw: str) -> dict[str, Any] | None:
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _base(row: Log) -> dict[str, Any]:
    return {
        "id": row.id, "user_id": row.user_id, "created_at": row.created_at, "type": row.type,
        "content": row.content, "username": row.username, "token_name": row.token_name,
        "model_name": row.model_name, "quota": row.quota, "prompt_tokens": row.prompt_tokens,
        "completion_tokens": row.completion_tokens, "use_time": row.use_time,
        "is_stream": bool(row.is_stream),
        "channel": row.channel, "token_id": row.token_id, "group": row.group, "ip": row.ip,
        "request_id": row.request_id,
    }


def admin_view(row: Log, channel_name: str) -> dict[str, Any]:
    view = _base(row)
    view["channel_name"] = channel_name
    view["other"] = row.other if _other_object(row.other) is not None else ""
    return view


def self_view(row: Log, position: int) -> dict[str, Any]:
    """The row as its owner sees it; `position` is offset + index + 1 on the page."""
    view = _base(row)
    view["id"] = position
    view["channel"] = 0
    other = _other_object(row.other)
    if other is None:
        view["other"] = ""
    else:
        shown = {name: value for name, value in other.items() if name in USER_OTHER_FIELDS}
        view["other"] = json.dumps(shown, separators=(",", ":"), ensure_ascii=False)
    return view
