"""`/api/pricing…`: the price list of the models you may call, every model with its price and channels
(admins), and root's edit of one model's price."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.pricing.schemas import ModelPriceRow, PriceEdit, PriceRow
from server.web.access import Access, route
from server.web.envelope import ok
from server.web.state import principal_of, services_of

bp = Blueprint("pricing")


@route(bp, "GET", "/api/pricing", access=Access.USER, reply=list[PriceRow])
async def get_pricing(request: Request) -> HTTPResponse:
    """The models you may call, with their prices.
    A model an enabled channel offers in one of your groups (the groups `auto` reaches included), its
    price as the gateway bills it at group ratio 1 — ratios and dollars per million tokens, or dollars
    per call — and the groups that offer it. Beside `data`, as new-api has it: `group_ratio` and
    `usable_group` of the groups you may choose (a call costs the price × its group's ratio)."""
    rows, extra = services_of(request).pricing.for_user(principal_of(request))
    return ok(rows, extra=extra)


@route(bp, "GET", "/api/pricing/models", access=Access.ADMIN, reply=list[ModelPriceRow])
async def list_model_prices(request: Request) -> HTTPResponse:
    """Every model a channel offers, with its channels, groups and price.
    Channels and abilities of any status; `priced: false` marks a model without a price, which every
    call is refused (`model_price_error`) unless `SelfUseModeEnabled`."""
    return ok(services_of(request).pricing.every_model())


@route(bp, "PUT", "/api/pricing/models", access=Access.ROOT, body=PriceEdit, reply=ModelPriceRow)
async def edit_model_price(request: Request, body: PriceEdit) -> HTTPResponse:
    """Set one model's price.
    Each field sent sets the model's entry in its option (`ModelRatio`, `CompletionRatio`, `CacheRatio`,
    `CreateCacheRatio`, `ModelPrice`; a number ≥ 0) or, when null, removes it; fields not sent are left
    as they are. The options are changed together, each under its lock, and every worker bills by the
    new price from the next call. The reply is the model's row after the edit."""
    return ok(await services_of(request).pricing.edit(body))
