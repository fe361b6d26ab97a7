"""Every status and type number of the domain, as enums.

They are `IntEnum`s (top-up and credit statuses, which are words, `StrEnum`s) so that the database
columns and the JSON replies keep the plain integers new-api clients know: a member compares equal to its
number and serialises as it (`json.dumps(KeyStatus.DISABLED)` is `2`). Code compares and writes members,
never bare numbers; a value read back from SQL or a cache is a plain `int`, which compares equal all the
same.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum


class UserStatus(IntEnum):
    ENABLED = 1
    DISABLED = 2


class KeyStatus(IntEnum):
    """An API key. Expired and exhausted are set by the gateway when it finds them so; an admin or the
    owner sets only enabled or disabled."""

    ENABLED = 1
    DISABLED = 2
    EXPIRED = 3
    EXHAUSTED = 4


class ChannelStatus(IntEnum):
    """A channel, and each key of a multi-key channel (the same three values). `AUTO_DISABLED` is set
    only by the system (a failing upstream, or no enabled key left)."""

    ENABLED = 1
    MANUALLY_DISABLED = 2
    AUTO_DISABLED = 3


class ChannelType(IntEnum):
    """The new-api channel type numbers the code itself names (`server/components/catalog.py` lists every
    number a channel may have, with its display name). The served ones are the keys of
    `server/upstream/providers/__init__.py` `PROVIDERS`."""

    OPENAI = 1
    AZURE = 3
    CUSTOM = 8
    ANTHROPIC = 14
    OPENROUTER = 20
    GEMINI = 24
    MOONSHOT = 25
    SILICONFLOW = 40
    DEEPSEEK = 43


class LogType(IntEnum):
    """A log row. `UNKNOWN` is never stored; as a filter it means every type."""

    UNKNOWN = 0
    TOPUP = 1
    CONSUME = 2
    MANAGE = 3
    SYSTEM = 4
    ERROR = 5
    REFUND = 6


class RedemptionStatus(IntEnum):
    ENABLED = 1
    DISABLED = 2
    USED = 3


class TopUpStatus(StrEnum):
    """A top-up order; stored and shown as the word."""

    PENDING = "pending"
    SUCCESS = "success"
    FAILED = "failed"
    EXPIRED = "expired"
    REVIEW = "review"


class CreditStatus(StrEnum):
    """A credit decided in SQL (`pending_credits`, server/credits.py); stored as the word."""

    PENDING = "pending"  # the replay delivers it until SQL has it
    FAILED = "failed"  # the quota engine refuses it for good: kept, with its reason, for an admin


class ChannelRun(StrEnum):
    """A run over every channel whose progress any worker can tell (`GET /api/channel/progress`)."""

    TEST = "test"  # test every channel, in the background
    BALANCE = "balance"  # update every balance


class PriceSource(StrEnum):
    """Where a model's price comes from, first match wins (docs/api/gateway.md#prices)."""

    MODEL_PRICE = "model_price"  # the admin's `ModelPrice`: dollars per call
    MODEL_RATIO = "model_ratio"  # the admin's `ModelRatio`: per token
    FREE = "free"  # a free built-in family (moderation)
    BUILTIN = "builtin"  # Tollway's built-in ratio (the Gemini speech models)
    SELF_USE = "self_use"  # no price, but `SelfUseModeEnabled` lets it through at ratio 37.5
    NONE = "none"  # no price: a call is refused (`model_price_error`)
