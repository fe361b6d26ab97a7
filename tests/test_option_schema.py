"""`GET /api/option/schema` (docs/api/options.md#options): how every option is edited, served from the one
declaration in core/option_registry.py — each option once, in its section, with its kind, label and
secrecy; a secret is described but its value never shown; and the bounds it tells are exactly the ones
`PUT /api/option/` enforces (the value at a bound is taken, one step past it is a 400 naming the key).
Root only (the access matrix covers the route with every role too)."""

from __future__ import annotations

from typing import Any

from core.option_registry import REGISTRY, SECTIONS
from tests.harness import Api, Running, add_user, logged_in

FIELDS = {"key", "kind", "label", "hint", "secret", "choices", "minimum", "exclusive_minimum", "maximum",
          "min_length", "max_length"}


async def root_api(running: Running) -> Api:
    await add_user(running.state, "root", role=100)
    return await logged_in(running, "root")


async def schema(api: Api) -> list[dict[str, Any]]:
    response = await api.get("/api/option/schema")
    assert response.status_code == 200, response.text
    sections: list[dict[str, Any]] = response.json()["data"]
    return sections


async def test_the_schema_describes_every_option_once_in_its_section(embedded_app: Running) -> None:
    await add_user(embedded_app.state, "admin1", role=10)
    admin = await logged_in(embedded_app, "admin1")
    assert (await admin.get("/api/option/schema")).status_code == 403
    api = await root_api(embedded_app)
    secret = "smtp-secret-value-42"
    assert (await api.put("/api/option/", json={"key": "SMTPToken", "value": secret})).status_code == 200

    response = await api.get("/api/option/schema")
    assert secret not in response.text  # a secret is described, never shown
    sections = await schema(api)
    assert [s["id"] for s in sections] == [s.id for s in SECTIONS]
    assert [s["title"] for s in sections] == [
        "Site", "Registration and sign-in", "Quota and pricing", "Channels", "Rate limits", "E-mail",
        "Payments", "Passkeys", "Compatibility"]
    keys = [option["key"] for section in sections for option in section["options"]]
    assert keys == list(REGISTRY)  # every option, once, in the registry's order
    for section in sections:
        assert section["title"] and section["intro"]
        for option in section["options"]:
            spec = REGISTRY[option["key"]]
            assert set(option) == FIELDS
            assert (option["kind"], option["secret"], option["label"]) == (spec.kind, spec.secret, spec.label)
            assert option["label"]
    by_key = {o["key"]: o for s in sections for o in s["options"]}
    assert {k for k, o in by_key.items() if o["secret"]} == {"SMTPToken", "StripeApiSecret",
                                                             "StripeWebhookSecret"}
    assert by_key["RetryTimes"] == {
        "key": "RetryTimes", "kind": "int", "label": "Retries on another channel", "hint": "",
        "secret": False, "choices": None, "minimum": 0, "exclusive_minimum": False, "maximum": 10,
        "min_length": None, "max_length": None}
    assert by_key["passkey.attachment_preference"]["choices"] == ["", "platform", "cross-platform"]
    assert by_key["QuotaPerUnit"]["minimum"] == 0 and by_key["QuotaPerUnit"]["exclusive_minimum"] is True
    assert (by_key["SystemName"]["min_length"], by_key["SystemName"]["max_length"]) == (1, 64)
    assert by_key["ModelRatio"]["kind"] == "json" and by_key["ModelRatio"]["minimum"] is None


def probes(option: dict[str, Any]) -> list[tuple[Any, bool]]:
    """(value, whether PUT must take it) at and one step past each bound the schema tells."""
    out: list[tuple[Any, bool]] = []
    number = int if option["kind"] == "int" else float
    if option["minimum"] is not None:
        low = number(option["minimum"])
        out += [(low, not option["exclusive_minimum"]), (low - 1, False)]
    if option["maximum"] is not None:
        high = number(option["maximum"])
        out += [(high, True), (high + 1, False)]
    if option["choices"] is not None:
        out += [(choice, True) for choice in option["choices"]] + [("no-such-choice", False)]
    if option["max_length"] is not None:
        out += [("x" * option["max_length"], True), ("x" * (option["max_length"] + 1), False)]
    if option["min_length"]:
        out += [("x" * (option["min_length"] - 1), False)]
    return out


async def test_the_bounds_told_are_the_bounds_put_enforces(embedded_app: Running) -> None:
    api = await root_api(embedded_app)
    checked = 0
    for section in await schema(api):
        for option in section["options"]:
            for value, taken in probes(option):
                response = await api.put("/api/option/", json={"key": option["key"], "value": value})
                assert response.status_code == (200 if taken else 400), (option["key"], value, response.text)
                if not taken:
                    assert response.json()["message"].startswith(f"{option['key']}: ")
                checked += 1
    assert checked > 40  # ranges, choices and lengths were all probed
