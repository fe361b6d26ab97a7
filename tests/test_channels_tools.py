"""The channel tools that call no upstream (docs/api/channels.md#channel-tools), over HTTP on every stack:

- `POST /api/channel/:id/key` is root-only and, without a secure verification of the session, 403
  `VERIFICATION_REQUIRED` (checked before the channel: an unknown id is a 403 too) and writes nothing;
  with a verifier that passes (injected into the service, no mock of the database) it answers the keys
  one per line and writes a system log naming the admin and the channel, never the key (the real
  verification over HTTP: tests/test_secure_verification.py);
- `DELETE /api/channel/disabled` deletes status 2 and 3 channels with their abilities → the count;
- `POST /api/channel/batch` deletes the ids it finds in one transaction → the number actually deleted;
  `POST /api/channel/batch/tag` sets or clears the tag of channels and their abilities;
- `POST /api/channel/copy/:id` copies keys and settings under a new name, resets the test fields and
  (by default) the balance, and routes the copy at once;
- `POST /api/channel/fix` rebuilds every ability (and drops strays) → `{success, fails}`; 409 while the
  cluster-wide lock is held.
Every refusal is a 400 naming the field, a 404 or a 409.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select, update

from core.enums import LogType
from core.identity import Principal, UserState
from models.abilities import Ability
from models.channels import Channel
from models.logs import Log
from server.channels.keyring import ChannelKeys
from server.channels.tools import FIX_LOCK
from server.components.verification import VERIFICATION_EXPIRED
from server.errors import Forbidden, NotFound
from server.metrics import DisableReason
from tests.harness import Running, add_user, logged_in
from tests.test_channels import (
    abilities_of,
    admin_of,
    create,
    data_of,
    fails,
    keys_in_db,
    routed,
    row_of,
)

VERIFICATION_REQUIRED_BODY = {"success": False, "message": "secure verification required",
                              "code": "VERIFICATION_REQUIRED"}


class Verified:
    """A secure verifier that finds every caller verified (as `SessionVerifier` does for a session
    verified a minute ago)."""

    async def require(self, principal: Principal) -> None:
        return None


class Expired:
    async def require(self, principal: Principal) -> None:
        raise Forbidden("secure verification required", code=VERIFICATION_EXPIRED)


def service_with(app: Running, verifier: Any) -> ChannelKeys:
    current: ChannelKeys = app.app.ctx.services.channels.keys
    return ChannelKeys(db=current.db, channels=current.channels, box=current.box, verifier=verifier,
                       clock=current.clock)


async def logs(app: Running) -> list[Log]:
    async with app.state.db.transaction() as tx:
        return list((await tx.scalars(select(Log).order_by(Log.id))).all())


# ---- the key reveal -----------------------------------------------------------------------------------

async def test_the_key_reveal_needs_root_and_a_verification(app: Running) -> None:
    admin = await admin_of(app)
    [cid] = await create(admin)
    await add_user(app.state, "root", role=100)
    root = await logged_in(app, "root")
    for channel_id in (cid, 10**9):  # the verification is checked before the channel
        reply = await root.post(f"/api/channel/{channel_id}/key")
        assert reply.status_code == 403 and reply.json() == VERIFICATION_REQUIRED_BODY
    fails(await admin.post(f"/api/channel/{cid}/key"), 403, "permission denied")
    fails(await root.post("/api/channel/abc/key"), 400, "id:")
    assert await logs(app) == []  # nothing revealed, nothing logged


async def test_a_verified_root_sees_the_keys_and_the_reveal_is_logged(app: Running) -> None:
    admin = await admin_of(app)
    [single] = await create(admin, key="AIza-single-secret", name="solo")
    [multi] = await create(admin, "multi_to_single", key="k-one-secret\nk-two-secret\nk-three-secret",
                           name="many")
    root_id = await add_user(app.state, "root", role=100)
    root = Principal(UserState(id=root_id, username="root", display_name="root", role=100, status=1,
                               group="default", token_digest=None, deleted=False), via="session")
    verified = service_with(app, Verified())
    assert (await verified.reveal_key(root, single)).key == "AIza-single-secret"
    assert (await verified.reveal_key(root, multi)).key == "k-one-secret\nk-two-secret\nk-three-secret"
    try:
        await verified.reveal_key(root, 10**9)
        raise AssertionError("an unknown channel must be a 404")
    except NotFound:
        pass
    try:
        await service_with(app, Expired()).reveal_key(root, single)
        raise AssertionError("an expired verification must be refused")
    except Forbidden as refused:
        assert refused.code == VERIFICATION_EXPIRED
    rows = await logs(app)
    assert [(r.type, r.user_id, r.username, r.channel) for r in rows] == [
        (LogType.SYSTEM, root_id, "root", single), (LogType.SYSTEM, root_id, "root", multi)]
    assert rows[0].content == f"admin root viewed the key of channel #{single} solo"
    assert '"admin_username":"root"' in rows[1].other and f'"channel_id":{multi}' in rows[1].other
    for row in rows:
        assert "secret" not in row.content + row.other


# ---- delete disabled, batch delete, batch tag ----------------------------------------------------------

async def test_delete_disabled_removes_status_2_and_3_with_their_abilities(app: Running) -> None:
    admin = await admin_of(app)
    [enabled] = await create(admin, name="on")
    [manual] = await create(admin, name="off", status=2)
    [auto] = await create(admin, name="auto")
    channel = app.state.channels.get(auto)
    assert channel is not None
    await app.state.channels.auto_disable(channel, None, "upstream 401", why=DisableReason.UPSTREAM_STATUS)
    assert data_of(await admin.delete("/api/channel/disabled")) == 2
    assert await row_of(app, manual) is None and await row_of(app, auto) is None
    assert await abilities_of(app, manual) == set() and await abilities_of(app, auto) == set()
    assert app.state.channels.get(auto) is None and routed(app, "gemini-2.5-flash") == enabled
    assert len(await abilities_of(app, enabled)) == 1
    assert data_of(await admin.delete("/api/channel/disabled")) == 0


async def test_batch_delete_counts_what_it_really_deleted(app: Running) -> None:
    admin = await admin_of(app)
    one, two, three = [(await create(admin, name=f"c{i}"))[0] for i in range(3)]
    assert data_of(await admin.post("/api/channel/batch", json={"ids": [one, two, 10**9, one]})) == 2
    assert await row_of(app, one) is None and await row_of(app, two) is None
    assert await abilities_of(app, one) == set() and app.state.channels.get(two) is None
    assert routed(app, "gemini-2.5-flash") == three
    assert data_of(await admin.post("/api/channel/batch", json={"ids": [one]})) == 0
    for body in ({}, {"ids": []}, {"ids": "1"}, {"ids": [0]}, {"ids": ["1"]}, {"ids": [True]},
                 {"ids": list(range(1, 1002))}):
        fails(await admin.post("/api/channel/batch", json=body), 400, "ids:")
    assert await row_of(app, three) is not None


async def test_batch_tag_sets_and_clears_the_tag_of_channels_and_abilities(app: Running) -> None:
    admin = await admin_of(app)
    [one] = await create(admin, name="a", tag="old")
    [two] = await create(admin, name="b", models="m1,m2")
    assert data_of(await admin.post("/api/channel/batch/tag", json={"ids": [one, two, 10**9],
                                                                     "tag": " fresh "})) == 2
    for cid in (one, two):
        row = await row_of(app, cid)
        assert row is not None and row.tag == "fresh"
        assert {a[5] for a in await abilities_of(app, cid)} == {"fresh"}
    assert data_of(await admin.post("/api/channel/batch/tag", json={"ids": [one], "tag": None})) == 1
    assert (await row_of(app, one)).tag == ""  # type: ignore[union-attr]
    assert data_of(await admin.post("/api/channel/batch/tag", json={"ids": [two], "tag": ""})) == 1
    assert {a[5] for a in await abilities_of(app, two)} == {""}
    fails(await admin.post("/api/channel/batch/tag", json={"ids": [one], "tag": "t" * 65}), 400, "tag:")
    fails(await admin.post("/api/channel/batch/tag", json={"ids": [one], "tag": 5}), 400, "tag:")
    fails(await admin.post("/api/channel/batch/tag", json={"tag": "x"}), 400, "ids:")


# ---- copy ---------------------------------------------------------------------------------------------

async def test_copy_keeps_keys_and_settings_and_resets_tests_and_balance(app: Running) -> None:
    admin = await admin_of(app)
    [source] = await create(admin, "multi_to_single", key="k-1\nk-2", name="orig", models="m-a,m-b",
                            group="default,vip", priority=4, weight=2, tag="t", remark="r",
                            model_mapping='{"m-a":"m-up"}', multi_key_mode="polling")
    async with app.state.db.transaction() as tx:
        await tx.execute(update(Channel).where(Channel.id == source).values(
            balance=12.5, used_quota=900, balance_updated_time=5, test_time=7, response_time=300,
            created_time=1))
    app.state.clock.shift(60)
    before = app.state.clock.now_s()
    reply = data_of(await admin.post(f"/api/channel/copy/{source}"))
    after = app.state.clock.now_s()  # a second may begin during the call
    copy = await row_of(app, reply["id"])
    original = await row_of(app, source)
    assert copy is not None and original is not None and copy.id != source
    assert copy.name == "orig_copy" and keys_in_db(app, copy) == ["k-1", "k-2"]
    same = ("type", "key_digest", "status", "models", "group", "priority", "weight", "tag", "remark",
            "model_mapping", "channel_info", "auto_ban", "base_url")
    assert {f: getattr(copy, f) for f in same} == {f: getattr(original, f) for f in same}
    assert (copy.test_time, copy.response_time, copy.balance, copy.used_quota) == (0, 0, 0, 0)
    assert before <= copy.created_time <= after and copy.created_time != original.created_time
    assert {a[:2] for a in await abilities_of(app, copy.id)} == {
        (g, m) for g in ("default", "vip") for m in ("m-a", "m-b")}
    routed_copy = app.state.channels.get(copy.id)
    assert routed_copy is not None and routed_copy.keys == ["k-1", "k-2"]

    kept = data_of(await admin.post(f"/api/channel/copy/{source}",
                                    params={"suffix": " (2)", "reset_balance": "false"}))
    second = await row_of(app, kept["id"])
    assert second is not None and second.name == "orig (2)"
    assert (second.balance, second.used_quota, second.test_time) == (12.5, 900, 0)

    fails(await admin.post(f"/api/channel/copy/{10**9}"), 404, "channel not found")
    fails(await admin.post("/api/channel/copy/abc"), 400, "id:")
    fails(await admin.post(f"/api/channel/copy/{source}", params={"reset_balance": "maybe"}), 400,
          "reset_balance:")
    fails(await admin.post(f"/api/channel/copy/{source}", params={"suffix": "x" * 97}), 400, "suffix:")
    fails(await admin.post(f"/api/channel/copy/{source}", params={"suffix": "a\x01"}), 400, "suffix:")


# ---- fix ------------------------------------------------------------------------------------------------

async def test_fix_rebuilds_every_ability_and_is_refused_while_running(app: Running) -> None:
    admin = await admin_of(app)
    [one] = await create(admin, name="a", models="m1,m2", group="default,vip", priority=3)
    [two] = await create(admin, name="b", models="m3", status=2)
    expected = {cid: await abilities_of(app, cid) for cid in (one, two)}
    async with app.state.db.transaction() as tx:  # damage: a lost row, a wrong flag, a stray
        await tx.execute(delete(Ability).where(Ability.channel_id == one, Ability.model == "m2"))
        await tx.execute(update(Ability).where(Ability.channel_id == two).values(enabled=True, priority=9))
        tx.add(Ability(group="default", model="ghost", channel_id=10**9, enabled=True, priority=0, weight=0,
                       tag=""))
    assert data_of(await admin.post("/api/channel/fix")) == {"success": 2, "fails": 0}
    assert {cid: await abilities_of(app, cid) for cid in (one, two)} == expected
    assert await abilities_of(app, 10**9) == set()
    assert routed(app, "m2", "vip") == one and routed(app, "m3") is None

    assert await app.state.backend.set_text_if_absent(FIX_LOCK, "someone-else", 60)  # a rebuild elsewhere
    fails(await admin.post("/api/channel/fix"), 409, "a rebuild of the abilities is already running")
    await app.state.backend.delete(FIX_LOCK)
    assert data_of(await admin.post("/api/channel/fix")) == {"success": 2, "fails": 0}
    assert await app.state.backend.get_text(FIX_LOCK) is None  # released after the run
