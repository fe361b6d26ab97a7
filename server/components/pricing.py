"""Prices of model calls (docs/api/gateway.md#prices): which price applies to a model, and what a call costs —
the one formula the gateway bills by and the price list shows.

Lookup, first match wins: the admin's `ModelPrice`, the admin's `ModelRatio`, the built-in price, the
built-in ratio (both in `server/components/catalog.py`: speech and moderation only, never chat or
embeddings); none → `model_price_error`, unless `SelfUseModeEnabled` lets unpriced models through at ratio
37.5 as new-api does. Arithmetic is decimal on the option values as written, with one ceil at the end, so
that `ceil` never rounds a float's noise up a point:

    ratio mode   cost = ceil((input + cache_read × CacheRatio + cache_write_5m × CreateCacheRatio
                              + cache_write_1h × CreateCacheRatio × 1.6 + output × CompletionRatio)
                             × ModelRatio × GroupRatio)
    price mode   cost = ceil(ModelPrice × QuotaPerUnit × GroupRatio)
    a non-zero price never costs less than 1 point

`CacheRatio` is 1 and `CreateCacheRatio` 1.25 for a model without an entry; 1.6 is a 1-hour cache write's
price over a 5-minute one's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from core.enums import PriceSource
from core.settings import Settings
from server.components.catalog import BUILTIN_RATIOS, FREE_PREFIXES

UNSET_MODEL_RATIO = 37.5
DEFAULT_CACHE_RATIO = 1.0
DEFAULT_CREATE_CACHE_RATIO = 1.25
ONE_HOUR_WRITE = Decimal("1.6")


class Counts(Protocol):
    """A call's usage in five counts (`server/upstream/providers/base.py` `Usage` is one)."""

    @property
    def input(self) -> int: ...
    @property
    def output(self) -> int: ...
    @property
    def cache_read(self) -> int: ...
    @property
    def cache_write_5m(self) -> int: ...
    @property
    def cache_write_1h(self) -> int: ...


def _d(value: float) -> Decimal:
    """A ratio as written (`repr` of the float the JSON option held: `0.1` stays 0.1)."""
    return Decimal(str(value))


@dataclass(frozen=True, slots=True)
class Price:
    model_ratio: float
    completion_ratio: float
    group_ratio: float
    model_price: float | None  # USD per call; None in ratio mode
    cache_ratio: float = DEFAULT_CACHE_RATIO
    create_cache_ratio: float = DEFAULT_CREATE_CACHE_RATIO

    def cost(self, usage: Counts, quota_per_unit: float) -> int:
        group = _d(self.group_ratio)
        if self.model_price is not None:
            points = _d(self.model_price) * _d(quota_per_unit) * group
        else:
            tokens = Decimal(usage.input) + Decimal(usage.output) * _d(self.completion_ratio)
            if usage.cache_read:  # (most calls read and write no cache: no term to convert)
                tokens += Decimal(usage.cache_read) * _d(self.cache_ratio)
            if usage.cache_write_5m or usage.cache_write_1h:
                create = _d(self.create_cache_ratio)
                tokens += (Decimal(usage.cache_write_5m) * create
                           + Decimal(usage.cache_write_1h) * create * ONE_HOUR_WRITE)
            points = tokens * _d(self.model_ratio) * group
        cost = math.ceil(points)
        return max(cost, 1) if points > 0 else 0

    def other(self) -> dict[str, Any]:
        """The ratios as the consume log's `other` records them."""
        price = self.model_price if self.model_price is not None else -1
        return {"model_ratio": self.model_ratio, "completion_ratio": self.completion_ratio,
                "group_ratio": self.group_ratio, "model_price": price, "cache_ratio": self.cache_ratio,
                "cache_creation_ratio": self.create_cache_ratio}


def source_of(settings: Settings, model: str) -> PriceSource:
    """Where `model`'s price comes from (the first of the lookup's steps that has it)."""
    if model in settings.model_price:
        return PriceSource.MODEL_PRICE
    if model in settings.model_ratio:
        return PriceSource.MODEL_RATIO
    if model.startswith(FREE_PREFIXES):
        return PriceSource.FREE
    if model in BUILTIN_RATIOS:
        return PriceSource.BUILTIN
    return PriceSource.SELF_USE if settings.self_use_mode_enabled else PriceSource.NONE


def price_of(settings: Settings, model: str, group: str | None, *, accept_unset: bool = False
             ) -> Price | None:
    """The price of `model` billed in `group` (None: the list price, group ratio 1), or None when the model
    is unpriced and not allowed (`accept_unset`: the caller's `accept_unset_model_ratio_model` setting
    allows it, as self-use mode)."""
    g = settings.group_ratio.get(group, 1.0) if group is not None else 1.0
    completion = settings.completion_ratio.get(model)
    builtin = BUILTIN_RATIOS.get(model)
    if completion is None:
        completion = builtin[1] if builtin else 1.0
    cache = settings.cache_ratio.get(model, DEFAULT_CACHE_RATIO)
    create = settings.create_cache_ratio.get(model, DEFAULT_CREATE_CACHE_RATIO)
    admin_price = settings.model_price.get(model)
    if admin_price is not None:
        return Price(0.0, completion, g, admin_price, cache, create)
    admin_ratio = settings.model_ratio.get(model)
    if admin_ratio is not None:
        return Price(admin_ratio, completion, g, None, cache, create)
    if model.startswith(FREE_PREFIXES):
        return Price(0.0, completion, g, 0.0, cache, create)
    if builtin is not None:
        return Price(builtin[0], completion, g, None, cache, create)
    if settings.self_use_mode_enabled or accept_unset:
        return Price(UNSET_MODEL_RATIO, completion, g, None, cache, create)
    return None
