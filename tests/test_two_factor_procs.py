"""The 2FA failure lock across processes: two real `tollway serve` processes (two nodes) on one MariaDB
and one Redis. Failed 2FA checks made on either count toward one lock, and once locked both refuse with
429 + `Retry-After` (docs/api/auth.md#two-factor-authentication).

Real time here (the processes have their own clocks): the codes come from pyotp for the current moment.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pyotp
import pytest

from tests.test_e2e_serve import ROOT_PASSWORD, free_port, login, mariadb_redis_env, serving, setup_root

pytestmark = pytest.mark.slow


def test_the_lock_is_shared_by_two_processes(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with mariadb_redis_env(tmp_path / "a", "e2e") as (one, _, _):
        two = {**one, "DATA_DIR": str(tmp_path / "b" / "data"), "PORT": str(free_port())}  # a second node
        with serving(tmp_path / "a", one) as (_, url_one), serving(tmp_path / "b", two) as (_, url_two):
            setup_root(url_one, "mysql")
            with httpx.Client(base_url=url_one, timeout=20) as owner:
                uid = login(owner)
                headers = {"New-Api-User": str(uid)}
                setup = owner.post("/api/user/2fa/setup", headers=headers).json()["data"]
                totp = pyotp.TOTP(setup["secret"])
                enabled = owner.post("/api/user/2fa/enable", headers=headers, json={"code": totp.now()})
                assert enabled.status_code == 200, enabled.text

                with httpx.Client(base_url=url_two, timeout=20) as elsewhere:
                    first = elsewhere.post("/api/user/login",
                                           json={"username": "root", "password": ROOT_PASSWORD})
                    assert first.json()["data"] == {"require_2fa": True}
                    for client, path, body, status in (
                        (owner, "/api/user/2fa/disable", {"code": "WRONG-ONE"}, 400),
                        (owner, "/api/verify", {"method": "2fa", "code": "000000"}, 400),
                        (owner, "/api/user/2fa/backup_codes", {"code": "000000"}, 400),
                        (elsewhere, "/api/user/login/2fa", {"code": "000000"}, 401),
                        (elsewhere, "/api/user/login/2fa", {"code": "WRONG-TWO"}, 401),  # the 5th
                    ):
                        response = client.post(path, headers=headers, json=body)
                        assert response.status_code == status, (path, response.text)

                    right = setup["backup_codes"][0]  # a valid code, not looked at while locked
                    for client, path, body in (
                        (elsewhere, "/api/user/login/2fa", {"code": right}),
                        (owner, "/api/user/2fa/disable", {"code": right}),
                        (owner, "/api/verify", {"method": "2fa", "code": right}),
                    ):
                        response = client.post(path, headers=headers, json=body)
                        assert response.status_code == 429, (path, response.text)
                        assert 0 < int(response.headers["retry-after"]) <= 300
                status = owner.get("/api/user/2fa/status", headers=headers).json()["data"]
                assert status == {"enabled": True, "locked": True, "backup_codes_remaining": 10}
