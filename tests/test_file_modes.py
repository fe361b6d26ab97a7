"""Embedded mode keeps its files private to the service's user: DATA_DIR is created 0700, and the SQLite
database with its `-wal`, `-shm` (and `-journal`) files and the generated secret are 0600 — whatever the
umask, and also for a database file an older version left 0644."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.config import from_env
from tests.conftest import _migrate
from tests.harness import serve

PASSWORD = "root-password-123"


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """A umask that lets anyone read new files (0644), as many hosts have."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def _setup_and_login(data_dir: Path) -> None:
    config = from_env({"DATA_DIR": str(data_dir), "GLOBAL_API_RATE_LIMIT": "0", "CRITICAL_RATE_LIMIT": "0"})
    await _migrate(config.database_url)  # what `tollway serve` does first
    async with serve(config) as app:
        api = app.client()
        created = await api.post("/api/setup", json={"username": "root", "password": PASSWORD,
                                                     "confirmPassword": PASSWORD})
        assert created.status_code == 200, created.text
        assert (await api.login("root", PASSWORD)).status_code == 200
        files = sorted(p.name for p in data_dir.iterdir())
        assert {"tollway.db", "tollway.db-wal", "tollway.db-shm", "secret_key"} <= set(files), files
        for path in data_dir.iterdir():
            assert mode(path) == 0o600, (path.name, oct(mode(path)))


async def test_embedded_files_are_private(tmp_path: Path, loose_umask: None) -> None:
    data_dir = tmp_path / "data"
    await _setup_and_login(data_dir)
    assert mode(data_dir) == 0o700


async def test_a_database_left_readable_is_tightened(tmp_path: Path, loose_umask: None) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    for name in ("tollway.db", "tollway.db-wal", "tollway.db-shm"):
        (data_dir / name).touch(mode=0o644)
    await _setup_and_login(data_dir)
