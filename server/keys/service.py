"""The rules of the API key routes (docs/api/accounts.md#api-keys): a user's own keys only, validated on every
save.

- The key is 48 `[A-Za-z0-9]` from `secrets`, stored encrypted plus its HMAC digest, shown in full once
  (create) and then only through `reveal_key`.
- `remain_quota` is money (docs/API.md#quota): the row is created with it, and afterwards only the quota
  engine changes it (`QuotaEngine.set`); views show the live value.
- Every committed change invalidates the key's cached state (`KeyDirectory.invalidate`), so every worker
  and node applies it within 1 s.
"""

from __future__ import annotations

import ipaddress
import logging
import secrets
import string
from collections.abc import Sequence
from typing import Any

from cryptography.exceptions import InvalidTag

from core.enums import KeyStatus
from core.identity import Principal
from models.db import Database
from models.keys import ApiKey, ApiKeyRepository
from models.users import UserRepository
from quota.engine import QuotaEngine
from quota.types import BalanceOutOfRange, BalanceUnknown
from server.clock import Clock
from server.components.keys import KEY_LENGTH, KeyDirectory, bare_key
from server.components.options import Options
from server.crypto import SecretBox
from server.errors import BadRequest, Conflict, Forbidden, NotFound, TollwayError, Unauthenticated
from server.keys.schemas import MAX_KEYS_PER_USER, RevealedKey, TokenUsage, TokenView
from server.web.body import has_control_chars
from server.web.pagination import Page

log = logging.getLogger("tollway.keys")
ALPHABET = string.ascii_letters + string.digits
NAME_MAX = 50
MODEL_NAME_MAX = 255
LIST_MAX = 1000  # entries of model_limits / allow_ips
BALANCE_LIMIT = 2**53 - 1  # the quota engine's exact range (CONVENTIONS.md rule 15)


def new_key() -> str:
    """48 characters `[A-Za-z0-9]` from the CSPRNG (≈ 285 bits)."""
    return "".join(secrets.choice(ALPHABET) for _ in range(KEY_LENGTH))


def reveal(box: SecretBox, row: ApiKey) -> str | None:
    """The bare 48-character key, or None when it cannot be decrypted (SECRET_KEY changed)."""
    try:
        return box.decrypt(row.key_encrypted)
    except (InvalidTag, ValueError):
        log.error("API key %d cannot be decrypted with the current SECRET_KEY", row.id)
        return None


def _name(value: str) -> str:
    if len(value) > NAME_MAX:
        raise BadRequest(f"name: must be at most {NAME_MAX} characters")
    if has_control_chars(value):
        raise BadRequest("name: must not contain control characters")
    return value


def _model_limits(value: str) -> str:
    models: list[str] = []
    for item in value.split(","):
        name = item.strip()
        if not name or name in models:
            continue
        if len(name) > MODEL_NAME_MAX or has_control_chars(name):
            raise BadRequest(f"model_limits: {name[:40]!r} is not a model name")
        models.append(name)
    if len(models) > LIST_MAX:
        raise BadRequest(f"model_limits: at most {LIST_MAX} models")
    return ",".join(models)


def _allow_ips(value: str) -> str:
    entries: list[str] = []
    for line in value.split("\n"):
        entry = line.strip()
        if not entry:
            continue
        try:
            if "/" in entry:
                ipaddress.ip_network(entry, strict=False)
            else:
                ipaddress.ip_address(entry)
        except ValueError:
            raise BadRequest(f"allow_ips: {entry[:60]!r} is not an IP address or CIDR range") from None
        entries.append(entry)
    if len(entries) > LIST_MAX:
        raise BadRequest(f"allow_ips: at most {LIST_MAX} entries")
    return "\n".join(entries)


def _status(value: Any) -> int:
    if value not in (KeyStatus.ENABLED, KeyStatus.DISABLED):
        raise BadRequest("status: must be 1 (enabled) or 2 (disabled)")
    return int(value)


def _check_enable(row: ApiKey, values: dict[str, Any], remain: int, now: int) -> None:
    """Enabling a key that would at once be expired or exhausted is refused
    (docs/api/accounts.md#api-keys)."""
    if values.get("status") != KeyStatus.ENABLED or row.status == KeyStatus.ENABLED:
        return
    expired = values.get("expired_time", row.expired_time)
    if expired != -1 and expired <= now:
        raise BadRequest("status: the key has expired; set expired_time to -1 or a future time first")
    if not values.get("unlimited_quota", row.unlimited_quota) and remain <= 0:
        raise BadRequest("status: the key's quota is used up; raise remain_quota or make it unlimited first")


class KeyService:
    """A user's own API keys, with exactly the components the rules use."""

    def __init__(self, *, db: Database, keys: KeyDirectory, quota: QuotaEngine, box: SecretBox,
                 options: Options, clock: Clock) -> None:
        self.db = db
        self.keys = keys
        self.quota = quota
        self.box = box
        self.options = options
        self.clock = clock

    # ---- validation ---------------------------------------------------------------------------------

    def remain_quota_max(self) -> int:
        return min(int(1_000_000_000 * self.options.settings.quota_per_unit), BALANCE_LIMIT)

    def _group(self, principal: Principal, group: str) -> str:
        if group in ("", "auto"):
            return group
        if group not in self.options.settings.user_usable_groups and group != principal.user.group:
            raise BadRequest(f"group: {group!r} is not a group you can use")
        if group not in self.options.settings.group_ratio:
            raise BadRequest(f"group: {group!r} is not in GroupRatio")
        return group

    def check_fields(self, principal: Principal, changes: dict[str, Any], current: ApiKey | None,
                     now: int) -> dict[str, Any]:
        """The column values of the present fields, validated and normalized. On an edit (`current`), a
        value equal to the stored one is always accepted (a client that echoes the whole key must not be
        refused for an expiry that has passed or a group that was withdrawn meanwhile)."""

        def unchanged(name: str) -> bool:
            return current is not None and changes[name] == getattr(current, name)

        values: dict[str, Any] = {}
        if "name" in changes:
            values["name"] = _name(changes["name"])
        if "expired_time" in changes:
            expired = changes["expired_time"]
            if not unchanged("expired_time") and expired != -1 and expired <= now:
                raise BadRequest("expired_time: must be -1 (never) or a time in the future")
            values["expired_time"] = expired
        if "remain_quota" in changes:
            limit = self.remain_quota_max()
            if not 0 <= changes["remain_quota"] <= limit:
                raise BadRequest(f"remain_quota: must be between 0 and {limit}")
            values["remain_quota"] = changes["remain_quota"]
        for flag in ("unlimited_quota", "model_limits_enabled"):
            if flag in changes:
                values[flag] = bool(changes[flag])
        if "model_limits" in changes:
            values["model_limits"] = _model_limits(changes["model_limits"])
        if "allow_ips" in changes:
            values["allow_ips"] = _allow_ips(changes["allow_ips"])
        if "group" in changes:
            values["group"] = changes["group"] if unchanged("group") else self._group(principal,
                                                                                   changes["group"])
        if "status" in changes and not unchanged("status"):
            values["status"] = _status(changes["status"])
        return values

    # ---- reads --------------------------------------------------------------------------------------

    async def with_live_remain(self, views: list[TokenView]) -> list[TokenView]:
        """Show each key's live remaining quota (the SQL value lags it by up to one sync interval)."""
        live = await self.quota.balances("key", [v.id for v in views], [v.user_id for v in views])
        for view in views:
            view.remain_quota = live.get(view.id, view.remain_quota)
        return views

    async def list_keys(self, principal: Principal, page: Page, *, keyword: str = "",
                        token: str = "") -> dict[str, Any]:
        digest: str | None = None
        if token:
            key = bare_key(token)
            if key is None:  # exact match only: a partial or malformed key matches nothing
                return page.payload([], 0)
            digest = self.box.digest(key)
        async with self.db.transaction() as tx:
            rows, total = await ApiKeyRepository(tx).page(principal.id, offset=page.offset, limit=page.size,
                                                          keyword=keyword, digest=digest)
        views = [TokenView.of(row, reveal(self.box, row)) for row in rows]
        return page.payload(await self.with_live_remain(views), total)

    async def _own(self, principal: Principal, key_id: int) -> ApiKey:
        async with self.db.transaction() as tx:
            row = await ApiKeyRepository(tx).get_own(principal.id, key_id)
        if row is None:
            raise NotFound("token not found")
        return row

    async def get_key(self, principal: Principal, key_id: int) -> TokenView:
        row = await self._own(principal, key_id)
        return (await self.with_live_remain([TokenView.of(row, reveal(self.box, row))]))[0]

    async def reveal_key(self, principal: Principal, key_id: int) -> RevealedKey:
        """`{key}`: the bare key, without `sk-` — new-api's reply, to which its console adds the prefix."""
        row = await self._own(principal, key_id)
        key = reveal(self.box, row)
        if key is None:
            raise TollwayError("the key cannot be decrypted (was SECRET_KEY changed?)")
        return RevealedKey.of(key)

    async def usage(self, raw: str) -> TokenUsage:
        """`GET /api/usage/token/`: the caller is the key itself, whatever its status."""
        found = await self.keys.lookup(raw) if raw else None
        if found is None or found.deleted:
            raise Unauthenticated("invalid API key")
        async with self.db.transaction() as tx:
            row = await ApiKeyRepository(tx).by_digest(found.digest)
        if row is None or row.deleted_at is not None:
            raise Unauthenticated("invalid API key")
        remain = (await self.quota.balances("key", [row.id], [row.user_id])).get(row.id, row.remain_quota)
        return TokenUsage.of(row, remain)

    # ---- writes -------------------------------------------------------------------------------------

    async def create_key(self, principal: Principal, changes: dict[str, Any]) -> TokenView:
        now = self.clock.now_s()
        values = self.check_fields(principal, {k: v for k, v in changes.items() if k != "status"}, None, now)
        key = new_key()
        row = ApiKey(
            user_id=principal.id, name=values.get("name", ""), key_digest=self.box.digest(key),
            key_encrypted=self.box.encrypt(key), status=KeyStatus.ENABLED, created_time=now,
            accessed_time=now, expired_time=values.get("expired_time", -1),
            remain_quota=values.get("remain_quota", 0), used_quota=0,
            unlimited_quota=values.get("unlimited_quota", False),
            model_limits_enabled=values.get("model_limits_enabled", False),
            model_limits=values.get("model_limits", ""), allow_ips=values.get("allow_ips", ""),
            group=values.get("group", ""),
        )
        async with self.db.transaction() as tx:
            if await UserRepository(tx).get_for_update(principal.id) is None:  # serializes the count below
                raise NotFound("user not found")
            keys = ApiKeyRepository(tx)
            if await keys.count_live(principal.id) >= MAX_KEYS_PER_USER:
                raise Forbidden(f"a user can have at most {MAX_KEYS_PER_USER} tokens")
            await keys.add(row)
        await self.keys.invalidate(row.key_digest)  # an unknown-key answer for it may have been cached
        return TokenView.of(row, key, full=True)

    async def update_key(self, principal: Principal, key_id: int, changes: dict[str, Any], *,
                         status_only: bool) -> TokenView:
        """Apply the present fields (even ""/0/false); `status_only` applies `status` alone."""
        now = self.clock.now_s()
        if status_only:
            if "status" not in changes:
                raise BadRequest("status: is required")
            changes = {"status": _status(changes["status"])}
        live = (await self.quota.balances("key", [key_id], [principal.id])).get(key_id)
        async with self.db.transaction() as tx:
            keys = ApiKeyRepository(tx)
            row = await keys.get_own(principal.id, key_id, lock=True)
            if row is None:
                raise NotFound("token not found")
            values = self.check_fields(principal, changes, row, now)
            current_remain = live if live is not None else row.remain_quota
            new_remain = values.pop("remain_quota", None)
            _check_enable(row, values, current_remain if new_remain is None else new_remain, now)
            if values:
                await keys.update_fields(row.id, **values)
                for name, value in values.items():
                    setattr(row, name, value)
            view = TokenView.of(row, reveal(self.box, row))
        if new_remain is not None and new_remain != current_remain:
            view.remain_quota = await self._set_remain(row.id, row.user_id, new_remain)
        else:
            view = (await self.with_live_remain([view]))[0]
        if values:
            await self.keys.invalidate(row.key_digest)
        return view

    async def _set_remain(self, key_id: int, owner: int, value: int) -> int:
        """Override the key's live remaining quota through the engine (docs/API.md#quota)."""
        try:
            adjusted = await self.quota.set("key", key_id, value, owner=owner,
                                             ref=f"key-set:{key_id}:{secrets.token_hex(12)}")
        except BalanceOutOfRange:
            raise Conflict("remain_quota: exceeds the largest supported amount") from None
        except BalanceUnknown:
            raise NotFound("token not found") from None
        return adjusted.after

    async def delete_key(self, principal: Principal, key_id: int) -> None:
        if await self.delete_keys(principal, [key_id]) == 0:
            raise NotFound("token not found")

    async def delete_keys(self, principal: Principal, key_ids: Sequence[int]) -> int:
        """Soft-delete those of `key_ids` that are the caller's live keys; how many were deleted."""
        ids = sorted(set(key_ids))
        async with self.db.transaction() as tx:
            keys = ApiKeyRepository(tx)
            digests = await keys.live_digests(principal.id, ids)
            deleted = await keys.soft_delete(principal.id, list(digests), self.clock.now_s())
        for digest in digests.values():
            await self.keys.invalidate(digest)
        return deleted
