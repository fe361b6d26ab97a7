"""Numbers written as text are read in ASCII only (core/numerals.py), wherever Tollway reads one: every
integer and decimal environment setting (server/config_vars.py), the port of a Redis Cluster seed, the
`tollway serve --port/--workers` arguments, every int and float site option (`PUT /api/option/` and the
stored text read back), and the status codes of an option's list.

    refused      any text that is not `-?[0-9]+` — `١٦`, `１６`, `1_6`, `+16`, ` 16`, `16\\n`, `0x10` — for
                 an integer (a `-` too, where no negative is allowed), and anything with a character other
                 than the digits, `.`, `e`, `E`, `+` and `-` for a decimal (`inf`, `nan`, `1_0`, `١.5`), with
                 a message that starts with the setting's or option's name (property tests, hypothesis)
    read back    a stored option value that is not so written reads as the option's default
    still read   ASCII digits are read as before (`16`, `007`, `0.5`, `1e-05`)
"""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from core.option_registry import REGISTRY, SPECS, OptionError, normalize, parse
from core.option_values import parse_status_ranges
from server.cli import main
from server.config import ConfigError, from_env
from server.config_vars import VARS

INT_SETTINGS = sorted(var.name for var in VARS if var.parse.kind == "int")
FLOAT_SETTINGS = sorted(var.name for var in VARS if var.parse.kind == "float")
INT_OPTIONS = sorted(spec.key for spec in SPECS if spec.kind == "int")
FLOAT_OPTIONS = sorted(spec.key for spec in SPECS if spec.kind == "float")
# a server database and a secret: from_env creates no directory and no file
BASE = {"DATABASE_URL": "postgresql://u@db/tollway", "SECRET_KEY": "0123456789abcdef0123456789abcdef"}

WHOLE = re.compile(r"-?[0-9]+")
DECIMAL_CHARS = set("0123456789.eE+-")
# what int() and float() accept besides ASCII digits, mixed with digits and signs
LOOKALIKE = st.from_regex(r"[ +\-\t]?[0-9١٦０-９²_.eE]{1,5}[ \n]?", fullmatch=True)
NOT_WHOLE = st.one_of(st.text(min_size=1), LOOKALIKE, st.sampled_from(["-16", "-0"])).filter(
    lambda text: not WHOLE.fullmatch(text) or text.startswith("-"))
NOT_DECIMAL = st.one_of(st.text(min_size=1), LOOKALIKE, st.sampled_from(["inf", "nan", "Infinity"])).filter(
    lambda text: bool(set(text) - DECIMAL_CHARS) or text.startswith(("+", "-")))


def test_the_settings_and_options_under_test_are_found() -> None:
    assert {"PORT", "WORKERS", "MAX_BODY_SIZE", "QUOTA_SYNC_BATCH"} <= set(INT_SETTINGS)
    assert {"REDIS_TIMEOUT", "REQUEST_BODY_TIMEOUT", "SHUTDOWN_GRACE"} <= set(FLOAT_SETTINGS)
    assert {"RetryTimes", "SMTPPort", "QuotaForNewUser"} <= set(INT_OPTIONS)
    assert {"QuotaPerUnit", "StripeUnitPrice"} <= set(FLOAT_OPTIONS)
    assert not any(REGISTRY[key].negative for key in INT_OPTIONS + FLOAT_OPTIONS)  # none may be below 0


# ---- environment settings ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", INT_SETTINGS)
@settings(max_examples=60, deadline=None)
@given(text=NOT_WHOLE)
@example(text="١٦").via("Arabic-Indic digits")
@example(text="１６").via("full-width digits")
@example(text="1_6").via("an underscore")
@example(text="+16").via("a plus sign")
@example(text=" 16").via("a leading space")
@example(text="16\n").via("a trailing line break")
def test_an_integer_setting_takes_ascii_digits_only(name: str, text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        from_env({**BASE, name: text})
    assert str(caught.value).startswith(f"{name}: "), caught.value


@pytest.mark.parametrize("name", FLOAT_SETTINGS)
@settings(max_examples=60, deadline=None)
@given(text=NOT_DECIMAL)
@example(text="١.5").via("an Arabic-Indic digit")
@example(text="1_0").via("an underscore")
@example(text="+2").via("a plus sign")
@example(text=" 2").via("a leading space")
@example(text="nan").via("not a number")
def test_a_decimal_setting_takes_ascii_digits_only(name: str, text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        from_env({**BASE, name: text})
    assert str(caught.value).startswith(f"{name}: "), caught.value


def test_ascii_numbers_are_read_as_before() -> None:
    config = from_env({**BASE, "PORT": "016", "QUOTA_SYNC_BATCH": "500", "REDIS_TIMEOUT": "0.5",
                       "QUOTA_SYNC_INTERVAL": "5e-1", "REDIS_CLUSTER_NODES": "cache:7000,[::1]:07001"})
    assert (config.port, config.quota_sync_batch, config.redis_timeout) == (16, 500, 0.5)
    assert config.quota_sync_interval == 0.5
    assert config.redis_cluster_nodes == (("cache", 7000), ("::1", 7001))


@settings(max_examples=60, deadline=None)
@given(text=NOT_WHOLE.filter(lambda text: not set(text) & {",", ";"} and text == text.rstrip()))
@example(text="٧٠٠٠").via("Arabic-Indic digits")
def test_a_cluster_seed_port_takes_ascii_digits_only(text: str) -> None:
    """(`,` and `;` separate seeds, and white space around a seed is no part of it.)"""
    with pytest.raises(ConfigError) as caught:
        from_env({**BASE, "REDIS_CLUSTER_NODES": f"cache:{text}"})
    assert str(caught.value).startswith("REDIS_CLUSTER_NODES: "), caught.value


@pytest.mark.parametrize("argument", ["--port", "--workers"])
@pytest.mark.parametrize("text", ["١٦", "+16", "1_6", " 16"])
def test_a_command_line_number_takes_ascii_digits_only(argument: str, text: str,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    def no_config() -> None:  # a number taken would go on to read the configuration: stop there
        raise ConfigError("LOAD: the arguments were taken")

    monkeypatch.setattr("server.cli.load", no_config)
    with pytest.raises(SystemExit) as ended:
        main(["serve", argument, text])
    assert ended.value.code == 2
    refused = capsys.readouterr().err
    assert f"argument {argument}: " in refused and "LOAD" not in refused, refused


# ---- site options ----------------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(key=st.sampled_from(INT_OPTIONS), text=NOT_WHOLE)
@example(key="RetryTimes", text="١").via("an Arabic-Indic digit")
@example(key="RetryTimes", text="+3").via("a plus sign")
@example(key="RetryTimes", text=" 3").via("a leading space")
@example(key="QuotaForNewUser", text="1_000").via("an underscore")
def test_an_integer_option_takes_ascii_digits_only(key: str, text: str) -> None:
    with pytest.raises(OptionError) as caught:
        normalize(key, text)
    assert str(caught.value).startswith(f"{key}: "), caught.value
    spec = REGISTRY[key]
    assert parse(spec, text) == spec.default  # a stored value so written is damaged: the default


@settings(max_examples=200, deadline=None)
@given(key=st.sampled_from(FLOAT_OPTIONS), text=NOT_DECIMAL)
@example(key="QuotaPerUnit", text="١٦").via("Arabic-Indic digits")
@example(key="QuotaPerUnit", text="1_000").via("an underscore")
@example(key="USDExchangeRate", text=" 7.3").via("a leading space")
def test_a_decimal_option_takes_ascii_digits_only(key: str, text: str) -> None:
    with pytest.raises(OptionError) as caught:
        normalize(key, text)
    assert str(caught.value).startswith(f"{key}: "), caught.value
    spec = REGISTRY[key]
    assert parse(spec, text) == spec.default


def test_ascii_option_values_are_read_as_before() -> None:
    assert normalize("RetryTimes", "007") == "7" and normalize("RetryTimes", 3.0) == "3"
    assert normalize("QuotaPerUnit", "0.5") == "0.5" and normalize("QuotaPerUnit", "1e-05") == "1e-05"
    assert parse(REGISTRY["SMTPPort"], "465") == 465 and parse(REGISTRY["QuotaPerUnit"], "1.5e+16") == 1.5e16


@pytest.mark.parametrize("text", ["٤٢٩", "4_29", "+429", "429,５００-599"])
def test_a_status_code_list_takes_ascii_digits_only(text: str) -> None:
    with pytest.raises(ValueError, match="is not a status code"):
        parse_status_ranges(text)
    with pytest.raises(OptionError, match=r"^AutomaticRetryStatusCodes: "):
        normalize("AutomaticRetryStatusCodes", text)
    assert parse_status_ranges(" 429 , 500 - 599 ") == ((429, 429), (500, 599))
