"""Request and reply schemas of the price list (`/api/pricing`, docs/api/gateway.md#the-price-list).

A row shows one model's price as the gateway computes it (server/components/pricing.py): where it comes
from, the ratios, and the same in dollars at group ratio 1 — per million input, output, cache-read and
cache-write tokens in ratio mode, per call in price mode. The field names new-api's `/api/pricing` has
(`model_name`, `quota_type`, `model_ratio`, `model_price`, `completion_ratio`, `enable_groups`) keep its
meaning, so tools that read new-api's list read ours.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Annotated

from pydantic import Field

from core.enums import PriceSource
from server.components.channel_table import RoutedChannel
from server.components.pricing import Price
from server.web.schema import NumberRule, Reply, Schema, TextRule

RATIO_MAX = 1e9
Ratio = Annotated[float, NumberRule(0, RATIO_MAX)]
MILLION = Decimal(1_000_000)


def _dollars(value: Decimal) -> float:
    return float(round(value, 9))


class PriceRow(Reply):
    model_name: str
    quota_type: int = Field(description="0: per token (ratios); 1: per call (ModelPrice)")
    source: PriceSource = Field(description="where the price comes from; `none`: a call is refused")
    priced: bool = Field(description="false: the model has no price and a call to it is refused")
    model_ratio: float = Field(description="ModelRatio (0 in price mode)")
    completion_ratio: float
    cache_ratio: float = Field(description="CacheRatio: a cache read over an input token")
    create_cache_ratio: float = Field(description="CreateCacheRatio: a cache write over an input token")
    model_price: float = Field(description="ModelPrice, dollars per call; -1 in ratio mode")
    input_per_million: float | None = Field(description="dollars per million input tokens (ratio mode)")
    output_per_million: float | None
    cache_read_per_million: float | None
    cache_write_per_million: float | None = Field(description="a 5-minute write; a 1-hour one is 1.6 times")
    per_call: float | None = Field(description="dollars per call (price mode)")
    enable_groups: list[str] = Field(description="the groups in which a channel offers the model")

    @classmethod
    def of(cls, *, model: str, source: PriceSource, price: Price | None, completion: float, cache: float,
           create: float, quota_per_unit: float, groups: Iterable[str]) -> PriceRow:
        """`price` at group ratio 1 (None: unpriced; the ratios shown are then the options' or defaults)."""
        by_call = price.model_price if price is not None else None
        per_token = (Decimal(str(price.model_ratio)) / Decimal(str(quota_per_unit)) * MILLION
                     if price is not None and by_call is None and quota_per_unit else None)

        def times(ratio: float) -> float | None:
            return _dollars(per_token * Decimal(str(ratio))) if per_token is not None else None

        return cls(model_name=model, quota_type=1 if by_call is not None else 0, source=source,
                   priced=price is not None, model_ratio=price.model_ratio if price is not None else 0.0,
                   completion_ratio=completion, cache_ratio=cache, create_cache_ratio=create,
                   model_price=by_call if by_call is not None else -1.0, input_per_million=times(1.0),
                   output_per_million=times(completion), cache_read_per_million=times(cache),
                   cache_write_per_million=times(create), per_call=by_call, enable_groups=sorted(set(groups)))


class PriceChannel(Reply):
    id: int
    name: str
    type: int
    status: int = Field(description="the channel's status (1 enabled)")
    groups: list[str] = Field(description="the groups the channel offers the model in")
    enabled: bool = Field(description="the ability is enabled in at least one of those groups")

    @classmethod
    def of(cls, channel: RoutedChannel, groups: Iterable[str], enabled: bool) -> PriceChannel:
        return cls(id=channel.id, name=channel.name, type=channel.type, status=channel.status,
                   groups=sorted(groups), enabled=enabled)


class ModelPriceRow(PriceRow):
    channels: list[PriceChannel]

    @classmethod
    def of(cls, *, model: str, source: PriceSource, price: Price | None, completion: float, cache: float,
           create: float, quota_per_unit: float, groups: Iterable[str],
           channels: list[PriceChannel] | None = None) -> ModelPriceRow:
        row = PriceRow.of(model=model, source=source, price=price, completion=completion, cache=cache,
                          create=create, quota_per_unit=quota_per_unit, groups=groups)
        return cls(**row.model_dump(), channels=channels or [])


class PriceEdit(Schema):
    """One model's price, each field where sent: a number sets the model's entry in that option, null
    removes it (the option's default applies again); a field not sent is left as it is."""

    model: Annotated[str, TextRule(trim=True, min_len=1, max_len=255)]
    model_ratio: Ratio | None = None
    completion_ratio: Ratio | None = None
    cache_ratio: Ratio | None = None
    create_cache_ratio: Ratio | None = None
    model_price: Ratio | None = None
