"""`LogEntry`: the one declaration of what a writer of a `logs` row supplies (docs/api/logs.md#logs).

Why: a balance change carries its log row with it through the quota engine (`quota.types.Entry.log`, a
plain mapping: `quota/` imports nothing of ours, so it keeps carrying an opaque mapping, JSON in the Redis
stream and in `pending_credits`), and the quota sync writes it in SQL with the counters
(`models/sync_sql.py` `log_values`). Every writer — the consume log of a settled call
(server/relay/usage_log.py), the top-ups, payments, redemptions, invitation rewards and an admin's quota
edit — builds a `LogEntry` with named, typed fields and hands the engine `to_log()`; the sync reads the
mapping back with `read_log`, each field missing at the default declared here. The error log of a failed
call (server/relay/failures.py) goes around the engine, straight to the worker's error-log buffer, as
`row()`.

The carried mapping is the format stored in the Redis stream and in `pending_credits` (entries written by
an older version are read the same way): the keys are the column names, `other` a JSON object or absent,
and `quota` absent means the entry's own amount. Who the row is about (`user_id`, `token_id`, `channel`)
is the quota entry's for a carried row, so `to_log()` leaves them out; only `row()` has them.

A `NamedTuple` rather than a frozen dataclass: as immutable and as typed, with no instance dict, and built
in one step, where a frozen dataclass's `__init__` sets each field through `object.__setattr__` — a cost
the consume log of every model call would pay.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from core.enums import LogType
from core.identity import Principal


class LogEntry(NamedTuple):
    """The caller-supplied fields of a `logs` row, in the table's column order (`id`, `ref` and
    `entry_id` are the writer's machinery's). `other` is the row's JSON object (None: no `other`, stored
    as ""); `quota` None is the amount of the quota entry that carries the row (0 for a row written
    directly); `user_id`, `token_id` and `channel` are set only where no quota entry supplies them."""

    type: LogType
    created_at: int
    content: str = ""
    username: str = ""
    token_name: str = ""
    model_name: str = ""
    group: str = ""
    ip: str = ""
    request_id: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    use_time: int = 0
    is_stream: bool = False
    other: Mapping[str, Any] | None = None
    user_id: int = 0
    token_id: int = 0
    channel: int = 0
    quota: int | None = None

    def to_log(self) -> dict[str, Any]:
        """The mapping that travels with a quota entry (`Entry.log`): every field but the three ids,
        `other` and `quota` only when set."""
        log = {"type": self.type, "created_at": self.created_at, "content": self.content,
               "username": self.username, "token_name": self.token_name, "model_name": self.model_name,
               "group": self.group, "ip": self.ip, "request_id": self.request_id,
               "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
               "use_time": self.use_time, "is_stream": self.is_stream}
        if self.other is not None:
            log["other"] = self.other
        if self.quota is not None:
            log["quota"] = self.quota
        return log

    def row(self) -> dict[str, Any]:
        """Every column of the row but `id`, `ref` and `entry_id` (`other` still a mapping or None;
        `quota` 0 when unset), for a writer that goes around the quota engine."""
        row = self._asdict()
        row["quota"] = self.quota or 0
        return row

    @staticmethod
    def read_log(log: Mapping[str, Any], *, created_at: int, quota: int) -> list[Any]:
        """A carried mapping's fields in declaration order, `type` … `other`, then `quota` as an int; a
        field missing reads as its declared default (`other`: None), `type` as a consume log, and
        `created_at` and `quota` as the given values (the sync's time, the entry's amount). The ids are
        not read: the quota entry has them."""
        get = log.get
        return [get("type", LogType.CONSUME), get("created_at", created_at), *map(get, _NAMES, _DEFAULTS),
                int(get("quota", quota))]


_NAMES = tuple(name for name in LogEntry._fields
               if name not in ("type", "created_at", "user_id", "token_id", "channel", "quota"))
"""`content` … `other`: the fields `read_log` reads with their declared defaults."""
_DEFAULTS = tuple(LogEntry._field_defaults[name] for name in _NAMES)


def admin_info(actor: Principal) -> dict[str, Any]:
    """The `other` of a log an admin's action writes: who did it."""
    return {"admin_info": {"admin_id": actor.id, "admin_username": actor.user.username}}
