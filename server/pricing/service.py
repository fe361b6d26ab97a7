"""The price list: every model a channel offers with its effective price, as the gateway computes it
(docs/api/gateway.md#the-price-list), and root's edit of one model's price.

The price is `server/components/pricing.py`'s, the one the gateway bills by: the admin's `ModelPrice`,
else the admin's `ModelRatio`, else a built-in, else none (a call is refused) — and the list marks the
models that have none. An edit changes one model's entries in the JSON options (`ModelRatio`,
`CompletionRatio`, `CacheRatio`, `CreateCacheRatio`, `ModelPrice`), which stay the storage and stay
editable in Settings; each option is rewritten under its row's lock, so two edits at once both stay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.enums import ChannelStatus
from core.groups import usable_auto_groups, usable_groups
from core.identity import Principal
from core.option_registry import OptionError
from server.components.channel_table import ChannelTable, RoutedChannel
from server.components.options import Options
from server.components.pricing import DEFAULT_CACHE_RATIO, DEFAULT_CREATE_CACHE_RATIO, price_of, source_of
from server.errors import InvalidRequest
from server.pricing.schemas import ModelPriceRow, PriceChannel, PriceEdit, PriceRow

OPTION_OF = {"model_ratio": "ModelRatio", "completion_ratio": "CompletionRatio", "cache_ratio": "CacheRatio",
             "create_cache_ratio": "CreateCacheRatio", "model_price": "ModelPrice"}
"""A price edit's field → the JSON option that stores it."""


class PricingService:
    def __init__(self, options: Options, channels: ChannelTable) -> None:
        self.options, self.channels = options, channels

    def _price(self, model: str) -> dict[str, Any]:
        """What `PriceRow.of` needs of one model's price, at group ratio 1."""
        settings = self.options.settings
        price = price_of(settings, model, None)
        if price is not None:
            completion, cache, create = price.completion_ratio, price.cache_ratio, price.create_cache_ratio
        else:
            completion = settings.completion_ratio.get(model, 1.0)
            cache = settings.cache_ratio.get(model, DEFAULT_CACHE_RATIO)
            create = settings.create_cache_ratio.get(model, DEFAULT_CREATE_CACHE_RATIO)
        return {"model": model, "source": source_of(settings, model), "price": price,
                "completion": completion, "cache": cache, "create": create,
                "quota_per_unit": settings.quota_per_unit}

    def for_user(self, principal: Principal) -> tuple[list[PriceRow], dict[str, Any]]:
        """The models `principal` may call (an enabled channel offers them in a group they may use) with
        their prices; and, beside the list as new-api has it, the ratios and names of those groups."""
        settings = self.options.settings
        own = principal.user.group
        usable = usable_groups(settings, own)
        reachable = set(usable) | set(usable_auto_groups(settings, own))
        offered: dict[str, set[str]] = {}
        for model, entries in self.channels.abilities().items():
            for group, channel, enabled in entries:
                if enabled and channel.status == ChannelStatus.ENABLED and group in reachable:
                    offered.setdefault(model, set()).add(group)
        rows = [PriceRow.of(**self._price(model), groups=groups)
                for model, groups in sorted(offered.items())]
        extra = {"group_ratio": {g: settings.group_ratio.get(g, 1.0) for g in usable},
                 "usable_group": {g: settings.user_usable_groups.get(g, g) for g in usable}}
        return rows, extra

    def _model_row(self, model: str, entries: list[tuple[str, RoutedChannel, bool]]) -> ModelPriceRow:
        by_channel: dict[int, tuple[RoutedChannel, set[str], bool]] = {}
        for group, channel, enabled in entries:
            _, groups, any_enabled = by_channel.get(channel.id, (channel, set(), False))
            by_channel[channel.id] = (channel, groups | {group}, any_enabled or enabled)
        ordered = sorted(by_channel.values(), key=lambda t: t[0].id)
        return ModelPriceRow.of(**self._price(model), groups=(g for g, _, _ in entries),
                                channels=[PriceChannel.of(c, g, e) for c, g, e in ordered])

    def every_model(self) -> list[ModelPriceRow]:
        """Every model a channel offers (any status), with its channels and groups and its price."""
        offered = self.channels.abilities()
        return [self._model_row(model, offered[model]) for model in sorted(offered)]

    async def edit(self, edit: PriceEdit) -> ModelPriceRow:
        """Set or remove one model's entries (a field not sent is left as it is); the model's row after."""
        model = edit.model
        sent = edit.model_fields_set - {"model"}
        if not sent:
            raise InvalidRequest("model_ratio: send at least one of " + ", ".join(OPTION_OF),
                                 param="model_ratio")

        def change(value: float | None) -> Callable[[dict[str, Any]], dict[str, Any]]:
            def apply(current: dict[str, Any]) -> dict[str, Any]:
                if value is None:
                    current.pop(model, None)
                else:
                    current[model] = int(value) if value.is_integer() else value
                return current
            return apply

        try:
            await self.options.edit_json({OPTION_OF[name]: change(getattr(edit, name)) for name in sent})
        except OptionError as refused:
            raise InvalidRequest(str(refused), param="model") from None
        return self._model_row(model, self.channels.abilities().get(model, []))
