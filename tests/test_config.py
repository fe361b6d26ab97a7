"""`server.config`: defaults, the embedded-mode secret (made once, 0600, reused), when `SECRET_KEY` is
required, URL normalisation, and every invalid value → `ConfigError` whose message starts with the name
of the variable (docs/OPERATIONS.md#configuration).

Helper defined here: `env(tmp_path, **values)` (an environment mapping whose DATA_DIR is the test's
temporary directory).
"""

from __future__ import annotations

import ipaddress
import os
import stat
from pathlib import Path

import pytest

from server.config import DEFAULT_MAX_BODY, SECRET_FILE_NAME, ConfigError, RateLimit, from_env, load
from server.faults import Faults, kill_self

SECRET = "0123456789abcdef0123456789abcdef"
ANY_HOST = "0.0.0.0"  # noqa: S104 (a value under test, not a bind)


def env(tmp_path: Path, **values: str) -> dict[str, str]:
    return {"DATA_DIR": str(tmp_path / "data"), **values}


# ---- defaults ----------------------------------------------------------------------------------------

def test_defaults_are_embedded_on_localhost_3000_with_sqlite_in_data_dir(tmp_path: Path) -> None:
    config = from_env(env(tmp_path))
    assert config.embedded and config.redis_url is None
    assert (config.host, config.port, config.workers) == ("127.0.0.1", 3000, 1)
    db_file = (tmp_path / "data" / "tollway.db").resolve()
    assert config.database_url == f"sqlite+aiosqlite:///{db_file}"
    assert config.database_kind == "sqlite"
    assert config.log_database_url is None
    assert config.trusted_proxies == ()
    assert config.metrics_token is None and config.metrics_allow == ()
    assert config.log_format == "text" and config.access_log is False
    assert config.global_rate_limit == RateLimit(180, 180)
    assert config.critical_rate_limit == RateLimit(20, 1200)
    assert config.max_body_size == DEFAULT_MAX_BODY
    assert config.redis_prefix == "tollway:"
    assert config.public_url == "" and not config.secure_cookies
    assert config.faults == Faults()  # the crash and stop tests' hooks are inert unless asked for
    assert config.separate_logs_url is None
    assert (config.request_head_timeout, config.request_body_timeout, config.shutdown_grace) == (20, 120, 30)


def test_a_fault_is_armed_only_behind_the_switch(tmp_path: Path) -> None:
    """`TOLLWAY_TEST_FAULTS=1` lets the `TEST_*` variables arm a fault; without it, one of them set stops
    start-up (a stray variable cannot arm a fault, a test cannot pass with its fault silently off)."""
    on = {"TOLLWAY_TEST_FAULTS": "1"}
    armed = from_env(env(tmp_path, **on, TEST_KILL_AFTER_CREDIT_COMMIT="true")).faults
    assert armed.kill_after_credit_commit is True and armed.after_credit_commit() is kill_self
    assert armed.after_log_commit() is None
    with pytest.raises(ConfigError, match="TEST_KILL_AFTER_CREDIT_COMMIT"):
        from_env(env(tmp_path, **on, TEST_KILL_AFTER_CREDIT_COMMIT="maybe"))
    logs = from_env(env(tmp_path, **on, TEST_KILL_AFTER_LOG_COMMIT="true")).faults
    assert logs.after_log_commit() is kill_self
    assert from_env(env(tmp_path, **on, TEST_WORKER_START_DELAY="3")).faults.worker_start_delay == 3.0
    for name, value in (("TEST_KILL_AFTER_CREDIT_COMMIT", "true"), ("TEST_KILL_AFTER_LOG_COMMIT", "true"),
                        ("TEST_WORKER_START_DELAY", "3")):
        with pytest.raises(ConfigError, match=f"^{name}: .*TOLLWAY_TEST_FAULTS=1"):
            from_env(env(tmp_path, **{name: value}))
    assert from_env(env(tmp_path, **on)).faults == Faults()


def test_a_log_database_counts_as_separate_only_when_it_is_another_one(tmp_path: Path) -> None:
    main, logs = "mysql+aiomysql://u@db/tw", "postgresql+asyncpg://u@logs/twlogs"
    config = from_env(env(tmp_path, DATABASE_URL=main, LOG_DATABASE_URL=logs, SECRET_KEY=SECRET))
    assert config.separate_logs_url == logs
    same = from_env(env(tmp_path, DATABASE_URL=main, LOG_DATABASE_URL=main, SECRET_KEY=SECRET))
    assert same.log_database_url == main and same.separate_logs_url is None  # one database: as unset


def test_without_data_dir_the_data_lives_in_dot_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = from_env({})
    assert config.database_url == f"sqlite+aiosqlite:///{(tmp_path / 'data' / 'tollway.db').resolve()}"
    assert (tmp_path / "data" / SECRET_FILE_NAME).is_file()


def test_values_are_read(tmp_path: Path) -> None:
    config = from_env(env(
        tmp_path, HOST=ANY_HOST, PORT="8080", WORKERS="4", REDIS_URL="redis://cache:6379/2",
        SECRET_KEY=SECRET, DATABASE_URL="postgres://u:p@db/tollway",
        TRUSTED_PROXIES="10.0.0.0/8; 192.168.1.1", METRICS_ALLOW="127.0.0.1, 10.0.0.0/8,fd00::/8",
        GLOBAL_API_RATE_LIMIT="0", CRITICAL_RATE_LIMIT="5", CRITICAL_RATE_LIMIT_DURATION="60",
        PUBLIC_URL="https://gw.example.com/", REDIS_KEY_PREFIX="tw:", REDIS_TIMEOUT="0.5",
        REQUEST_HEAD_TIMEOUT="5", REQUEST_BODY_TIMEOUT="600", SHUTDOWN_GRACE="0",
        LOG_FORMAT="JSON", ACCESS_LOG="yes",
    ))
    assert config.log_format == "json" and config.access_log is True
    assert (config.host, config.port, config.workers) == (ANY_HOST, 8080, 4)
    assert not config.embedded and config.redis_url == "redis://cache:6379/2"
    assert config.secret_key == SECRET
    assert config.database_url == "postgresql+asyncpg://u:p@db/tollway"
    assert config.database_kind == "postgres"
    assert config.trusted_proxies == (ipaddress.ip_network("10.0.0.0/8"),
                                      ipaddress.ip_network("192.168.1.1/32"))
    assert config.metrics_allow == (ipaddress.ip_network("127.0.0.1/32"), ipaddress.ip_network("10.0.0.0/8"),
                                    ipaddress.ip_network("fd00::/8"))
    assert not config.global_rate_limit.enabled
    assert config.critical_rate_limit == RateLimit(5, 60) and config.critical_rate_limit.enabled
    assert config.public_url == "https://gw.example.com" and config.secure_cookies
    assert config.redis_prefix == "tw:" and config.redis_timeout == 0.5
    assert (config.request_head_timeout, config.request_body_timeout, config.shutdown_grace) == (5, 600, 0)


# ---- the embedded secret -----------------------------------------------------------------------------

def test_cluster_nodes_are_read_as_seeds_and_leave_embedded_mode(tmp_path: Path) -> None:
    config = from_env(env(tmp_path, SECRET_KEY=SECRET, WORKERS="4",
                          REDIS_CLUSTER_NODES=" 10.0.0.1:7000, cache-2:7001 ,[::1]:7002"))
    assert config.redis_cluster_nodes == (("10.0.0.1", 7000), ("cache-2", 7001), ("::1", 7002))
    assert config.redis_url is None and not config.embedded and config.workers == 4
    assert config.redis_setting == "REDIS_CLUSTER_NODES"


def test_embedded_secret_is_made_once_with_0600_and_reused(tmp_path: Path) -> None:
    first = from_env(env(tmp_path))
    path = tmp_path / "data" / SECRET_FILE_NAME
    assert path.is_file()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(first.secret_key) >= 32
    assert path.read_text().strip() == first.secret_key

    second = from_env(env(tmp_path))
    assert second.secret_key == first.secret_key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    elsewhere = from_env(env(tmp_path / "other"))
    assert elsewhere.secret_key != first.secret_key


def test_an_explicit_secret_key_wins_and_writes_no_file(tmp_path: Path) -> None:
    config = from_env(env(tmp_path, SECRET_KEY=SECRET))
    assert config.secret_key == SECRET
    assert not (tmp_path / "data" / SECRET_FILE_NAME).exists()


def test_a_damaged_stored_secret_is_refused_not_replaced(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / SECRET_FILE_NAME).write_text("short\n")
    with pytest.raises(ConfigError) as caught:
        from_env(env(tmp_path))
    assert str(caught.value).startswith("SECRET_KEY")
    assert (data / SECRET_FILE_NAME).read_text() == "short\n"


def test_an_unreadable_secret_file_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "data" / SECRET_FILE_NAME).mkdir(parents=True)  # a directory where the file should be
    with pytest.raises(ConfigError) as caught:
        from_env(env(tmp_path))
    assert str(caught.value).startswith(("SECRET_KEY", "DATA_DIR"))


@pytest.mark.parametrize("extra", [
    {"REDIS_URL": "redis://127.0.0.1:6379/0"},
    {"REDIS_CLUSTER_NODES": "127.0.0.1:7000"},
    {"DATABASE_URL": "mysql://root@127.0.0.1/tollway"},
    {"DATABASE_URL": "postgresql://postgres@127.0.0.1/tollway"},
])
def test_secret_key_is_required_with_redis_or_a_server_database(tmp_path: Path,
                                                                extra: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as caught:
        from_env(env(tmp_path, **extra))
    assert str(caught.value).startswith("SECRET_KEY")
    assert not (tmp_path / "data" / SECRET_FILE_NAME).exists()  # no fresh random secret either
    assert from_env(env(tmp_path, SECRET_KEY=SECRET, **extra)).secret_key == SECRET


def test_an_explicit_sqlite_database_keeps_the_embedded_secret(tmp_path: Path) -> None:
    config = from_env(env(tmp_path, DATABASE_URL=f"sqlite:///{tmp_path}/x.db"))
    assert config.database_url == f"sqlite+aiosqlite:///{tmp_path}/x.db"
    assert (tmp_path / "data" / SECRET_FILE_NAME).is_file()


# ---- URL normalisation -------------------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "normalized"), [
    ("mysql://u:p@db:3306/tw", "mysql+aiomysql://u:p@db:3306/tw"),
    ("mysql+aiomysql://u:p@db/tw", "mysql+aiomysql://u:p@db/tw"),
    ("mariadb://u:p@db/tw", "mysql+aiomysql://u:p@db/tw"),
    ("mariadb+aiomysql://u:p@db/tw", "mysql+aiomysql://u:p@db/tw"),
    ("postgres://u@db/tw", "postgresql+asyncpg://u@db/tw"),
    ("postgresql://u@db/tw", "postgresql+asyncpg://u@db/tw"),
    ("postgresql+asyncpg://u@db/tw", "postgresql+asyncpg://u@db/tw"),
    ("sqlite:////var/lib/tw.db", "sqlite+aiosqlite:////var/lib/tw.db"),
    ("sqlite+aiosqlite:///tw.db", "sqlite+aiosqlite:///tw.db"),
])
def test_database_urls_get_the_async_driver(tmp_path: Path, raw: str, normalized: str) -> None:
    config = from_env(env(tmp_path, DATABASE_URL=raw, LOG_DATABASE_URL=raw, SECRET_KEY=SECRET))
    assert config.database_url == normalized
    assert config.log_database_url == normalized


# ---- invalid values ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "value", "extra"), [
    ("PORT", "abc", {}),
    ("PORT", "70000", {}),
    ("PORT", "-1", {}),
    ("WORKERS", "2", {}),
    ("WORKERS", "0", {"REDIS_URL": "redis://127.0.0.1:6379/0", "SECRET_KEY": SECRET}),
    ("WORKERS", "many", {}),
    ("DATABASE_URL", "oracle://scott:tiger@db/orcl", {"SECRET_KEY": SECRET}),
    ("DATABASE_URL", "not a url", {"SECRET_KEY": SECRET}),
    ("DATABASE_URL", "mysql+pymysql://u@db/tw", {"SECRET_KEY": SECRET}),
    ("DATABASE_URL", "postgresql+psycopg2://u@db/tw", {"SECRET_KEY": SECRET}),
    ("LOG_DATABASE_URL", "oracle://scott:tiger@db/orcl", {}),
    ("LOG_DATABASE_URL", "mysql+pymysql://u@db/tw", {}),
    ("REDIS_URL", "http://127.0.0.1:6379", {"SECRET_KEY": SECRET}),
    ("REDIS_URL", "127.0.0.1:6379", {"SECRET_KEY": SECRET}),
    ("REDIS_CLUSTER_NODES", "127.0.0.1", {"SECRET_KEY": SECRET}),
    ("REDIS_CLUSTER_NODES", "127.0.0.1:7000,cache:port", {"SECRET_KEY": SECRET}),
    ("REDIS_CLUSTER_NODES", "cache:70000", {"SECRET_KEY": SECRET}),
    ("REDIS_CLUSTER_NODES", "127.0.0.1:7000", {"SECRET_KEY": SECRET, "REDIS_URL": "redis://cache:6379/0"}),
    ("TRUSTED_PROXIES", "nonsense", {}),
    ("TRUSTED_PROXIES", "10.0.0.0/8, 300.1.1.1", {}),
    ("METRICS_ALLOW", "localhost", {}),
    ("ACCESS_LOG", "sometimes", {}),
    ("METRICS_ALLOW", "10.0.0.0/33", {}),
    ("SECRET_KEY", "short", {}),
    ("PUBLIC_URL", "ftp://gw.example.com", {}),
    ("GLOBAL_API_RATE_LIMIT", "lots", {}),
    ("GLOBAL_API_RATE_LIMIT", "-5", {}),
    ("GLOBAL_API_RATE_LIMIT_DURATION", "1.5", {}),
    ("CRITICAL_RATE_LIMIT", "x", {}),
    ("CRITICAL_RATE_LIMIT_DURATION", "-1", {}),
    ("MAX_BODY_SIZE", "12", {}),
    ("LOG_LEVEL", "LOUD", {}),
    ("USER_CACHE_SECONDS", "soon", {}),
    ("REDIS_TIMEOUT", "0", {}),
    ("REDIS_TIMEOUT", "forever", {}),
    ("REQUEST_HEAD_TIMEOUT", "0", {}),
    ("REQUEST_HEAD_TIMEOUT", "soon", {}),
    ("REQUEST_BODY_TIMEOUT", "86400", {}),
    ("SHUTDOWN_GRACE", "-1", {}),
])
def test_an_invalid_value_is_a_config_error_naming_the_variable(tmp_path: Path, name: str, value: str,
                                                                extra: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as caught:
        from_env(env(tmp_path, **{**extra, name: value}))
    message = str(caught.value)
    assert message.startswith(f"{name}:"), message
    assert "\n" not in message


def test_data_dir_that_cannot_be_created_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ConfigError) as caught:
        from_env({"DATA_DIR": str(blocker / "data")})
    assert str(caught.value).startswith("DATA_DIR:")


@pytest.mark.parametrize("bad", [{"PORT": "x"}, {"CRITICAL_RATE_LIMIT": "-1"},
                                 {"TEST_WORKER_START_DELAY": "1"}])
def test_a_refused_setting_creates_no_data_dir_and_no_secret(tmp_path: Path, bad: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        from_env(env(tmp_path, **bad))
    assert not (tmp_path / "data").exists()  # every value is checked before DATA_DIR is made


def test_a_database_password_never_appears_in_the_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        from_env(env(tmp_path, DATABASE_URL="oracle://scott:hunter2@db/orcl", SECRET_KEY=SECRET))
    assert "hunter2" not in str(caught.value)


# ---- .env --------------------------------------------------------------------------------------------

def test_dotenv_is_read_and_the_environment_wins(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text(f"PORT=4000\nHOST=0.0.0.0\nDATA_DIR={tmp_path / 'data'}\n")
    config = load({"PORT": "5000"}, str(dotenv))
    assert (config.host, config.port) == (ANY_HOST, 5000)
    assert load({}, str(dotenv)).port == 4000
    assert load({"DATA_DIR": str(tmp_path / "d2")}, str(tmp_path / "missing.env")).port == 3000


def test_load_reads_the_process_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PORT", "3999")
    assert load(None, None).port == 3999
    assert os.environ["PORT"] == "3999"
