"""Which groups a user may use: one rule for the gateway (a key's group) and the management routes (the
group lists and model lists a user sees).

A group is usable when it exists (a `GroupRatio` key) and is either listed in `UserUsableGroups` or the
user's own group. `auto` is not a group of its own: it stands for the usable groups of `AutoGroups`.
"""

from __future__ import annotations

from core.settings import Settings

AUTO_GROUP = "auto"


def group_usable(settings: Settings, own_group: str, group: str) -> bool:
    listed = group in settings.user_usable_groups or group == own_group
    return listed and group in settings.group_ratio


def usable_groups(settings: Settings, own_group: str) -> list[str]:
    """The real groups a user may use, in `GroupRatio` order (never `auto`)."""
    return [g for g in settings.group_ratio if group_usable(settings, own_group, g)]


def usable_auto_groups(settings: Settings, own_group: str) -> list[str]:
    """The `AutoGroups` entries `auto` may route a user's call to, in their order."""
    return [g for g in settings.auto_groups if group_usable(settings, own_group, g)]
