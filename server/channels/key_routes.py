"""The routes of a channel's stored keys (`ChannelKeys`, server/channels/keyring.py): the root's key
reveal and the key management of multi-key channels."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.channels.key_schemas import KeyManage, KeyReveal, KeyStatusPage
from server.channels.schemas import ChannelPath
from server.web.access import Access, route
from server.web.envelope import ok
from server.web.state import principal_of, services_of

bp = Blueprint("channel_keys")


@route(bp, "POST", "/api/channel/<channel_id>/key", access=Access.ROOT, critical=True,
       path_params=ChannelPath, reply=KeyReveal, secret=True)
async def reveal_channel_key(request: Request, channel_id: int) -> HTTPResponse:
    """Show a channel's key (one per line for a multi-key channel).
    Needs a secure verification made in the last 5 minutes, checked before the channel is looked up:
    without one the answer is 403 with `code` `VERIFICATION_REQUIRED` (or `VERIFICATION_EXPIRED`), then
    404 for an unknown channel. Each reveal writes a system log naming the admin and the channel."""
    return ok(await services_of(request).channels.keys.reveal_key(principal_of(request), channel_id))


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
    return ok(await services_of(request).channels.keys.manage_keys(
        body.channel_id, body.action, key_index=body.key_index, page=body.page, page_size=body.page_size,
        status=body.status))
