"""Passwords are hashed with argon2id at OWASP's baseline (19 MiB, t=2, p=1) unless a test hook lowers it.

The in-process test apps run at argon2id's lowest cost (`Faults.password_cost`, tests/harness.py); these
tests keep the production cost honest: a `Config` without the hook hashes at the baseline, the dummy hash an
unknown account's login checks is at that same cost (so both logins cost alike), and a hash stored at the
baseline still verifies in an app running at the lowest cost (argon2 reads the cost from the hash).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from models.users import UserRepository
from server.crypto import DUMMY_HASH, Passwords
from server.faults import NONE
from tests.harness import CHEAPEST_ARGON2, add_user, logged_in, make_config, serve

BASELINE = "$argon2id$v=19$m=19456,t=2,p=1$"
CHEAPEST = "$argon2id$v=19$m=8,t=1,p=1$"


async def test_the_default_cost_is_the_baseline_and_the_dummy_hash_is_at_it() -> None:
    passwords = Passwords()
    stored = await passwords.hash("correct horse")
    assert stored.startswith(BASELINE) and DUMMY_HASH.startswith(BASELINE)
    assert await passwords.verify(stored, "correct horse") is True
    assert await passwords.verify(stored, "wrong horse") is False
    assert await passwords.verify(None, "tollway-dummy-password") is False  # the dummy never signs anyone in


async def test_an_app_without_the_test_hook_hashes_at_the_baseline(sqlite_url: str, tmp_path: Path) -> None:
    config = replace(make_config(sqlite_url, tmp_path), faults=NONE)
    async with serve(config) as running:
        assert (await running.state.passwords.hash("secret-pass")).startswith(BASELINE)


async def test_the_test_apps_hash_cheaply_and_still_verify_a_baseline_hash(sqlite_url: str,
                                                                            tmp_path: Path) -> None:
    config = make_config(sqlite_url, tmp_path)
    assert config.faults.password_cost == CHEAPEST_ARGON2
    async with serve(config) as running:
        assert (await running.state.passwords.hash("secret-pass")).startswith(CHEAPEST)
        user_id = await add_user(running.state, "alice", "alice-password")
        baseline = await Passwords().hash("baseline-password")
        async with running.state.db.transaction() as tx:
            user = await UserRepository(tx).get(user_id)
            assert user is not None
            user.password = baseline
        api = await logged_in(running, "alice", "baseline-password")
        assert api.user_id == user_id
