"""Prices of model calls (docs/API.md#prices): which price applies to a model, and what a call costs.

Lookup, first match wins: the admin's `ModelPrice`, the admin's `ModelRatio`, the built-in price, the
built-in ratio (both in `server/components/catalog.py`); none → `model_price_error`, unless
`SelfUseModeEnabled` lets unpriced models through at ratio 37.5 as new-api does. Arithmetic is decimal so
that `ceil` never rounds a float's noise up a point.

    ratio mode   cost = ceil((prompt + completion × CompletionRatio) × ModelRatio × GroupRatio)
    price mode   cost = ceil(ModelPrice × QuotaPerUnit × GroupRatio)
    a non-zero price never costs less than 1 point
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from core.settings import Settings
from server.components.catalog import BUILTIN_RATIOS, FREE_PREFIXES

UNSET_MODEL_RATIO = 37.5



@dataclass(frozen=True, slots=True)
class Price:
    model_ratio: float
    completion_ratio: float
    group_ratio: float
    model_price: float | None  # USD per call; None in ratio mode

    def cost(self, prompt: int, completion: int, quota_per_unit: float) -> int:
        group = Decimal(str(self.group_ratio))
        if self.model_price is not None:
            points = Decimal(str(self.model_price)) * Decimal(str(quota_per_unit)) * group
        else:
            tokens = Decimal(prompt) + Decimal(completion) * Decimal(str(self.completion_ratio))
            points = tokens * Decimal(str(self.model_ratio)) * group
        cost = math.ceil(points)
        return max(cost, 1) if points > 0 else 0

    def other(self) -> dict[str, Any]:
        """The ratios as the consume log's `other` records them."""
        price = self.model_price if self.model_price is not None else -1
        return {"model_ratio": self.model_ratio, "completion_ratio": self.completion_ratio,
                "group_ratio": self.group_ratio, "model_price": price}


def price_of(settings: Settings, model: str, group: str, *, accept_unset: bool = False) -> Price | None:
    """The price of `model` billed in `group`, or None when the model is unpriced and not allowed
    (`accept_unset`: the caller's `accept_unset_model_ratio_model` setting allows it, as self-use mode)."""
    g = settings.group_ratio.get(group, 1.0)
    completion = settings.completion_ratio.get(model)
    builtin = BUILTIN_RATIOS.get(model)
    if completion is None:
        completion = builtin[1] if builtin else 1.0
    admin_price = settings.model_price.get(model)
    if admin_price is not None:
        return Price(0.0, completion, g, admin_price)
    admin_ratio = settings.model_ratio.get(model)
    if admin_ratio is not None:
        return Price(admin_ratio, completion, g, None)
    if model.startswith(FREE_PREFIXES):
        return Price(0.0, completion, g, 0.0)
    if builtin is not None:
        return Price(builtin[0], completion, g, None)
    if settings.self_use_mode_enabled or accept_unset:
        return Price(UNSET_MODEL_RATIO, completion, g, None)
    return None
