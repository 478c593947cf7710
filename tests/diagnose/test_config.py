"""Thresholds, the TOML loader, the output shape, dedupe, and the no-rich/textual contract."""
from __future__ import annotations

import ast
import dataclasses
import tomllib
from pathlib import Path

import pytest

from roceview.diagnose import COLUMNS, DEFAULTS, diagnose, load_config
from roceview.diagnose.finding import finalize, finding
from roceview.errors import BadInput
from roceview.generate import generate, write_capture

PACKAGE = Path(__file__).resolve().parents[2] / "roceview" / "diagnose"


def test_defaults_toml_matches_the_dataclass_defaults():
    data = tomllib.loads((PACKAGE / "defaults.toml").read_text())["diagnose"]
    for f in dataclasses.fields(DEFAULTS):
        assert data[f.name] == getattr(DEFAULTS, f.name), f.name
    assert load_config(PACKAGE / "defaults.toml") == DEFAULTS


def test_config_file_overrides_a_default(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[diagnose]\npause_warning_share = 0.5\ntrust = \"dscp\"\n")
    cfg = load_config(path)
    assert cfg.pause_warning_share == 0.5 and cfg.trust == "dscp" and cfg.storm_ms == DEFAULTS.storm_ms


@pytest.mark.parametrize("text,message", [
    ("storm_msec = 3\n", "unknown setting 'storm_msec'"),
    ("storm_ms = \"fast\"\n", "storm_ms must be a float"),
    ("trust = \"vlan\"\n", "trust must be auto, pcp or dscp"),
    ("storm_ms = \n", "config"),
])
def test_bad_config_is_one_line_bad_input(tmp_path, text, message):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(BadInput, match=message) as err:
        load_config(path)
    assert "\n" not in str(err.value)


def test_missing_config_file_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="cannot read config"):
        load_config(tmp_path / "absent.toml")


def test_dscp_map_from_config():
    cfg = load_config(dscp_to_priority={"46": 5})
    assert cfg.priority_of_dscp(46) == 5 and cfg.priority_of_dscp(26) == 3


def test_identical_evidence_is_reported_once():
    a = finding("warning", "rnr", "x", ["f1"], 1, 2, ["same"], "do")
    b = finding("warning", "rnr", "x again", ["f1"], 5, 6, ["same"], "do")
    c = finding("critical", "rnr", "y", ["f2"], 0, 1, ["other"], "do")
    assert [r["summary"] for r in finalize([a, b, c])] == ["y", "x"]


def test_diagnose_returns_a_dataframe_with_the_findings_columns(tmp_path):
    import roceview.api

    path = tmp_path / "t.pcap"
    write_capture(generate("tail-timeout", seed=0), path)
    result = roceview.api.analyze(str(path), diagnose=False, warn=lambda m: None)
    frame = diagnose(result)
    assert tuple(frame.columns) == COLUMNS
    assert str(frame["start_ts"].dtype) == "int64" and (frame["end_ts"] >= frame["start_ts"]).all()
    row = frame[frame["kind"] == "timeout_retransmit"].iloc[0]
    assert row["severity"] == "warning" and "local_ack_timeout_err" in row["advice"]
    assert row["flows"].startswith("10.0.0.1>10.0.0.2:0x")
    result.findings = frame                       # the engine's setter takes it as is
    assert result.findings_table.data["kind"] == list(frame["kind"])


def test_clean_capture_diagnoses_to_an_empty_frame(tmp_path):
    import roceview.api

    path = tmp_path / "c.pcap"
    write_capture(generate("clean", seed=0), path)
    frame = diagnose(roceview.api.analyze(str(path), diagnose=False, warn=lambda m: None))
    assert len(frame) == 0 and tuple(frame.columns) == COLUMNS


def test_diagnose_package_imports_no_rich_or_textual():
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [m for m in names if m.split(".")[0] in ("rich", "textual")], path.name
        assert len(path.read_text().splitlines()) <= 400, path.name


@pytest.mark.parametrize("setting", ["storm_ms", "storm_window_ms", "link_rate_window_ms", "incast_window_us",
                                     "nak_window_us", "cnp_wait_us"])
def test_a_duration_past_a_year_is_one_line_bad_input(tmp_path, setting):
    """1e16 (ms or us) passed the range check and overflowed int64 nanoseconds in the rules: a
    traceback from `analyze --config` (rev4's review)."""
    import subprocess
    import sys

    from roceview.diagnose.config import YEAR_MS

    path = tmp_path / "c.toml"
    path.write_text(f"[diagnose]\n{setting} = 1e16\n")
    with pytest.raises(BadInput, match=f"{setting} must be a duration .* at most a year"):
        load_config(path)
    year = YEAR_MS if setting.endswith("_ms") else YEAR_MS * 1000
    assert getattr(load_config(**{setting: float(year)}), setting) == year
    sample = Path(__file__).resolve().parents[2] / "captures" / "incast.pcap"
    done = subprocess.run([sys.executable, "-m", "roceview", "analyze", str(sample), "--config", str(path)],
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("setting", ["storm_ms", "storm_window_ms", "link_rate_window_ms", "incast_window_us",
                                     "nak_window_us"])
def test_a_duration_under_a_nanosecond_is_one_line_bad_input(tmp_path, setting):
    """More than 0 but under 1 ns passed the range check and was 0 ns in the rules: a
    storm_window_ms of 1e-7 divided by a zero-length window (a RuntimeWarning on stderr and a
    pfc_storm 'paused inf%'); 1 ns itself is allowed."""
    path = tmp_path / "c.toml"
    path.write_text(f"[diagnose]\n{setting} = 1e-7\n")
    with pytest.raises(BadInput, match=f"{setting} must be a duration of at least 1 ns"):
        load_config(path)
    ns = 1e-6 if setting.endswith("_ms") else 1e-3
    assert getattr(load_config(**{setting: ns}), setting) == ns


@pytest.mark.parametrize("setting, value, message", [("link_rate_margin", 0, "a factor > 0"),
                                                     ("link_rate_margin", -1.25, "a factor > 0"),
                                                     ("pause_only_min_gbps", -10, "a rate >= 0")])
def test_a_negative_or_zero_factor_is_one_line_bad_input(setting, value, message):
    """link_rate_margin <= 0 would call every host's rate a mismatch; a negative assumed PAUSE
    speed means nothing (rev5's review): both were taken as given."""
    with pytest.raises(BadInput, match=f"{setting} must be {message}"):
        load_config(**{setting: value})
    assert load_config(pause_only_min_gbps=0).pause_only_min_gbps == 0
