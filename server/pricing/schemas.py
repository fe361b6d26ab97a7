"""Request and reply schemas of the price list (`/api/pricing`, docs/API.md#the-price-list).

A row shows one model's price as the gateway computes it (server/components/pricing.py): where it comes
from, the ratios, and the same in dollars at group ratio 1 — per million input, output, cache-read and
cache-write tokens in ratio mode, per call in price mode. The field names new-api's `/api/pricing` has
(`model_name`, `quota_type`, `model_ratio`, `model_price`, `completion_ratio`, `enable_groups`) keep its
meaning, so tools that read new-api's list read ours.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from core.enums import PriceSource
from server.web.schema import NumberRule, Reply, Schema, TextRule

RATIO_MAX = 1e9
Ratio = Annotated[float, NumberRule(0, RATIO_MAX)]


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


class PriceChannel(Reply):
    id: int
    name: str
    type: int
    status: int = Field(description="the channel's status (1 enabled)")
    groups: list[str] = Field(description="the groups the channel offers the model in")
    enabled: bool = Field(description="the ability is enabled in at least one of those groups")


class ModelPriceRow(PriceRow):
    channels: list[PriceChannel]


class PriceEdit(Schema):
    """One model's price, each field where sent: a number sets the model's entry in that option, null
    removes it (the option's default applies again); a field not sent is left as it is."""

    model: Annotated[str, TextRule(trim=True, min_len=1, max_len=255)]
    model_ratio: Ratio | None = None
    completion_ratio: Ratio | None = None
    cache_ratio: Ratio | None = None
    create_cache_ratio: Ratio | None = None
    model_price: Ratio | None = None
