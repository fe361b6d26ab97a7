"""The admin channel routes: create, update, read, list, search, delete, the model catalog lists, the
tools that call no upstream (key reveal, batch delete and tag, copy, abilities rebuild, tags, multi-key
management), and those that ask a channel's upstream (tests, balances, upstream model lists)."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from core.enums import ChannelRun
from server.channels.schemas import (
    CatalogModel,
    ChannelCreate,
    ChannelListQuery,
    ChannelPage,
    ChannelPath,
    ChannelSearchQuery,
    ChannelUpdate,
    ChannelView,
)
from server.channels.service import models_catalog, status_filter
from server.channels.tool_schemas import (
    BalanceReply,
    BalanceRun,
    ChannelIds,
    ChannelIdsTag,
    CopyQuery,
    CreatedChannel,
    FetchModelsBody,
    FixResult,
    KeyManage,
    KeyReveal,
    KeyStatusPage,
    RunProgress,
    RunQuery,
    TagBody,
    TagEdit,
    TagQuery,
    TestQuery,
    TestReply,
)
from server.web.access import Access, Wire, route
from server.web.envelope import ok
from server.web.state import principal_of, services_of

bp = Blueprint("channels")


async def _page(request: Request, query: ChannelListQuery, *, keyword: str = "", group: str = "",
                model: str = "", tag: str = "", type_counts: bool) -> HTTPResponse:
    channels = services_of(request).channels
    flt = channels.search_filter(keyword=keyword, group=group, model=model, tag=tag,
                                 statuses=status_filter(query.status), channel_type=query.type)
    return ok(await channels.list_channels(query.page(), flt, id_sort=query.id_sort,
                                           tag_mode=query.tag_mode, type_counts=type_counts))


@route(bp, "GET", "/api/channel/", access=Access.ADMIN, query=ChannelListQuery, reply=ChannelPage)
async def list_channels(request: Request, query: ChannelListQuery) -> HTTPResponse:
    """List channels, by priority (or id), with the number of channels of each type.
    Keys are never shown."""
    return await _page(request, query, type_counts=True)


@route(bp, "GET", "/api/channel/search", access=Access.ADMIN, query=ChannelSearchQuery, reply=ChannelPage)
async def search_channels(request: Request, query: ChannelSearchQuery) -> HTTPResponse:
    """Search channels by keyword, group, model, tag, status and type.
    A keyword that is a whole key finds the channel holding it; a tag matches whole, case-sensitive."""
    return await _page(request, query, keyword=query.keyword, group=query.group, model=query.model,
                       tag=query.tag, type_counts=False)


@route(bp, "GET", "/api/channel/models", access=Access.ADMIN, reply=list[CatalogModel])
async def catalog_models(request: Request) -> HTTPResponse:
    """The built-in model catalog (the models Tollway knows without asking a provider)."""
    return ok(models_catalog())


@route(bp, "GET", "/api/channel/models_enabled", access=Access.ADMIN, reply=list[str])
async def enabled_models(request: Request) -> HTTPResponse:
    """The models some enabled channel serves."""
    return ok(services_of(request).channels.enabled_models())


@route(bp, "GET", "/api/channel/<channel_id>", access=Access.ADMIN, path_params=ChannelPath,
       reply=ChannelView)
async def get_channel(request: Request, channel_id: int) -> HTTPResponse:
    """One channel (its key is never shown)."""
    return ok(await services_of(request).channels.get_channel(channel_id))


@route(bp, "POST", "/api/channel/", access=Access.ADMIN, body=ChannelCreate, reply=list[int])
async def create_channels(request: Request, body: ChannelCreate) -> HTTPResponse:
    """Create one channel, one per key line (batch), or one channel with several keys.
    `name` and `type` are required; a `base_url` must not point at a private address. The reply is the
    new ids, in key order."""
    return ok(await services_of(request).channels.create_channels(
        mode=body.mode, multi_key_mode=body.multi_key_mode,
        name_from_key=body.batch_add_set_key_prefix_2_name, fields=body.channel.fields(),
    ))


@route(bp, "PUT", "/api/channel/", access=Access.ADMIN, body=ChannelUpdate, reply=ChannelView)
async def update_channel(request: Request, body: ChannelUpdate) -> HTTPResponse:
    """Edit a channel.
    Only the fields sent change (null clears an optional field). Changing where a keyed channel's key
    is sent (type, base URL, header override, proxy) needs root or the key in the same request."""
    return ok(await services_of(request).channels.update_channel(
        body.id, body.fields(), key_mode=body.key_mode, multi_key_mode=body.multi_key_mode,
        actor_role=principal_of(request).role,
    ))


@route(bp, "DELETE", "/api/channel/<channel_id>", access=Access.ADMIN, path_params=ChannelPath, reply=None)
async def delete_channel(request: Request, channel_id: int) -> HTTPResponse:
    """Delete a channel (it stops serving at once)."""
    await services_of(request).channels.delete_channel(channel_id)
    return ok()


# ---- tools that call no upstream --------------------------------------------------------------------


@route(bp, "POST", "/api/channel/<channel_id>/key", access=Access.ROOT, critical=True,
       path_params=ChannelPath, reply=KeyReveal, secret=True)
async def reveal_channel_key(request: Request, channel_id: int) -> HTTPResponse:
    """Show a channel's key (one per line for a multi-key channel).
    Needs a secure verification made in the last 5 minutes, checked before the channel is looked up:
    without one the answer is 403 with `code` `VERIFICATION_REQUIRED` (or `VERIFICATION_EXPIRED`), then
    404 for an unknown channel. Each reveal writes a system log naming the admin and the channel."""
    return ok(await services_of(request).channels.reveal_key(principal_of(request), channel_id))


@route(bp, "DELETE", "/api/channel/disabled", access=Access.ADMIN, reply=int)
async def delete_disabled_channels(request: Request) -> HTTPResponse:
    """Delete every disabled channel (status 2 or 3) and its abilities.
    The reply is the number of channels deleted."""
    return ok(await services_of(request).channels.delete_disabled())


@route(bp, "POST", "/api/channel/batch", access=Access.ADMIN, body=ChannelIds, reply=int)
async def delete_channels(request: Request, body: ChannelIds) -> HTTPResponse:
    """Delete several channels (1–1000 ids) and their abilities in one transaction.
    Unknown ids are skipped; the reply is the number of channels actually deleted."""
    return ok(await services_of(request).channels.delete_many(body.ids))


@route(bp, "POST", "/api/channel/batch/tag", access=Access.ADMIN, body=ChannelIdsTag, reply=int)
async def tag_channels(request: Request, body: ChannelIdsTag) -> HTTPResponse:
    """Set the tag of several channels (1–1000 ids); a null or empty tag clears it.
    Unknown ids are skipped; the reply is the number of channels tagged."""
    return ok(await services_of(request).channels.tag_many(body.ids, body.tag))


@route(bp, "POST", "/api/channel/copy/<channel_id>", access=Access.ADMIN, path_params=ChannelPath,
       query=CopyQuery, reply=CreatedChannel)
async def copy_channel(request: Request, channel_id: int, query: CopyQuery) -> HTTPResponse:
    """Copy a channel: the same keys and settings, named with `suffix` appended (default `_copy`).
    The copy is created now, has no test result, and with `reset_balance` (default true) starts with a
    zero balance and used quota. The reply is the new channel's id."""
    return ok(await services_of(request).channels.copy_channel(channel_id, suffix=query.suffix,
                                                               reset_balance=query.reset_balance))


@route(bp, "POST", "/api/channel/fix", access=Access.ADMIN, reply=FixResult)
async def fix_abilities(request: Request) -> HTTPResponse:
    """Rebuild every channel's abilities from the channel.
    Counts the channels rebuilt (`success`) and those that could not be (`fails`); a second rebuild
    while one runs on any worker or node is a 409."""
    return ok(await services_of(request).channels.fix_abilities())


# ---- tags -----------------------------------------------------------------------------------------------


@route(bp, "POST", "/api/channel/tag/disabled", access=Access.ADMIN, body=TagBody, reply=int)
async def disable_tag(request: Request, body: TagBody) -> HTTPResponse:
    """Disable every channel of a tag (status 2).
    The reply is the number of channels whose status changed; a tag no channel has is a 404."""
    return ok(await services_of(request).channels.set_tag_status(body.tag, enabled=False))


@route(bp, "POST", "/api/channel/tag/enabled", access=Access.ADMIN, body=TagBody, reply=int)
async def enable_tag(request: Request, body: TagBody) -> HTTPResponse:
    """Enable every channel of a tag (status 1).
    The reply is the number of channels whose status changed; a tag no channel has is a 404."""
    return ok(await services_of(request).channels.set_tag_status(body.tag, enabled=True))


@route(bp, "PUT", "/api/channel/tag", access=Access.ADMIN, body=TagEdit, reply=int)
async def edit_tag(request: Request, body: TagEdit) -> HTTPResponse:
    """Edit every channel of a tag at once.
    Only fields with a value change (absent, null and "" leave a field as it is); `new_tag` renames the
    tag and `groups` sets the groups. A header override that would send a keyed channel's key elsewhere
    needs root. The reply is the number of channels with the tag; a tag no channel has is a 404."""
    return ok(await services_of(request).channels.edit_tag(body.tag, body.changes(),
                                                           actor_role=principal_of(request).role))


@route(bp, "GET", "/api/channel/tag/models", access=Access.ADMIN, query=TagQuery, reply=str)
async def tag_models(request: Request, query: TagQuery) -> HTTPResponse:
    """The models of a tag's channels, as one comma list.
    Each model once, in the order it first appears (channels by id); a missing tag is a 400, a tag no
    channel has a 404."""
    return ok(await services_of(request).channels.tag_models(query.tag))


# ---- multi-key management --------------------------------------------------------------------------------


@route(bp, "POST", "/api/channel/multi_key/manage", access=Access.ADMIN, body=KeyManage,
       reply=KeyStatusPage | int | None)
async def manage_keys(request: Request, body: KeyManage) -> HTTPResponse:
    """Manage the keys of a multi-key channel.
    `get_key_status` pages through the keys (masked previews, optional status filter) with the counts
    per status; `disable_key`/`enable_key`/`delete_key` act on `key_index`; `disable_all_keys`/
    `enable_all_keys` answer how many keys changed; `delete_disabled_keys` removes the keys the system
    disabled and answers how many. The last key cannot be deleted (409). With no enabled key left the
    channel gets status 3; enabling a key brings a status-3 channel back to 1. Calls on one channel run
    one at a time."""
    return ok(await services_of(request).channels.manage_keys(
        body.channel_id, body.action, key_index=body.key_index, page=body.page, page_size=body.page_size,
        status=body.status))


# ---- the routes that call a channel's upstream ---------------------------------------------------------


@route(bp, "GET", "/api/channel/test/<channel_id>", access=Access.ADMIN, path_params=ChannelPath,
       query=TestQuery, reply=TestReply, wire=Wire.RAW, calls_upstream=True)
async def test_channel(request: Request, channel_id: int, query: TestQuery) -> HTTPResponse:
    """Test a channel with one small real request to its upstream.
    The model is `model`, else the channel's `test_model`, else its first model: a moderation model is
    asked to moderate one word, a speech model to say one word in a built-in voice, any other model
    lists the upstream's models; with the key, model mapping and headers a call would use. `time` (in
    seconds) is in the reply and in `data`. A success records the test's time and latency; nothing is
    charged and no status changes. A type that cannot be tested is a 400; a failed test a 502 with the
    upstream's message (never a key) and `time` 0."""
    seconds = await services_of(request).channels.test_channel(channel_id, query.model)
    return ok({"time": seconds}, extra={"time": seconds})


@route(bp, "GET", "/api/channel/test", access=Access.ADMIN, reply=None, calls_upstream=True)
async def test_all_channels(request: Request) -> HTTPResponse:
    """Test every channel but those an admin disabled, in the background; the reply comes at once.
    A failure the automatic-disable rules act on, or an answer slower than `ChannelDisableThreshold`,
    disables an enabled channel whose `auto_ban` is 1 (when `AutomaticDisableChannelEnabled`); a passing
    test enables an automatically disabled channel again (when `AutomaticEnableChannelEnabled`). One run
    at a time in the whole deployment: a second one is a 409."""
    await services_of(request).channels.start_test_all()
    return ok()


@route(bp, "GET", "/api/channel/progress", access=Access.ADMIN, query=RunQuery, reply=RunProgress)
async def run_progress(request: Request, query: RunQuery) -> HTTPResponse:
    """How far testing every channel (`run=test`) or updating every balance (`run=balance`) has come.
    Told on any worker or node: channels in the run, done, passed and failed, with the first 20 failures
    and the upstream's message; `running` false once it has ended (a finished run is told for a day).
    Every count is 0 when no run is known."""
    return ok(await services_of(request).channels.run_progress(ChannelRun(query.run)))


@route(bp, "GET", "/api/channel/update_balance/<channel_id>", access=Access.ADMIN, path_params=ChannelPath,
       reply=BalanceReply, wire=Wire.RAW, calls_upstream=True)
async def update_balance(request: Request, channel_id: int) -> HTTPResponse:
    """Ask a channel's upstream for its balance and store it.
    For single-key channels of type OpenAI, Custom, OpenRouter, Moonshot, SiliconFlow and DeepSeek;
    amounts in CNY are turned into USD with `USDExchangeRate`. `balance` (USD) is in the reply and in
    `data`. Another type or a multi-key channel is a 400; a failed query a 502."""
    balance = await services_of(request).channels.update_balance(channel_id)
    return ok({"balance": balance}, extra={"balance": balance})


@route(bp, "GET", "/api/channel/update_balance", access=Access.ADMIN, reply=BalanceRun, calls_upstream=True)
async def update_all_balances(request: Request) -> HTTPResponse:
    """Update the balance of every enabled single-key channel whose type publishes one.
    Eight at a time, each given 10 seconds; a balance of zero or less disables the channel when
    `AutomaticDisableChannelEnabled` and its `auto_ban` is 1. The reply counts the channels updated and
    those that failed; one run at a time in the whole deployment (a second one is a 409)."""
    return ok(await services_of(request).channels.update_all_balances())


@route(bp, "GET", "/api/channel/fetch_models/<channel_id>", access=Access.ADMIN, path_params=ChannelPath,
       reply=list[str], calls_upstream=True)
async def fetch_channel_models(request: Request, channel_id: int) -> HTTPResponse:
    """The models a channel's upstream lists, asked with the channel's first enabled key.
    Gemini channels read every page of Google's list (without the `models/` prefix); other types ask
    `/v1/models` the OpenAI way, with the channel's header override. Nothing is stored."""
    return ok(await services_of(request).channels.fetch_models(channel_id))


@route(bp, "POST", "/api/channel/fetch_models", access=Access.ROOT, body=FetchModelsBody, reply=list[str],
       calls_upstream=True)
async def fetch_models(request: Request, body: FetchModelsBody) -> HTTPResponse:
    """The models an upstream lists for channel settings not saved yet.
    The first line of `key` (trimmed) is used; an empty `base_url` means the type's default address,
    and a private address is refused as when saving a channel. Nothing is stored."""
    return ok(await services_of(request).channels.fetch_models_unsaved(
        channel_type=body.type, base_url=body.base_url, key=body.key))
