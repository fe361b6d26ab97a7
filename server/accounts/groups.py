"""The groups a user may use and the models those groups offer, and the admin's list of group names.

Answered from the options snapshot and the routing table (`ChannelTable`), never from SQL. The rule of
which group is usable is `core.groups`, the same one the gateway applies to an API key's group.
"""

from __future__ import annotations

from core.groups import AUTO_GROUP, usable_auto_groups, usable_groups
from core.identity import Principal
from server.accounts.schemas import GroupInfo
from server.components.catalog import capabilities
from server.components.channel_table import ChannelTable
from server.components.options import Options


class GroupService:
    """`GET /api/group/`, `/api/user/self/groups` (`/api/user/groups`) and `/api/user/models`."""

    def __init__(self, *, options: Options, channels: ChannelTable) -> None:
        self.options = options
        self.channels = channels

    def group_names(self) -> list[str]:
        return sorted(self.options.settings.group_ratio)

    def user_groups(self, principal: Principal) -> dict[str, GroupInfo]:
        settings = self.options.settings
        own = principal.user.group
        out = {g: GroupInfo.of(ratio=settings.group_ratio[g], desc=settings.user_usable_groups.get(g, g))
               for g in usable_groups(settings, own)}
        if usable_auto_groups(settings, own):
            out[AUTO_GROUP] = GroupInfo.of(
                ratio=AUTO_GROUP, desc=settings.user_usable_groups.get(AUTO_GROUP, "the usable AutoGroups"))
        return out

    def user_models(self, principal: Principal, capability: str = "") -> list[str]:
        """The models `principal` may call; with `capability`, only those that have it (the catalog's
        capabilities with the option `ModelCapabilities` on top, as the gateway decides)."""
        settings = self.options.settings
        own = principal.user.group
        groups = set(usable_groups(settings, own)) | set(usable_auto_groups(settings, own))
        models = self.channels.served_models(groups)
        if not capability:
            return models
        return [m for m in models if capabilities(m, settings.model_capabilities).get(capability, False)]
