"""Seeding for gateway tests: users with a balance, API keys and channels, written straight to the
database the way the admin routes store them (encrypted keys, abilities), then made routable at once."""

from __future__ import annotations

import json
import secrets
import string
from typing import Any

from models.abilities import Ability
from models.channels import Channel
from models.keys import ApiKey
from server.context import State

ALPHABET = string.ascii_letters + string.digits


def new_key() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(48))


async def seed_key(state: State, user_id: int, *, remain: int = 0, unlimited: bool = False,
                   name: str = "test key", status: int = 1, expired_time: int = -1, group: str = "",
                   model_limits: str = "", allow_ips: str = "") -> tuple[int, str]:
    """An API key row; returns (id, "sk-<key>")."""
    key = new_key()
    async with state.db.transaction() as tx:
        row = ApiKey(user_id=user_id, name=name, key_digest=state.box.digest(key),
                     key_encrypted=state.box.encrypt(key), status=status, created_time=state.clock.now_s(),
                     accessed_time=0, expired_time=expired_time, remain_quota=remain, used_quota=0,
                     unlimited_quota=unlimited, model_limits_enabled=bool(model_limits),
                     model_limits=model_limits, allow_ips=allow_ips, group=group)
        tx.add(row)
        await tx.flush()
        key_id = row.id
    return key_id, f"sk-{key}"


async def seed_channel(state: State, *, type: int, base_url: str, models: str, key: str = "upstream-key",
                       name: str = "", group: str = "default", priority: int = 0, weight: int = 0,
                       status: int = 1, multi_key_mode: str | None = None, model_mapping: str = "",
                       status_code_mapping: str = "", auto_ban: int = 1, header_override: str = "") -> int:
    keys = [k for k in key.split("\n") if k]
    multi = multi_key_mode is not None
    info: dict[str, Any] = {"is_multi_key": multi, "multi_key_size": len(keys) if multi else 0,
                            "multi_key_status_list": {}, "multi_key_mode": multi_key_mode or "random",
                            "multi_key_polling_index": 0}
    async with state.db.transaction() as tx:
        row = Channel(type=type, name=name or f"channel-{secrets.token_hex(3)}",
                      key_encrypted=state.box.encrypt("\n".join(keys)),
                      key_digest=state.box.digest("\n".join(keys)), status=status, models=models, group=group,
                      priority=priority, weight=weight, base_url=base_url, test_model="",
                      openai_organization="", other="", tag="", remark="", model_mapping=model_mapping,
                      status_code_mapping=status_code_mapping, setting="", param_override="",
                      header_override=header_override, settings="", auto_ban=auto_ban, balance=0.0,
                      balance_updated_time=0, used_quota=0, created_time=state.clock.now_s(), test_time=0,
                      response_time=0, other_info="", channel_info=json.dumps(info))
        tx.add(row)
        await tx.flush()
        channel_id = row.id
        for g in group.split(","):
            for m in models.split(","):
                tx.add(Ability(group=g.strip(), model=m.strip(), channel_id=channel_id, enabled=status == 1,
                               priority=priority, weight=weight, tag=""))
    await state.channels.changed()
    return channel_id
