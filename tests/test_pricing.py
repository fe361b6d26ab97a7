"""The price list (docs/api/gateway.md#the-price-list): a user sees the models they may call with the price
the gateway bills; an admin sees every model a channel offers, its channels and groups, and which have no
price; root edits one model's price in place — the JSON options stay the storage, concurrent edits all
stay, bad values are a 400 naming the field, and the next call is billed by the new price."""

from __future__ import annotations

import asyncio
import json
import math
from decimal import Decimal
from typing import Any

import openai
import pytest
from sqlalchemy import select

from models.logs import Log
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Running, add_user, data_of, logged_in

PRICED, UNPRICED, VIP_ONLY, BY_CALL = "gpt-priced", "gpt-unpriced", "gpt-vip", "gpt-per-call"


async def options(app: Running, **values: Any) -> None:
    for key, value in values.items():
        await app.state.options.put(key, json.dumps(value))


async def set_up(app: Running) -> None:
    await add_user(app.state, "root", role=100)
    await add_user(app.state, "admin", role=10)
    await add_user(app.state, "alice")
    await seed_channel(app.state, type=1, base_url="http://127.0.0.1:9", name="main",
                       models=f"{PRICED},{UNPRICED},{BY_CALL}")
    await seed_channel(app.state, type=43, base_url="http://127.0.0.1:9", models=PRICED, name="off", status=2)
    await seed_channel(app.state, type=1, base_url="http://127.0.0.1:9", models=VIP_ONLY, name="vip-chan",
                       group="vip")
    await options(app, ModelRatio={PRICED: 1.25}, CompletionRatio={PRICED: 4}, CacheRatio={PRICED: 0.1},
                  ModelPrice={BY_CALL: 0.002}, GroupRatio={"default": 1, "vip": 2},
                  UserUsableGroups={"default": "Default"})


async def test_a_user_sees_the_models_they_may_call_with_the_billed_price(embedded_app: Running) -> None:
    await set_up(embedded_app)
    alice = await logged_in(embedded_app, "alice")
    response = await alice.get("/api/pricing")
    rows = {row["model_name"]: row for row in data_of(response)}
    assert set(rows) == {PRICED, UNPRICED, BY_CALL}  # not the vip model: alice cannot use vip
    assert response.json()["group_ratio"] == {"default": 1} and response.json()["usable_group"] == {
        "default": "Default"}
    priced = rows[PRICED]  # QuotaPerUnit 500000: ratio 1 is $2 per million tokens
    assert (priced["quota_type"], priced["source"], priced["priced"]) == (0, "model_ratio", True)
    assert (priced["input_per_million"], priced["output_per_million"], priced["cache_read_per_million"],
            priced["cache_write_per_million"]) == (2.5, 10.0, 0.25, 3.125)
    assert priced["per_call"] is None and priced["model_price"] == -1
    assert priced["enable_groups"] == ["default"]
    by_call = rows[BY_CALL]
    assert (by_call["quota_type"], by_call["source"], by_call["per_call"], by_call["input_per_million"]) == (
        1, "model_price", 0.002, None)
    assert (rows[UNPRICED]["priced"], rows[UNPRICED]["source"]) == (False, "none")
    assert (await alice.get("/api/pricing/models")).status_code == 403
    edit = {"model": PRICED, "model_ratio": 1}
    assert (await alice.put("/api/pricing/models", json=edit)).status_code == 403


async def test_an_admin_sees_every_model_its_channels_and_which_have_no_price(embedded_app: Running) -> None:
    await set_up(embedded_app)
    admin = await logged_in(embedded_app, "admin")
    rows = {row["model_name"]: row for row in data_of(await admin.get("/api/pricing/models"))}
    assert set(rows) == {PRICED, UNPRICED, VIP_ONLY, BY_CALL}
    assert [(c["name"], c["status"], c["groups"], c["enabled"]) for c in rows[PRICED]["channels"]] == [
        ("main", 1, ["default"], True), ("off", 2, ["default"], False)]  # a disabled channel is listed too
    assert rows[VIP_ONLY]["enable_groups"] == ["vip"] and not rows[VIP_ONLY]["priced"]
    assert [m for m, row in rows.items() if not row["priced"]] == [UNPRICED, VIP_ONLY]
    edit = {"model": PRICED, "model_ratio": 1}
    assert (await admin.put("/api/pricing/models", json=edit)).status_code == 403


@pytest.mark.parametrize(("body", "field"), [
    ({"model": PRICED, "model_ratio": -1}, "model_ratio"),
    ({"model": PRICED, "cache_ratio": "cheap"}, "cache_ratio"),
    ({"model": PRICED, "completion_ratio": True}, "completion_ratio"), ({"model_ratio": 1}, "model"),
    ({"model": " ", "model_ratio": 1}, "model"), ({"model": PRICED}, "model_ratio"),
    ({"model": PRICED, "model_price": 1e12}, "model_price")])
async def test_a_bad_edit_is_a_400_naming_the_field_and_changes_nothing(
        embedded_app: Running, body: dict[str, Any], field: str) -> None:
    await set_up(embedded_app)
    root = await logged_in(embedded_app, "root")
    before = embedded_app.state.options.text("ModelRatio")
    response = await root.put("/api/pricing/models", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["message"].startswith(field)
    assert embedded_app.state.options.text("ModelRatio") == before


async def test_concurrent_edits_of_one_option_all_stay(app: Running) -> None:
    """Twelve edits at once, each of another model's entry in the same three options: every one stays (a
    read-modify-write without the row lock loses some on every SQL database)."""
    await add_user(app.state, "root", role=100)
    root = await logged_in(app, "root")
    models = [f"m{i}" for i in range(12)]
    edits = [{"model": m, "model_ratio": i + 1, "completion_ratio": 2, "cache_ratio": 0.5}
             for i, m in enumerate(models)]
    replies = await asyncio.gather(*(root.put("/api/pricing/models", json=edit) for edit in edits))
    assert [r.status_code for r in replies] == [200] * len(models), [r.text for r in replies]
    await app.state.options.reload()
    settings = app.state.options.settings
    assert {m: settings.model_ratio.get(m) for m in models} == {m: float(i + 1) for i, m in enumerate(models)}
    assert all(settings.completion_ratio.get(m) == 2 and settings.cache_ratio.get(m) == 0.5 for m in models)


async def test_an_edit_bills_the_next_call_and_null_removes_an_entry(embedded_app: Running,
                                                                      openai_fake: FakeOpenAI) -> None:
    app = embedded_app
    await add_user(app.state, "root", role=100)
    uid = await add_user(app.state, "bob", quota=10_000_000)
    _, key = await seed_key(app.state, uid, unlimited=True)
    await seed_channel(app.state, type=1, base_url=openai_fake.url, models="gpt-fake-chat")
    root = await logged_in(app, "root")
    row = data_of(await root.put("/api/pricing/models", json={
        "model": "gpt-fake-chat", "model_ratio": 3, "completion_ratio": 2, "model_price": None}))
    assert (row["model_ratio"], row["completion_ratio"], row["priced"]) == (3, 2, True)
    assert row["channels"][0]["type"] == 1
    # the option is the storage
    assert json.loads(app.state.options.text("ModelRatio")) == {"gpt-fake-chat": 3}
    client = openai.AsyncOpenAI(api_key=key, base_url=f"{app.url}/v1", max_retries=0)
    hi: Any = [{"role": "user", "content": "hi"}]
    done = await client.chat.completions.create(model="gpt-fake-chat", messages=hi)
    assert done.usage is not None
    await app.state.quota_sync.drain()
    async with app.state.db.transaction() as tx:
        (log,) = (await tx.scalars(select(Log).where(Log.type == 2))).all()
    tokens = Decimal(done.usage.prompt_tokens) + Decimal(done.usage.completion_tokens) * 2
    assert log.quota == math.ceil(tokens * 3)
    row = data_of(await root.put("/api/pricing/models", json={"model": "gpt-fake-chat", "model_ratio": None}))
    assert (row["priced"], row["source"]) == (False, "none")
    assert json.loads(app.state.options.text("ModelRatio")) == {}
    with pytest.raises(openai.BadRequestError) as unpriced:
        await client.chat.completions.create(model="gpt-fake-chat", messages=hi)
    assert unpriced.value.code == "model_price_error"
