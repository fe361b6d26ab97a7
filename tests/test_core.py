"""The domain core (`core/`): the enums keep the wire's integers, and `MultiKeyState` is a faithful,
tolerant reader and writer of a channel's `channel_info` (the routes that use it are covered by
test_channels.py and test_gateway_routing.py)."""

from __future__ import annotations

import json

from sanic.response import json as sanic_json

from core.enums import ChannelStatus, KeyStatus, LogType, TopUpStatus, UserStatus
from core.identity import Role
from core.multikey import MultiKeyMode, MultiKeyState


def test_members_are_sent_and_stored_as_the_plain_numbers() -> None:
    payload = {"status": KeyStatus.DISABLED, "role": Role.ADMIN, "type": LogType.CONSUME,
               "channel": ChannelStatus.AUTO_DISABLED, "user": UserStatus.DISABLED,
               "topup": TopUpStatus.PENDING}
    expected = {"status": 2, "role": 10, "type": 2, "channel": 3, "user": 2, "topup": "pending"}
    assert json.loads(json.dumps(payload)) == expected
    assert json.loads(sanic_json(payload).body) == expected  # the envelope's serialiser too


def test_a_new_multi_key_state_round_trips() -> None:
    state = MultiKeyState.multi(3, MultiKeyMode.POLLING)
    text = state.dump()
    assert json.loads(text) == {"is_multi_key": True, "multi_key_size": 3, "multi_key_status_list": {},
                                "multi_key_mode": "polling", "multi_key_polling_index": 0,
                                "multi_key_disabled_reason": {}, "multi_key_disabled_time": {}}
    again = MultiKeyState.parse(text)
    assert again.enabled_indices() == [0, 1, 2] and again.mode == "polling"
    assert json.loads(MultiKeyState.single().dump())["is_multi_key"] is False


def test_disabling_keys_until_none_is_left() -> None:
    state = MultiKeyState.multi(2, MultiKeyMode.RANDOM)
    assert state.disable(1, "x" * 300, now=7) is True
    assert state.disable(1, "again", now=8) is False  # not enabled any more
    assert state.disable(2, "no such key", now=8) is False
    assert state.enabled_indices() == [0] and state.has_enabled_key()
    assert state.disable(0, "bad key", now=9) is True
    assert not state.has_enabled_key()
    info = json.loads(state.dump())
    assert info["multi_key_status_list"] == {"0": 3, "1": 3}
    assert info["multi_key_disabled_reason"] == {"0": "bad key", "1": "x" * 255}
    assert info["multi_key_disabled_time"] == {"0": 9, "1": 7}
    assert state.view()["multi_key_status_list"] == {"1": 3, "0": 3}
    state.replace_keys(4)
    assert state.enabled_indices() == [0, 1, 2, 3]
    assert json.loads(state.dump())["multi_key_disabled_time"] == {}


def test_damaged_text_reads_as_absent_and_unknown_fields_are_kept() -> None:
    for text in (None, "", "not json", "[1, 2]", '"text"'):
        state = MultiKeyState.parse(text)
        assert not state.is_multi_key and state.has_enabled_key() and state.view()["multi_key_size"] == 0
    state = MultiKeyState.parse(json.dumps({
        "is_multi_key": True, "multi_key_size": "3", "multi_key_status_list": {"0": "2", "x": 3, "2": "bad"},
        "multi_key_mode": None, "multi_key_polling_index": [], "future_field": {"a": 1}}))
    assert state.size == 3 and state.statuses == {0: 2} and state.mode == MultiKeyMode.RANDOM
    assert state.key_statuses(3) == [2, 1, 1] and state.polling_index == 0
    assert json.loads(state.dump())["future_field"] == {"a": 1}


def test_the_admin_sets_key_statuses_and_deletes_keys_reindexing_the_rest() -> None:
    state = MultiKeyState.multi(5, MultiKeyMode.RANDOM)
    assert state.set_status(1, ChannelStatus.MANUALLY_DISABLED, "manually disabled", 100)
    assert not state.set_status(1, ChannelStatus.MANUALLY_DISABLED, "again", 200)  # unchanged
    assert state.disable(3, "upstream 401", 150)
    assert not state.set_status(9, ChannelStatus.MANUALLY_DISABLED, "x", 1)  # no such key
    assert (state.count(ChannelStatus.ENABLED), state.count(ChannelStatus.MANUALLY_DISABLED),
            state.count(ChannelStatus.AUTO_DISABLED)) == (3, 1, 1)
    state.polling_index = 4
    state.delete_keys([0, 2])  # keys 1, 3, 4 remain as 0, 1, 2
    assert state.size == 3 and state.polling_index == 0
    assert state.key_statuses(3) == [2, 3, 1]
    assert (state.reason(0), state.disabled_at(0)) == ("manually disabled", 100)
    assert (state.reason(1), state.disabled_at(1)) == ("upstream 401", 150)
    assert state.set_status(1, ChannelStatus.ENABLED, "", 300)  # enabling clears reason and time
    assert (state.status(1), state.reason(1), state.disabled_at(1)) == (1, "", 0)
    again = MultiKeyState.parse(state.dump())
    assert again.key_statuses(3) == [2, 1, 1] and again.disabled_reason == {0: "manually disabled"}


def test_settings_are_derived_from_the_option_registry() -> None:
    """Every attribute of `Settings` (and of its composites) is fed by exactly one registry entry's `attr`,
    and every `attr` names an attribute: the option is declared once, in core/option_registry.py."""
    from dataclasses import fields

    from core.option_registry import REGISTRY, SPECS, parse, to_text
    from core.settings import COMPOSITES, Settings

    declared = [spec.attr for spec in SPECS if spec.attr is not None]
    assert len(declared) == len(set(declared)), "two options feed one attribute"
    expected = {f.name for f in fields(Settings) if f.name not in COMPOSITES}
    for name, build in COMPOSITES.items():
        expected |= {f"{name}.{f.name}" for f in fields(build)}  # type: ignore[arg-type]
    assert set(declared) == expected
    # the derived snapshot reads each option: a changed value shows at its attribute
    values = {key: parse(spec, to_text(spec, spec.default)) for key, spec in REGISTRY.items()}
    values.update({"RetryTimes": 7, "SMTPFrom": " a@b.c ", "passkey.user_verification": "bogus",
                   "ModelRatio": {"m": 2, "bad": "x"}})
    settings = Settings.of(values)
    assert settings.retry_times == 7 and settings.smtp.sender == "a@b.c"
    assert settings.passkey.user_verification == "preferred"  # a value outside the set reads as the default
    assert dict(settings.model_ratio) == {"m": 2.0}
