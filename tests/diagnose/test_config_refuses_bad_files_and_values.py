"""`--config FILE.toml`: every key is type- and range-checked, and a file that cannot be read as
a table of settings is refused; each refusal is one BadInput line naming the key (the CLI prints
it and exits 2), never a traceback, never a value silently taken."""
from __future__ import annotations

import dataclasses
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from roceview.diagnose import DEFAULTS, Config, load_config
from roceview.diagnose import config as config_module
from roceview.errors import BadInput

REPO = Path(__file__).resolve().parents[2]
HUGE_HEX = "0x" + "f" * 20_000        # TOML reads hex of any length: an int of 80,000 bits
DEEP = "[" * 2000 + "]" * 2000


def _refused(tmp_path, text, *, raw: bytes | None = None) -> str:
    path = tmp_path / "c.toml"
    path.write_bytes(raw if raw is not None else text.encode())
    with pytest.raises(BadInput) as err:
        load_config(path)
    message = str(err.value)
    assert "\n" not in message and "\r" not in message and len(message) < 600, message
    return message


@pytest.mark.parametrize("text", ["diagnose = 5\n", "diagnose = [1]\n", "diagnose = \"x\"\n",
                                  "[[diagnose]]\nstorm_ms = 1.0\n"])
def test_a_diagnose_key_that_is_not_a_table_is_refused(tmp_path, text):
    assert "diagnose must be a table" in _refused(tmp_path, text)


def test_bytes_that_are_not_utf8_are_refused(tmp_path):
    message = _refused(tmp_path, "", raw=b"[diagnose]\nstorm_ms = 1.0 # \xff\xfe\n")
    assert "not UTF-8" in message


@pytest.mark.parametrize("text", [f"x = {DEEP}\n", f"[diagnose]\npfc_priorities = {DEEP}\n",
                                  "x = " + "{a = " * 2000 + "1" + "}" * 2000 + "\n"],
                         ids=["array", "array-in-diagnose", "inline-table"])
def test_arrays_and_tables_nested_thousands_deep_are_refused(tmp_path, text):
    assert "nested" in _refused(tmp_path, text)


def test_a_decimal_integer_of_100000_digits_is_refused(tmp_path):
    message = _refused(tmp_path, "max_examples = " + "9" * 100_000 + "\n")
    assert "digits" in message and "set_int_max_str_digits" not in message


@pytest.mark.parametrize("key", ["storm_ms", "max_examples", "ack_timeout_floor_us", "storm_share"])
def test_a_hex_integer_of_80000_bits_is_refused_without_printing_it(tmp_path, key):
    message = _refused(tmp_path, f"{key} = {HUGE_HEX}\n")
    assert f"{key} must be" in message


@pytest.mark.parametrize("key, value", [
    ("ack_timeout_floor_us", "nan"), ("ack_timeout_floor_us", "inf"), ("ack_timeout_floor_us", "-1"),
    ("ack_timeout_floor_us", "1e300"), ("not_ect_min_packets", "nan"), ("not_ect_min_packets", "-1"),
    ("not_ect_min_packets", "0.5"), ("incast_senders", "2.5"), ("incast_senders", "4.0"),
    ("incast_senders", "0"), ("max_examples", "-inf"), ("read_rerequest_span", "0"),
    ("read_rerequest_span", str(1 << 40)), ("link_rate_margin", "1e300"), ("pause_only_min_gbps", "inf"),
    ("storm_share", "nan"), ("cnp_wait_us", "-0.5"), ("reread_capture", "1"), ("trust", "3"),
    ("dscp_to_priority", "[]"), ("pfc_priorities", "{}"), ("pfc_priorities", "[[3]]"),
])
def test_every_setting_refuses_a_value_of_the_wrong_kind_or_out_of_range(tmp_path, key, value):
    """nan, inf, -1 and 1e300 were taken for ack_timeout_floor_us (nan removed the
    timeout_retransmit finding), and nan, -1 and 0.5 for not_ect_min_packets, 2.5 for
    incast_senders: only the keys listed in a range table were checked."""
    assert f"{key} must be" in _refused(tmp_path, f"[diagnose]\n{key} = {value}\n")


@pytest.mark.parametrize("mapping", ['{ "\u00b2" = 3 }', '{ "64" = 3 }', '{ "-1" = 3 }', '{ "26" = 8 }',
                                     '{ "26" = 3.0 }', '{ "26" = true }', '{ "" = 3 }', '{ " 26" = 3 }'])
def test_a_dscp_map_with_a_bad_dscp_or_priority_is_refused(tmp_path, mapping):
    """'\u00b2' is a digit to str.isdigit but not to int(): it was a ValueError traceback."""
    assert "dscp_to_priority must be a table mapping DSCPs" in _refused(tmp_path, f"[diagnose]\ndscp_to_priority = {mapping}\n")


def test_a_setting_above_the_diagnose_table_is_refused(tmp_path):
    """A key written before the `[diagnose]` line is at top level, where it was silently
    ignored (the table wins): the default stayed without a word."""
    message = _refused(tmp_path, "storm_ms = 5.0\n[diagnose]\ntrust = \"dscp\"\n")
    assert "storm_ms is outside the [diagnose] table" in message
    path = tmp_path / "other.toml"
    path.write_text("[other_tool]\nx = 1\n[diagnose]\ntrust = \"dscp\"\n")   # other tables stay allowed
    assert load_config(path).trust == "dscp"


def test_a_dscp_written_with_a_leading_zero_maps_that_dscp(tmp_path):
    """"046" passed the check but the lookup asks for "46": the mapping was silently unused."""
    path = tmp_path / "c.toml"
    path.write_text('[diagnose]\ndscp_to_priority = { "046" = 5, "8" = 1 }\n')
    cfg = load_config(path)
    assert cfg.priority_of_dscp(46) == 5 and cfg.priority_of_dscp(8) == 1 and cfg.priority_of_dscp(26) == 3


def test_every_config_field_has_a_declared_check():
    """A new setting cannot be added without saying what values it takes."""
    names = {f.name for f in dataclasses.fields(Config)}
    assert set(config_module.RANGES) == names


def test_the_defaults_pass_their_own_checks():
    assert load_config(**{f.name: getattr(DEFAULTS, f.name) for f in dataclasses.fields(Config)}) == DEFAULTS


def test_a_long_value_is_shortened_in_the_message(tmp_path):
    message = _refused(tmp_path, "[diagnose]\ntrust = \"" + "x" * 100_000 + "\"\n")
    assert "trust must be" in message


def test_a_config_path_with_a_newline_is_named_on_one_line(tmp_path):
    with pytest.raises(BadInput) as err:
        load_config(tmp_path / "a\nb.toml")
    assert "cannot read config" in str(err.value) and "\n" not in str(err.value)


def test_an_endless_config_file_is_refused_after_a_bounded_read():
    """/dev/zero was read until memory ran out (tomllib reads the whole file first)."""
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    _, err, code = _cli("/dev/zero")
    assert code == 2 and "larger than" in err


def _limit_memory():             # before the bounded read, /dev/zero ate memory: fail, not swap
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def _cli(config_path) -> tuple[str, str, int]:
    done = subprocess.run([sys.executable, "-m", "roceview", "analyze", str(REPO / "captures" / "clean.pcap"),
                           "--config", str(config_path)], capture_output=True, text=True, cwd=REPO,
                          timeout=120, preexec_fn=_limit_memory)
    return done.stdout, done.stderr, done.returncode


@pytest.mark.parametrize("text", ["diagnose = 5\n", "[[diagnose]]\n", f"x = {DEEP}\n",
                                  "max_examples = " + "9" * 100_000 + "\n", "ack_timeout_floor_us = nan\n",
                                  "incast_senders = 2.5\n", f"storm_ms = {HUGE_HEX}\n", b"x = \"\xff\"\n"],
                         ids=["diagnose-int", "diagnose-array", "nested", "long-int", "nan", "fraction", "hex",
                              "not-utf8"])
def test_analyze_with_a_bad_config_exits_2_with_one_line(tmp_path, text):
    path = tmp_path / "bad.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    out, err, code = _cli(path)
    assert code == 2 and err.count("\n") == 1 and err.startswith("roceview: error: config "), err[-2000:]
    assert "Traceback" not in err and out == ""
