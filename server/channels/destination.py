"""Where a channel's key goes, and who may change it (docs/SECURITY.md).

A channel's key is a secret only root may read back, after a fresh secure verification. Whoever can
choose where the key is *sent* can read it too: point the channel at a server of their own and wait for
the next model call. So the fields that decide the destination of the key — `DESTINATION_FIELDS`: `type`
(the default host and the header that carries the key), `base_url`, `header_override` (a front shared by
several sites may pick the site from a header such as `X-Forwarded-Host`; `Host` itself is never
sendable, `core/headers.py`) and the `proxy` of `setting` — follow the key's privilege: on a
channel that has a key, changing any of them needs root, or the key entered again in the same request
(which replaces the stored one: an admin can send elsewhere only a key they already know). A multi-key
`append` does not count: the stored keys would go to the new place too. Sending back unchanged values (as
new-api's edit form does) changes nothing and needs nothing.

Every route that changes these fields on an existing channel calls `require_key_holder` inside its
transaction, with the row it locked. Creating a channel needs no such check (its keys are entered then).

Where a key may be sent at all is the private-address policy (`server/destinations.py`), checked here
when a `base_url` is saved (`KeyDestinations.check_base_url`, a 400 naming `base_url`) and again by the
transport at every new connection.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from core.identity import Role
from models.channels import Channel
from models.routing import load_json
from server.destinations import DestinationPolicy
from server.errors import BadRequest, Forbidden

DESTINATION_FIELDS = ("type", "base_url", "header_override", "setting")  # `setting`: only its `proxy`
KEY_HOLDER_ONLY = ("{field}: changing where this channel's key is sent needs root, or the channel's key "
                   "entered again in the same request")


class KeyDestinations:
    """The private-address policy as it applies when a channel's `base_url` is saved."""

    def __init__(self, policy: DestinationPolicy) -> None:
        self.policy = policy

    async def check_base_url(self, base_url: str) -> None:
        """400 when `base_url` (already well-formed) points at a destination the configuration forbids."""
        if not base_url or self.policy.allows_all:
            return
        host = urlsplit(base_url).hostname or ""
        reason = await self.policy.host_refusal(host)
        if reason is not None:
            raise BadRequest(f"base_url: {reason}")


def _same(name: str, stored: Any, new: Any) -> bool:
    if name == "type":
        return int(stored or 0) == int(new or 0)
    if name == "base_url":
        return str(stored or "").rstrip("/") == str(new or "").rstrip("/")
    if name == "header_override":
        return load_json(stored) == load_json(new)
    return load_json(stored).get("proxy") == load_json(new).get("proxy")  # setting


def redirected(channel: Channel, values: dict[str, Any]) -> list[str]:
    """The destination fields `values` would change on `channel`."""
    return [name for name in DESTINATION_FIELDS
            if name in values and not _same(name, getattr(channel, name), values[name])]


def require_key_holder(role: int, channel: Channel, values: dict[str, Any], *, key_reentered: bool) -> None:
    """403 when a non-root actor would change where `channel`'s key is sent without entering the key."""
    if role >= Role.ROOT or key_reentered or not channel.key_encrypted:
        return
    changed = redirected(channel, values)
    if changed:
        raise Forbidden(KEY_HOLDER_ONLY.format(field=changed[0]))
